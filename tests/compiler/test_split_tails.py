"""Split tails and the regions they read (issue 23, items 2 and 4).

Halide's default tail strategy (TailStrategy::Auto, src/Schedule.h and Stage::split in
src/Func.cpp) is ShiftInwards for a pure definition: the last tile is moved back to end
at the region's end, recomputing a few points, so "if used on a stage that reads from an
input ... this strategy only requires that the input/output extent be at least the split
factor, instead of a multiple of the split factor as with RoundUp". hdsl goes one step
further: a region narrower than the factor clamps the inner var, so a schedule never
makes a valid input size fail. RoundUp and GuardWithIf are available as a split's last
argument (`round_up`, `guard_with_if`), as `TailStrategy::RoundUp` is in Halide.
test/correctness/nested_tail_strategies.cpp checks the same things there: sizes larger
than every split work without RoundUp, and allocations stay tight.
"""
from __future__ import annotations

import numpy as np
import pytest

import hdsl


def run_both(text, size, **args):
    p = hdsl.loads(text, "<tails>")
    expected = p.realize(size, **args)
    got = p.compile("host").realize(size, **args)
    return got, expected


def native_error(text, size, **args) -> str:
    p = hdsl.loads(text, "<tails>")
    with pytest.raises(hdsl.HdslError) as native:
        p.compile("host").realize(size, **args)
    with pytest.raises(hdsl.HdslError) as interp:
        p.realize(size, **args)
    return str(native.value).splitlines()[0], str(interp.value).splitlines()[0]


DIAG = """
pipeline diag
input img: i32[1]
output g: i32[2]
algorithm {
    f(x, y) = img(x + y)
    g(x, y) = f(x, y)
}
schedule { f.compute_root().vectorize(x, 4TAIL) }
"""


@pytest.mark.parametrize("tail", ["", ", round_up", ", guard_with_if", ", shift_inwards"])
def test_required_region_is_exact(tail):
    """The issue's program: an 8x8 g reads img(x + y) at 0 .. 14, so 15 values suffice and 14
    do not; native code said "read at 0 .. 17" (the vector width added twice), for every
    tail strategy (8 is a multiple of 4: rounding up computes nothing extra)."""
    text = DIAG.replace("TAIL", tail)
    img = np.arange(15, dtype=np.int32)
    got, expected = run_both(text, (8, 8), img=img)
    by_hand = np.add.outer(np.arange(8), np.arange(8)).astype(np.int32)     # [y, x] = x + y
    assert (expected == by_hand).all() and (got == by_hand).all()
    native, interp = native_error(text, (8, 8), img=np.arange(14, dtype=np.int32))
    assert "is read at x = 0 .. 14, but the buffer covers x = 0 .. 13" in native
    assert native == interp


LINE = """
pipeline line
input img: i32[1]
output g: i32[1]
algorithm {
    f(x) = img(x) * 2
    g(x) = f(x) + 1
}
schedule { SCHED }
"""


@pytest.mark.parametrize("sched", [
    "f.compute_root().vectorize(x, 8)",
    "f.compute_root().split(x, xo, xi, 8).vectorize(xi).parallel(xo)",
    "f.compute_root().vectorize(x, 8).unroll(x, 4)",
    "g.split(x, xo, xi, 16)\n f.compute_at(g, xo).vectorize(x, 8)",
    "g.split(x, xo, xi, 64)\n f.compute_at(g, xo).split(x, xo, xi, 8)",
])
@pytest.mark.parametrize("n", [1, 3, 8, 13, 130])
def test_default_tail_never_reads_past_the_input(sched, n):
    """img has exactly g's width: a split that rounded f's region up read past it (sizes
    that are not a multiple of 8, and those below 8, where Halide's ShiftInwards also fails)."""
    img = np.arange(n, dtype=np.int32) * 3 - 7
    got, expected = run_both(LINE.replace("SCHED", sched), (n,), img=img)
    assert (expected == img * 2 + 1).all()
    assert (got == expected).all()


def test_round_up_reads_past_the_end_as_halide_says():
    """TailStrategy::RoundUp "constrains the input or output size to be a multiple of the
    split factor" (src/Schedule.h): with round_up, 13 values are too few for a rounded-up
    f (16 points), and the error names the rounded region; the evaluator, which ignores
    schedules, computes it."""
    text = LINE.replace("SCHED", "f.compute_root().vectorize(x, 8, round_up)")
    p = hdsl.loads(text, "<tails>")
    img = np.arange(13, dtype=np.int32)
    assert (p.realize((13,), img=img) == img * 2 + 1).all()
    with pytest.raises(hdsl.HdslError, match=r"read at x = 0 \.\. 15, but the buffer covers x = 0 \.\. 12"):
        p.compile("host").realize((13,), img=img)
    got, expected = run_both(text, (16,), img=np.arange(16, dtype=np.int32))
    assert (got == expected).all()


@pytest.mark.parametrize("tail", ["round_up", "shift_inwards", "guard_with_if"])
def test_explicit_tails_give_the_same_values(tail):
    text = """
pipeline t
input img: u8[2]
output out: u16[2]
algorithm {
    f(x, y) = u16(img(x, y)) * 3
    out(x, y) = f(x, y) + f(x, y)
}
schedule { f.compute_at(out, y).split(x, xo, xi, 8, TAIL).vectorize(xi)
           out.tile(x, y, xi, yi, 4, 2, TAIL2) }
""".replace("TAIL2", "guard_with_if" if tail == "round_up" else tail).replace("TAIL", tail)
    img = np.random.default_rng(3).integers(0, 256, (5, 16), dtype=np.uint8)
    got, expected = run_both(text, (16, 5), img=img)
    assert (expected == img.astype(np.uint16) * 6).all()
    assert (got == expected).all()


@pytest.mark.parametrize("bad, message", [
    ("f.compute_root().vectorize(x, 8, roundup)", "'roundup' is not a tail strategy; did you mean 'round_up'?"),
    ("f.compute_root().vectorize(x, shift_inwards)", "vectorize(x) does not split, so it takes no tail strategy"),
])
def test_tail_argument_errors(bad, message):
    with pytest.raises(hdsl.HdslError, match=message.replace("(", r"\(").replace(")", r"\)")):
        hdsl.loads(LINE.replace("SCHED", bad), "<tails>")


def test_round_up_in_an_update_is_refused():
    """Halide: "Can't use TailStrategy::RoundUp for splitting x in update definition of f.
    It may redundantly recompute some values, which could change the meaning of the
    algorithm. Use TailStrategy::GuardWithIf instead." (src/Func.cpp, Stage::split)"""
    text = """
pipeline u
input img: i32[1]
output g: i32[1]
algorithm {
    g(x) = img(x)
    g(x) += 1
}
schedule { g.update(0).split(x, xo, xi, 8, round_up) }
"""
    with pytest.raises(hdsl.HdslError, match="round_up would compute some points of update"):
        hdsl.loads(text, "<tails>")


def test_tiled_blur_runs_on_its_inner_points():
    """The blur of the language reference (section 1, no boundary condition) with its tiled
    schedule, run on the points whose neighbours all exist (min 1,1, 254 x 190 of a 256 x 192
    image): blur_x's rounded-up split read up to x = 270 and the run was refused."""
    text = """
pipeline blur
input  img: u16[2]
output out: u16[2]
algorithm {
    blur_x(x, y) = (img(x - 1, y) + img(x, y) + img(x + 1, y)) / 3
    out(x, y)    = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3
}
schedule {
    out.tile(x, y, xi, yi, 256, 32).vectorize(xi, 16).parallel(y)
    blur_x.compute_at(out, x).vectorize(x, 16)
}
"""
    img = np.random.default_rng(0).integers(0, 65536, (192, 256), dtype=np.uint16)
    p = hdsl.loads(text, "<tails>")
    expected = p.realize((254, 190), min=(1, 1), img=img)
    got = p.compile("host").realize((254, 190), min=(1, 1), img=img)
    i = img.astype(np.uint16)
    bx = ((i[:, :-2] + i[:, 1:-1] + i[:, 2:]) // 3).astype(np.uint16)       # u16 arithmetic wraps
    by_hand = ((bx[:-2] + bx[1:-1] + bx[2:]) // 3).astype(np.uint16)
    assert (expected == by_hand).all()
    assert (got == expected).all()
