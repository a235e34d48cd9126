"""Scalar loads and stores address in 64 bits (CodeGenLLVM.wide_index): the offset's + - * in
i64 over sign-extended leaves. The values must not change anywhere, including where the 32-bit
parts of an offset wrap (an output whose first x is near -2^31: the hoisted row offset
`(y - min.1) * stride.1 - min.0` wraps in i32, so it must be expanded, not taken as a leaf).
Oracles: NumPy's bincount and arithmetic written out, and the reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

HIST = """
pipeline hist
input img: u8[2]
output h: i32[1]
algorithm {
    rdom r = img
    h(i) = 0
    h(i32(img(r.x, r.y)) - 7) += 1
}
schedule strips { h.update(0).split(r.y, ryo, ryi, 4).rfactor(ryo, u) }
"""

RAMP = """
pipeline ramp
input img: i32[2]
output out: i32[2]
algorithm {
    g(x, y) = img(x - XMIN, y - YMIN) * 2
    out(x, y) = x * 3 + y * 1000 + g(x, y)
}
schedule root { g.compute_root() }
schedule rows { g.compute_at(out, y) }
schedule vec {
    g.compute_at(out, y).vectorize(x, 8)
    out.vectorize(x, 8)
}
"""


@pytest.mark.parametrize("schedule", [None, "strips"])
@pytest.mark.parametrize("first", [-7, -30, -100])
def test_histogram_bins_with_an_offset_and_a_shifted_output(schedule, first):
    """A scatter whose bin is computed (`img - 7`: bins -7 .. 248, which the output must cover),
    into an output whose first bin is `first`:
    counts as NumPy's bincount gives them."""
    p = hdsl.loads(HIST, "hist.hl").compile("host", schedule=schedule)
    img = np.random.RandomState(-first).randint(0, 256, (11, 37)).astype(np.uint8)
    n = 256 - first
    got = p.realize([n], min=(first,), img=img)
    want = np.bincount(img.ravel().astype(np.int64) - 7 - first, minlength=n)[:n].astype(np.int32)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("schedule", [None, "root", "rows", "vec"])
@pytest.mark.parametrize("xmin, ymin", [(-2 ** 31 + 3, 2), (2 ** 31 - 40, -5), (-2 ** 31 + 1, -2 ** 31 + 1),
                                        (0, 2 ** 31 - 9)])
def test_outputs_at_the_ends_of_the_i32_range(xmin, ymin, schedule):
    """Output regions starting near -2^31 or ending near 2^31 - 1 (parts of their offsets wrap
    in 32 bits), with an intermediate whose mins are lets made by + - * (expanded into the
    64-bit offsets): the values are the evaluator's, and i32 arithmetic written out in int64
    and wrapped. (A guard on values at the range's ends: with today's lowering it also passes
    with the let expansion switched off, so it does not show that the expansion is needed.)"""
    src = RAMP.replace("XMIN", str(xmin)).replace("YMIN", str(ymin))
    p = hdsl.loads(src, "ramp.hl")
    w, h = 29, 6
    img = np.random.RandomState(1).randint(-1000, 1000, (h, w)).astype(np.int32)
    got = p.compile("host", schedule=schedule).realize((w, h), min=(xmin, ymin), img=img)
    ref = p.realize((w, h), min=(xmin, ymin), img=img)
    x = np.arange(xmin, xmin + w, dtype=np.int64)
    y = np.arange(ymin, ymin + h, dtype=np.int64)[:, None]
    want = ((x * 3 + y * 1000 + img * 2) + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert np.array_equal(ref, want.astype(np.int32))
    assert np.array_equal(got, ref)


def test_the_histogram_update_is_addressed_in_64_bits():
    """The gap this closes (issue 22): the bin's offset `i32(img[...]) - h.min.0` and the pixel's
    were i32 sums sign-extended per pixel; both geps now take i64 offsets."""
    from hdsl.aot import compiled_form
    p = hdsl.loads(HIST, "hist.hl")
    ir = compiled_form(p.ir, "llvm")
    body = ir[ir.index("h.s1.r.x.body"):]
    body = body[:body.index("br label")]
    geps = [line for line in body.splitlines() if "getelementptr" in line]
    assert len(geps) >= 2 and all(", i64 " in g for g in geps), geps


def test_dense_vector_accesses_are_addressed_in_64_bits():
    """Dense vector loads and stores address their first lane in 64 bits too
    (CodeGenLLVM.wide_ramp): the lane var's ramp and the lets bound to it (`g.s0.x =
    g.s0.x.min + x_o * 8 + x_i`) are taken at their first lane, so LLVM steps pointers through
    the loop instead of adding and sign-extending an i32 offset per access (interpolate's
    levels: a third of each vector's instructions, and the spills they caused). The values at the ends of the i32
    range are checked by test_outputs_at_the_ends_of_the_i32_range[vec]."""
    from hdsl.aot import compiled_form
    p = hdsl.loads(RAMP.replace("XMIN", "0").replace("YMIN", "0"), "ramp.hl")
    ir = compiled_form(p.ir, "llvm", schedule="vec")
    lines = ir.splitlines()
    geps = {line.split("=")[0].strip(): line for line in lines if "getelementptr" in line}
    wide = []
    for line in lines:
        if "load <8 x i32>" in line or "store <8 x i32>" in line:
            gep = geps.get(line.split(", ptr ")[-1].split(",")[0].strip(), "")
            wide.append(", i64 " in gep)
    # every dense <8 x i32> access (g's copies without lane clamps and out's steady state:
    # a load and a store each; a narrow region's lanes are a scalar loop, partition_loops)
    # takes an i64 offset. Before, every one of these offsets was an i32 sum.
    assert len(wide) >= 6 and all(wide), wide
