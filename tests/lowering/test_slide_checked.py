"""Sliding windows whose start is not provably moving forward slide where it did not move
back, checked at run time (hdsl/lower/loops.py: Lowering.slide). camera_pipe's planes are
such Funcs: their consumers' windows end at the last row of a round_up tile laid over the
tone curve's slid start, `S + 2 * ((M - S + 2) / 2) - 1`, always M here but not provably
monotonic; without the check the denoise and the deinterleave computed their whole window
(8 and 4 rows) at every pair of output rows instead of the 2 and 1 new ones. The pipeline
below has the same shape: p -> g (both stored per strip, computed per row of it) -> q
(computed per tile of c) -> c (tiled 8 x 2, round_up, slid) -> out. Values against the
reference evaluator and NumPy for every strip remainder and parity of the first row."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline slide2
input img: i32[2]
output out: i32[2]
algorithm {
    p(x, y) = img(x, y) * 3 + 1
    g(x, y) = p(x, y) + p(x, y + 1) * 5
    q(x, y) = g(x, y) - p(x, y - 1)
    c(x, y) = q(x, y) * 7 + 2
    out(x, y) = c(x, y - 1) + c(x, y + 1) * 11
}
schedule strips {
    out.split(y, yo, yi, 8)
    c.compute_at(out, yi).store_at(out, yo).tile(x, y, x, y, xi, yi, 8, 2, round_up)
    q.compute_at(c, x)
    g.compute_at(out, yi).store_at(out, yo)
    p.compute_at(out, yi).store_at(out, yo)
}
"""


def _numpy(img, x0, y0, w, h):
    f = img.astype(np.int64)

    def p(x, y):
        return f[y, x] * 3 + 1

    def g(x, y):
        return p(x, y) + p(x, y + 1) * 5

    def c(x, y):
        return (g(x, y) - p(x, y - 1)) * 7 + 2
    xs = np.arange(x0, x0 + w)[None, :]
    ys = np.arange(y0, y0 + h)[:, None]
    return (c(xs, ys - 1) + c(xs, ys + 1) * 11).astype(np.int32)


@pytest.mark.parametrize("h, y0", [(32, 4), (29, 4), (13, 5), (8, 3), (3, 6)])
def test_checked_slides_give_the_evaluators_values(h, y0):
    p = hdsl.loads(SRC, "slide2.hl")
    w = 21
    img = np.random.RandomState(h + y0).randint(-1000, 1000, (y0 + h + 8, w + 9)).astype(np.int32)
    got = p.compile("host", schedule="strips").realize((w, h), min=(0, y0), img=img)
    ref = p.realize((w, h), min=(0, y0), img=img)
    assert np.array_equal(ref, _numpy(img, 0, y0, w, h))
    assert np.array_equal(got, ref)


def test_the_planes_slide():
    """p's and g's regions start after the previous row's (their start is no longer the
    region each row requires: before, monotonic() could not show p's start moving forward
    and both computed their whole window every row)."""
    stmt = compiled_form(hdsl.loads(SRC, "slide2.hl").ir, "stmt", schedule="strips")
    lets = {}
    for line in stmt.splitlines():
        line = line.strip()
        if line.startswith("let ") and " = " in line:
            name, value = line[4:].split(" = ", 1)
            lets.setdefault(name, value)
    for f in ("p", "g"):
        assert lets[f"{f}.s0.y.min"] != lets[f"{f}.y.req.min"], f
        assert "||" in lets[f"{f}.s0.y.min"] or "max(" in lets[f"{f}.s0.y.min"], f


# fold_storage on the checked slides: the planes keep n rows, addressed modulo n (fold_check's
# induction in hdsl/lower/loops.py: the window, checked at run time, is all the fold needs).
# Their windows here (the rows each row of a strip needs at once; the most at a strip's first
# row, where c needs y - 1 .. y + 1): g 3 rows, p 5. (c's round_up tile of two rows computes
# y + 2 too, from whatever the planes' storage holds there, and never uses it: as Halide's
# RoundUp, the planes are computed over what c's region needs, not over its rounded tiles;
# before, they were, and held 4 and 6 rows.)
FOLDED = SRC.replace("g.compute_at(out, yi).store_at(out, yo)",
                     "g.compute_at(out, yi).store_at(out, yo).fold_storage(y, G)") \
            .replace("p.compute_at(out, yi).store_at(out, yo)",
                     "p.compute_at(out, yi).store_at(out, yo).fold_storage(y, P)")


def folded(g, p):
    return hdsl.loads(FOLDED.replace("G", str(g)).replace("P", str(p)), "slide2.hl")


@pytest.mark.parametrize("h, y0", [(32, 4), (29, 4), (13, 5), (8, 3), (3, 6), (1, 2)])
@pytest.mark.parametrize("g, p", [(3, 5), (4, 6), (4, 8), (8, 8)])
def test_folded_checked_slides_give_the_evaluators_values(h, y0, g, p):
    """Strips of 8 rows: several slid rows per strip, a last partial strip, and outputs of 3
    and 1 rows, where no row slides; folds exactly the largest window (3 and 5 rows) and
    larger, against the evaluator and NumPy."""
    prog = folded(g, p)
    w = 19
    img = np.random.RandomState(7 * h + y0).randint(-1000, 1000, (y0 + h + 8, w + 9)).astype(np.int32)
    got = prog.compile("host", schedule="strips").realize((w, h), min=(0, y0), img=img)
    assert np.array_equal(got, _numpy(img, 0, y0, w, h))
    assert np.array_equal(got, prog.realize((w, h), min=(0, y0), img=img))


def test_the_folded_planes_slide_and_wrap():
    """Both planes are addressed modulo their factor and still slide: p behind the run-time
    check, g (whose start the rules do show moving forward here) without it."""
    stmt = compiled_form(folded(4, 8).ir, "stmt", schedule="strips")
    assert "% 4 * g.stride.1" in stmt and "% 8 * p.stride.1" in stmt
    lets = dict(line.strip()[4:].split(" = ", 1) for line in stmt.splitlines()
                if line.strip().startswith("let ") and " = " in line)
    assert "||" in lets["p.s0.y.min"]
    assert "||" not in lets["g.s0.y.min"] and "max(" in lets["g.s0.y.min"]


def test_a_fold_under_the_checked_window_is_a_run_time_error():
    """p holds 5 rows at once at a strip's first row: fold_storage(y, 4) would overwrite a row
    still to be read, so the call fails naming the directive instead of returning values."""
    prog = folded(4, 4)
    img = np.zeros((40, 30), np.int32)
    with pytest.raises(hdsl.HdslError) as e:
        prog.compile("host", schedule="strips").realize((19, 16), min=(0, 4), img=img)
    msg = str(e.value)
    assert "fold_storage(y, 4) is too small: 'p' holds 5 slices along y at once" in msg
    assert "slide2.hl:" in msg and "^" in msg
