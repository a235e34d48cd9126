"""Strided loads on AVX2 picked within 128-bit halves (hdsl/codegen/gather_groups.py,
in_lane_order and pick; CodeGenCPU.in_lane_picks). A stride-2 load of 8 f32 lanes from two
dense vectors crosses the 256-bit vector's halves: vshufps (within halves) then vpermpd
(across them). Every tap of a [1 2 1] downsampling takes the same cross-half step, so it
is made as a separate one-source shuffle that LLVM moves past the lane-wise arithmetic
combining the taps: one vpermpd per result vector instead of one per tap (Halide's
interpolate app has one per tap: 9 for a 3x3 downsampling). Values: NumPy's sums in float64
of the same products (exact here: small integers in f32) and the evaluator's; the assembly
check fails without the change. AVX-512 has vpermt2ps, one instruction per tap, and keeps
the plain pick."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.codegen.gather_groups import in_lane_order

DOWN = """
pipeline down
input img: f32[2]
output out: f32[2]
algorithm {
    var x, y
    dx(x, y) = (img(2 * x - 1, y) + 2.0f * img(2 * x, y) + img(2 * x + 1, y)) * 0.25f
    out(x, y) = (dx(x, 2 * y - 1) + 2.0f * dx(x, 2 * y) + dx(x, 2 * y + 1)) * 0.25f
}
schedule {
    out.vectorize(x, LANES)
}
"""


def program(lanes=8):
    return hdsl.loads(DOWN.replace("LANES", str(lanes)), "down.hl")


def by_numpy(img, w, h):
    """out over x, y = 1 .. w, 1 .. h (the taps read from column and row 1)."""
    i = img.astype(np.float64)
    xs = np.arange(1, w + 1)

    def dx(r):
        return (i[r, 2 * xs - 1] + 2 * i[r, 2 * xs] + i[r, 2 * xs + 1]) * 0.25
    return np.stack([(dx(2 * y - 1) + 2 * dx(2 * y) + dx(2 * y + 1)) * 0.25 for y in range(1, h + 1)])


@pytest.mark.parametrize("target", ["x86-64-avx2", "x86-64-avx2-fast_math", "host"])
@pytest.mark.parametrize("w", [8, 13, 40])
def test_downsampling_gives_numpys_and_the_evaluators_values(target, w):
    """Output widths of one vector, a guarded tail (13) and several vectors, from x = y = 1
    (the taps then read the image from column and row 1)."""
    h = 5
    rs = np.random.RandomState(w)
    img = rs.randint(0, 64, (2 * h + 2, 2 * w + 2)).astype(np.float32)
    p = program()
    want = by_numpy(img, w, h)
    got = p.compile(target).realize((w, h), min=(1, 1), img=img)
    assert np.array_equal(got, want.astype(np.float32))
    assert np.array_equal(got, p.realize((w, h), min=(1, 1), img=img))


def _vector_loop(asm: str) -> str:
    """The body of the innermost loop with the most vshufps (the steady vector loop)."""
    best = ""
    for m in re.finditer(r"^(\.LBB\S+):\n(.*?)(?=^\.LBB|\Z)", asm, re.S | re.M):
        body = m.group(2)
        if re.search(r"\bj\w+\s+" + re.escape(m.group(1)) + r"\b", body) and \
                body.count("vshufps") > best.count("vshufps"):
            best = body
    return best


def test_one_cross_half_permute_per_vector_on_avx2():
    """The steady loop of the 3x3 downsampling on AVX2: 9 taps, each a vshufps within
    halves, and one vpermpd for the result (the plain pick: 9 of each)."""
    loop = _vector_loop(compiled_form(program().ir, "asm", target="x86-64-avx2"))
    assert loop.count("vshufps") == 9
    assert loop.count("vpermpd") + loop.count("vpermps") == 1


def test_avx512_keeps_one_permute_per_tap():
    """With AVX-512 (vpermt2ps picks across halves in one instruction) nothing changes:
    no vshufps + vpermpd pairs (the plain pick's shuffles are LLVM's)."""
    ll = compiled_form(program(16).ir, "llvm", target="x86-64-avx512")
    assert "<8 x i32> <i32 0, i32 1, i32 4, i32 5, i32 2, i32 3, i32 6, i32 7>" not in ll


def test_in_lane_order():
    """The even elements of two 8-lane f32 vectors (0, 2, .., 14): within halves the pick is
    [0 2 8 10 | 4 6 12 14] (vshufps 0x88), holding result lanes 0 1 4 5 2 3 6 7. The chunks
    of a strided load that ends exactly at its last lane (offsets 0 and 7: positions 0 2 4
    6 9 11 13 15) take the same order. Lanes already within halves, a pick whose halves
    would need different selectors, 16-bit lanes, and 512-bit vectors: None."""
    assert in_lane_order([0, 2, 4, 6, 8, 10, 12, 14], 8, 32) == [0, 1, 4, 5, 2, 3, 6, 7]
    assert in_lane_order([0, 2, 4, 6, 9, 11, 13, 15], 8, 32) == [0, 1, 4, 5, 2, 3, 6, 7]
    assert in_lane_order([1, 3, 5, 7, 9, 11, 13, 15], 8, 32) == [0, 1, 4, 5, 2, 3, 6, 7]
    assert in_lane_order([0, 2, 4, 6], 4, 64) == [0, 2, 1, 3]
    assert in_lane_order([0, 1, 8, 9, 4, 5, 12, 13], 8, 32) is None
    assert in_lane_order([0, 2, 4, 6, 8, 10, 12, 15], 8, 32) is None
    assert in_lane_order(list(range(0, 32, 2)), 16, 16) is None
    assert in_lane_order(list(range(0, 32, 2)), 16, 32) is None
