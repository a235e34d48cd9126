"""Run-time checks of compiled pipelines: before touching memory, generated code
checks every input against the region the outputs need (and reports it as the
evaluator does), and every output against the region written; errors are
HdslErrors, never a crash or an out-of-bounds access."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hdsl
from compiler_corpus import CORPUS, load

BLUR = """
pipeline blur_no_boundary
input  img: u16[2]
output out: u16[2]
algorithm {
    blur_x(x, y) = (img(x - 1, y) + img(x, y) + img(x + 1, y)) / 3
    out(x, y)    = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3
}
schedule tiled {
    out.tile(x, y, xi, yi, 8, 4).vectorize(xi, 4).parallel(y)
    blur_x.compute_at(out, x)
}
schedule rounded {
    blur_x.compute_root().vectorize(x, 4)
}
schedule rooted {
    blur_x.compute_root().split(y, yo, yi, 3).parallel(yo)
}
"""

TWO_STENCILS = """
pipeline two_stencils
input  img: u8[2]
input  other: u8[2]
output out: u8[2]
algorithm {
    out(x, y) = img(x - 1, y) + other(x, y + 1)
}
schedule vec {
    out.vectorize(x, 8).parallel(y)
}
"""

HISTOGRAM = """
pipeline hist_out
input  img: u8[2]
output hist: i32[1]
algorithm {
    rdom r = img
    hist(i32(img(r.x, r.y))) += 1
}
schedule par {
    hist.vectorize(_0, 8)
}
"""

READ_MSG = re.compile(r"^error: input '(\w+)' is read at ([xyc]) = (-?\d+) \.\. (-?\d+), "
                      r"but the buffer covers \2 = 0 \.\. (\d+)$")


def first_line(e: Exception) -> str:
    return str(e).splitlines()[0]


def errors_of(p, c, size, **args):
    """(evaluator's error, native error); each an HdslError."""
    with pytest.raises(hdsl.HdslError) as ev:
        p.realize(size, **args)
    with pytest.raises(hdsl.HdslError) as nat:
        c.realize(size, **args)
    return ev.value, nat.value


@pytest.mark.parametrize("schedule", [None, "tiled", "rooted"])
@pytest.mark.parametrize("w,h", [(37, 23), (1, 1), (5, 3)])
def test_stencil_without_boundary_reads_outside(schedule, w, h):
    p = hdsl.loads(BLUR, "blur_no_boundary.hl")
    c = p.compile("host", schedule=schedule)
    img = np.ones((h, w), np.uint16)
    ev, nat = errors_of(p, c, (w, h), img=img)
    assert first_line(nat) == f"error: input 'img' is read at x = -1 .. {w}, but the buffer covers x = 0 .. {w - 1}"
    assert str(nat) == str(ev)
    # an input one pixel larger on every side still fails (x = -1 is never covered) ...
    ev, nat = errors_of(p, c, (w, h), img=np.ones((h + 2, w + 2), np.uint16))
    assert str(nat) == str(ev)
    assert READ_MSG.match(first_line(nat)), first_line(nat)


@pytest.mark.parametrize("w,h", [(37, 23), (1, 1), (5, 3)])
def test_rounded_up_producer_reads_further(w, h):
    """A split of a producer's pure definition rounds its region up (Halide's rule), so the
    compiled pipeline may need more of the input than the evaluator: still an error naming x = -1."""
    p = hdsl.loads(BLUR, "blur_no_boundary.hl")
    c = p.compile("host", schedule="rounded")
    with pytest.raises(hdsl.HdslError) as e:
        c.realize((w, h), img=np.ones((h, w), np.uint16))
    m = READ_MSG.match(first_line(e.value))
    assert m, first_line(e.value)
    assert m.group(1) == "img" and m.group(2) == "x" and int(m.group(3)) == -1 and int(m.group(4)) >= w
    assert int(m.group(5)) == w - 1


def test_two_inputs_both_too_small_report_the_first():
    p = hdsl.loads(TWO_STENCILS, "two_stencils.hl")
    for schedule in (None, "vec"):
        c = p.compile("host", schedule=schedule)
        ev, nat = errors_of(p, c, (5, 4), img=np.zeros((4, 5), np.uint8), other=np.zeros((4, 5), np.uint8))
        assert first_line(nat) == "error: input 'img' is read at x = -1 .. 3, but the buffer covers x = 0 .. 4"
        assert str(nat) == str(ev)


# multi_in reads img(x, y) and other(x + 2, y + 1): each input alone can be too small
W, H = 13, 7
MULTI_IN_CASES = [
    # (shape of img, shape of other) in (rows, cols), and the message
    ((H, W - 1), (H + 1, W + 2), f"input 'img' is read at x = 0 .. {W - 1}, but the buffer covers x = 0 .. {W - 2}"),
    ((H - 1, W), (H + 1, W + 2), f"input 'img' is read at y = 0 .. {H - 1}, but the buffer covers y = 0 .. {H - 2}"),
    ((H, W), (H + 1, W + 1), f"input 'other' is read at x = 2 .. {W + 1}, but the buffer covers x = 0 .. {W}"),
    ((H, W), (H, W + 2), f"input 'other' is read at y = 1 .. {H}, but the buffer covers y = 0 .. {H - 1}"),
    ((H, W), (1, 1), f"input 'other' is read at x = 2 .. {W + 1}, but the buffer covers x = 0 .. 0"),
]


@pytest.mark.parametrize("schedule", [None, "plain"])
@pytest.mark.parametrize("s_img,s_other,message", MULTI_IN_CASES)
def test_each_input_of_a_multi_input_pipeline(schedule, s_img, s_other, message):
    spec = CORPUS["multi_in"]
    p = load(spec, "\nschedule plain {\n}\n")
    c = p.compile("host", schedule=schedule)
    rng = np.random.default_rng(0)
    args = dict(img=rng.integers(0, 256, s_img).astype(np.uint8),
                other=rng.integers(-100, 100, s_other).astype(np.int16))
    ev, nat = errors_of(p, c, (W, H), **args)
    # `message` names the read that does not fit. Both the evaluator and the compiled code
    # report the union of the input's reads (the boundary-condition reads included), and
    # the compiled code's symbolic bounds may be wider than the evaluator's numeric ones:
    # same input, dimension and buffer, a range that contains the failing read's
    want = READ_MSG.match("error: " + message)
    for err in (ev, nat):
        m = READ_MSG.match(first_line(err))
        assert m, first_line(err)
        assert m.group(1, 2, 5) == want.group(1, 2, 5)
        assert int(m.group(3)) <= int(want.group(3)) and int(m.group(4)) >= int(want.group(4))


@pytest.mark.parametrize("schedule", [None, "par"])
def test_histogram_output_too_small_is_an_error(schedule):
    p = hdsl.loads(HISTOGRAM, "hist_out.hl")
    c = p.compile("host", schedule=schedule)
    img = np.random.default_rng(1).integers(0, 256, (9, 11)).astype(np.uint8)
    for n in (100, 255, 1):
        with pytest.raises(hdsl.HdslError) as e:
            c.realize((n,), img=img)
        assert first_line(e.value) == \
            f"error: output 'hist' is written at x = 0 .. 255, but the buffer covers x = 0 .. {n - 1}"
    # and the right size works
    assert np.array_equal(c.realize((256,), img=img), np.bincount(img.ravel(), minlength=256).astype(np.int32))


def test_histogram_output_too_small_never_crashes():
    """In a separate process, so that a crash is seen as one: the call must raise HdslError."""
    code = textwrap.dedent(f"""
        import numpy as np, hdsl
        p = hdsl.loads({HISTOGRAM!r}, "hist_out.hl")
        img = np.full((50, 60), 255, np.uint8)
        for schedule in (None, "par"):
            c = p.compile("host", schedule=schedule)
            for n in (1, 2, 17, 255):
                try:
                    c.realize((n,), img=img)
                except hdsl.HdslError:
                    continue
                raise SystemExit(f"no error for an output of {{n}} bins")
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr[-3000:]}"
    assert r.stdout.strip() == "ok"


def test_unroll_of_a_loop_without_constant_extent_is_not_an_internal_error():
    """`unroll(ch)` of a loop whose extent is only known at run time: Halide rejects it with a
    user error; hdsl may run it serially or reject it, but with an HdslError, not InternalError."""
    text = CORPUS["color"].text + "\nschedule unroll_c {\n    out.reorder(ch, x, y).unroll(ch)\n}\n"
    p = hdsl.loads(text, "color.hl")
    try:
        c = p.compile("host", schedule="unroll_c")
    except hdsl.HdslError:
        return
    img = np.random.default_rng(2).integers(0, 256, (5, 7, 3)).astype(np.uint8)
    assert np.array_equal(c.realize((7, 5, 3), img=img), p.realize((7, 5, 3), img=img))
