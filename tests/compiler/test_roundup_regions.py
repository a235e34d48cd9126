"""round_up is Halide's TailStrategy::RoundUp: a rounded-up stage computes up to n - 1 points
past its region, but its producers are computed only over what the stage's region needs
(Halide's bounds inference takes a consumer's required region, not its rounded loops; the
producers' storage covers every point the loops touch, and the extra lanes, computed from
whatever that storage holds, are never used). Halide 21 lowers the first pipeline below, with
the same schedule, to (compile_to_lowered_stmt, abridged):

    allocate e[uint16 * (((out.extent.0/8)*8) + 9)]
    produce e { for (e.s0.x.rebased, 0, out.extent.0 + 2) { ... } }
    produce c { for (c.s0.x.xo, 0, out.extent.0/8 + 1) { allocate d[uint16 * 8] ... } }

and bounds-queries `inp` at [out.min.0, out.extent.0 + 2): e over out's region plus one, though
c's tiles (and d, computed a whole tile at a time) reach out.extent.0 / 8 * 8 + 7.
hdsl before: e and inp over the rounded tiles, ((n + 1 + 7) / 8) * 8 + 1 points.
"""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

CHAIN = """
pipeline chain
input inp: u16[1]
output out: u16[1]
algorithm {
    e(x) = inp(x) * 2
    d(x) = e(x) + e(x + 1)
    c(x) = d(x) * 3
    out(x) = c(x) + c(x + 1)
}
schedule {
    out.vectorize(x, 8)
    c.compute_root().split(x, xo, xi, 8, round_up).vectorize(xi)
    d.compute_at(c, xo).vectorize(x)
    e.compute_root()
}
"""


def _by_hand(inp, n):
    i = inp.astype(np.uint16)
    e = (i * 2).astype(np.uint16)
    d = (e[:-1] + e[1:]).astype(np.uint16)
    c = (d * 3).astype(np.uint16)
    return (c[:-1] + c[1:]).astype(np.uint16)[:n]


def _errors(p, size, min=None, **inputs):
    """The first lines of the native and the evaluator's errors."""
    out = []
    for run in (p.compile("host").realize, p.realize):
        with pytest.raises(hdsl.HdslError) as e:
            run(size, min=min, **inputs)
        out.append(str(e.value).splitlines()[0])
    return out


@pytest.mark.parametrize("n", [1, 5, 8, 13, 30, 64])
def test_producers_of_a_rounded_up_stage_cover_its_region_only(n):
    """out of n points needs inp at 0 .. n + 1 (c at 0 .. n, d and e one more): n + 2 values
    run, n + 1 fail with the evaluator's own message, at every n, a multiple of 8 or not."""
    p = hdsl.loads(CHAIN, "chain.hl")
    inp = np.random.default_rng(n).integers(0, 65536, n + 2).astype(np.uint16)
    got = p.compile("host").realize((n,), inp=inp)
    assert np.array_equal(got, _by_hand(inp, n))
    assert np.array_equal(got, p.realize((n,), inp=inp))
    native, interp = _errors(p, (n,), inp=inp[:n + 1])
    assert native == interp == f"error: input 'inp' is read at x = 0 .. {n + 1}, but the buffer covers x = 0 .. {n}"


def test_a_rounded_up_stage_reading_an_input_still_reads_its_rounded_tiles():
    """The stage's own reads are its loops': an input it reads itself must cover its rounded
    tiles (Halide: RoundUp "constrains the input ... size to be a multiple of the split
    factor"), and the evaluator, which knows no schedule, needs less."""
    text = CHAIN.replace("c(x) = d(x) * 3", "c(x) = d(x) * 3 + inp(x + 2)")
    p = hdsl.loads(text, "chain.hl")
    inp = np.arange(16, dtype=np.uint16)
    p.realize((13,), inp=inp)          # (c needed at 0 .. 13 reads inp at 2 .. 15)
    # c's tiles cover 0 .. 15 (c is needed at 0 .. 13), reading inp at 2 .. 17
    with pytest.raises(hdsl.HdslError, match=r"input 'inp' is read at x = 0 \.\. 17, but the buffer covers x = 0 \.\. 15"):
        p.compile("host").realize((13,), inp=inp)
    assert np.array_equal(p.compile("host").realize((13,), inp=np.arange(18, dtype=np.uint16)),
                          p.realize((13,), inp=np.arange(18, dtype=np.uint16)))


GRID = """
pipeline grid
input img: u8[2]
input lut: u16[1]
input small: i16[1]
output out: u16[2]
algorithm {
    p(x, y) = u16(img(x, y)) * 3 + u16(img(x + 1, y))
    q(x, y) = p(x, y - 1) + p(x, y + 1) * 2
    t(x, y) = u8(q(x, y) % 251)
    g(x, y) = lut(i32(t(x, y))) + u16(small(clamp(i32(t(x - 1, y)) - 120, 0, 9)))
    c(x, y) = g(x, y) + q(x + 1, y)
    out(x, y) = c(x, y - 1) / 2 + c(x, y + 1) / 2 + c(x + 1, y)
}
schedule SCHED
"""

SCHEDULES = {
    # every producer at the root, the rounded-up stages' regions a tile past theirs
    "root": """{
    c.compute_root().tile(x, y, x, y, xi, yi, 8, 2, round_up).vectorize(xi)
    g.compute_root().vectorize(x, 16, round_up)
    t.compute_root().vectorize(x, 8, round_up)
    q.compute_root().vectorize(x, 8)
    p.compute_root()
}""",
    # strips: c slides down each strip in rounded-up tiles, g and t computed per tile of c
    # (a whole tile), q and p per row of the strip, stored per strip
    "strips": """{
    out.split(y, yo, yi, 8).vectorize(x, 8)
    c.compute_at(out, yi).store_at(out, yo).tile(x, y, x, y, xi, yi, 16, 2, round_up).vectorize(xi).unroll(yi)
    g.compute_at(c, x).vectorize(x).unroll(y)
    t.compute_at(c, x).vectorize(x)
    q.compute_at(out, yi).store_at(out, yo).vectorize(x, 8, round_up)
    p.compute_at(out, yi).store_at(out, yo).vectorize(x, 8)
}""",
    # the Funcs computed per tile of c rounded up themselves (t by 4 within c's 16)
    "nested": """{
    out.split(y, yo, yi, 8).vectorize(x, 8)
    c.compute_at(out, yi).store_at(out, yo).tile(x, y, x, y, xi, yi, 16, 2, round_up).vectorize(xi).unroll(yi)
    g.compute_at(c, x).vectorize(x, 8, round_up).unroll(y)
    t.compute_at(c, x).vectorize(x, 4, round_up)
    q.compute_at(out, yi).store_at(out, yo).vectorize(x, 8, round_up)
    p.compute_at(out, yi).store_at(out, yo).vectorize(x, 8)
}""",
}


def _grid_by_hand(img, lut, small, w, h, x0, y0):
    """out over [x0, x0 + w) x [y0, y0 + h), in NumPy from the algorithm (u16 arithmetic wraps)."""
    i = img.astype(np.int64)

    def p(x, y):
        return (i[y, x] * 3 + i[y, x + 1]) % 65536

    def q(x, y):
        return (p(x, y - 1) + p(x, y + 1) * 2) % 65536

    def t(x, y):
        return q(x, y) % 251

    def c(x, y):
        g = (lut[t(x, y)].astype(np.int64) + small[np.clip(t(x - 1, y) - 120, 0, 9)]) % 65536
        return (g + q(x + 1, y)) % 65536
    xs = np.arange(x0, x0 + w)[None, :]
    ys = np.arange(y0, y0 + h)[:, None]
    return ((c(xs, ys - 1) // 2 + c(xs, ys + 1) // 2 + c(xs + 1, ys)) % 65536).astype(np.uint16)


@pytest.mark.parametrize("sched", sorted(SCHEDULES))
@pytest.mark.parametrize("w, h", [(1, 1), (7, 3), (13, 9), (37, 19), (64, 16)])
def test_rounded_up_tiles_over_producers_computed_for_their_region(sched, w, h):
    """Values against NumPy and the evaluator at sizes that are no multiple of the vectors and
    tiles, from (2, 3) in an image exactly as large as out's footprint there: the tiles' extra
    lanes read the producers' storage past what was computed (t's there: any u8, looked up in
    lut, 256 entries, and, less 120 and clamped, in small) and are never used; any read past
    the image would be refused. out at (x, y) reads img at x - 1 .. x + 3, y - 3 .. y + 3."""
    p = hdsl.loads(GRID.replace("SCHED", SCHEDULES[sched]), "grid.hl")
    rng = np.random.default_rng(w * 100 + h)
    x0, y0 = 2, 3
    img = rng.integers(0, 256, (y0 + h + 3, x0 + w + 3), dtype=np.uint8)
    lut = rng.integers(0, 65536, 256).astype(np.uint16)
    small = rng.integers(-3000, 3000, 10).astype(np.int16)
    want = _grid_by_hand(img, lut, small, w, h, x0, y0)
    assert np.array_equal(p.realize((w, h), min=(x0, y0), img=img, lut=lut, small=small), want)
    got = p.compile("host").realize((w, h), min=(x0, y0), img=img, lut=lut, small=small)
    assert np.array_equal(got, want)
    # one column less, and the error is the evaluator's
    native, interp = _errors(p, (w, h), min=(x0, y0), img=img[:, :-1], lut=lut, small=small)
    assert native == interp == (f"error: input 'img' is read at x = 1 .. {x0 + w + 2}, but the buffer covers "
                                f"x = 0 .. {x0 + w + 1}")
