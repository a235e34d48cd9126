"""Strided loads of one buffer whose first lanes differ by constants (a [1 2 1]
downsampling's taps at 2x, 2x + 1, 2x + 2) share their dense vectors
(hdsl/codegen/gather_groups.py, _strided_groups): three taps of stride 2 and 16 lanes read
4 vectors instead of 6. Values: NumPy's (an independent oracle: the same sums of the
input's elements in 64-bit integers, wrapped to the type as hdsl's integers wrap) and the
evaluator's, for strides 2, 3 and 4, taps far apart (no sharing), a dense load beside
them, a tap in a select's arm, two rows, u8, i16, f32 and f64, 2 to 16 lanes with a tail,
on the host and on AVX2. The IR check fails without the sharing."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline sg
input img: T[2]
output out: T[2]
algorithm {
    var x, y
    out(x, y) = EXPR
}
schedule {
    out.vectorize(x, LANES)
}
"""

# (expression, NumPy's value from the image i[y, x] (int64) at output xs, ys)
CASES = {
    "121": ("img(2 * x, y) + T(2) * img(2 * x + 1, y) + img(2 * x + 2, y)",
            lambda i, x, y: i[y, 2 * x] + 2 * i[y, 2 * x + 1] + i[y, 2 * x + 2]),
    "stride3": ("img(3 * x + 1, y) + img(3 * x + 2, y) * T(3) + img(3 * x + 3, y) + img(3 * x, y) * T(5)",
                lambda i, x, y: i[y, 3 * x + 1] + 3 * i[y, 3 * x + 2] + i[y, 3 * x + 3] + 5 * i[y, 3 * x]),
    "far": ("img(4 * x, y) - img(4 * x + 41, y) + img(4 * x + 3, y)",
            lambda i, x, y: i[y, 4 * x] - i[y, 4 * x + 41] + i[y, 4 * x + 3]),
    "dense": ("img(2 * x + 1, y) + img(x, y) * T(3) + img(2 * x, y)",
              lambda i, x, y: i[y, 2 * x + 1] + 3 * i[y, x] + i[y, 2 * x]),
    "select": ("select(x % 3 == 0, img(2 * x, y), img(2 * x + 1, y)) + img(2 * x + 2, y) + img(2 * x + 3, y)",
               lambda i, x, y: np.where(x % 3 == 0, i[y, 2 * x], i[y, 2 * x + 1]) + i[y, 2 * x + 2] + i[y, 2 * x + 3]),
    "rows": ("img(2 * x, y) + img(2 * x + 1, y + 1) * T(2) + img(2 * x + 2, y) + img(2 * x + 3, y + 1)",
             lambda i, x, y: i[y, 2 * x] + 2 * i[y + 1, 2 * x + 1] + i[y, 2 * x + 2] + i[y + 1, 2 * x + 3]),
}
DTYPES = {"u8": np.uint8, "i16": np.int16, "f32": np.float32, "f64": np.float64}


def program(case, typ, lanes):
    src = SRC.replace("EXPR", CASES[case][0]).replace("LANES", str(lanes)).replace("T", typ)
    return hdsl.loads(src, "sg.hl")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("typ, lanes", [("f32", 16), ("f32", 8), ("f32", 2), ("u8", 32), ("i16", 8), ("f64", 4)])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_shared_strided_loads_give_numpys_and_the_evaluators_values(case, typ, lanes, target):
    w, h = 3 * lanes + 5, 4
    rs = np.random.RandomState(lanes + len(case))
    img = rs.randint(0, 100, (h + 1, 4 * w + 48)).astype(DTYPES[typ])
    p = program(case, typ, lanes)
    got = p.compile(target).realize((w, h), img=img)
    xs, ys = np.meshgrid(np.arange(w), np.arange(h))
    want = CASES[case][1](img.astype(np.int64), xs, ys).astype(DTYPES[typ])
    assert np.array_equal(got, want)
    assert np.array_equal(got, p.realize((w, h), img=img))


@pytest.mark.parametrize("target", ["host", "x86-64-avx512"])
def test_three_taps_of_stride_two_read_four_vectors(target):
    """[1 2 1] at 2x, 2x + 1, 2x + 2 of 16 f32 lanes: 4 dense loads of <16 x float> in the
    vector loop (each tap alone: 2, overlapping by one element); four taps of stride 3:
    6, two grids of 3 (alone: 3 each); of taps 4x, 4x + 3 and 4x + 41 (stride 4: 4 vectors
    each), the first two share theirs and the third is 41 elements on (alone: 12)."""
    ll = compiled_form(program("121", "f32", 16).ir, "llvm", target=target)
    assert ll.count("load <16 x float>") == 4
    ll = compiled_form(program("stride3", "f32", 16).ir, "llvm", target=target)
    assert ll.count("load <16 x float>") == 6
    ll = compiled_form(program("far", "f32", 16).ir, "llvm", target=target)
    assert ll.count("load <16 x float>") == 4 + 4


def test_avx2_keeps_each_taps_own_vectors():
    """On AVX2 the taps keep their own dense vectors (shared ones measured slower there)."""
    ll = compiled_form(program("121", "f32", 16).ir, "llvm", target="x86-64-avx2")
    assert ll.count("load <16 x float>") == 6


CLAMPED = """
pipeline cs
input img: T[2]
param hi: i32 = 20
output out: T[2]
algorithm {
    var x, y
    level(x, y) = EXPR
    out(x, y) = level(x, y)
}
schedule {
    level.compute_root().vectorize(x, LANES)
}
"""
# a pyramid level read through a clamp to a coarser level's size (interpolate's level 4):
# partition_loops keeps the clamp in the vectors where it bites, which are then a masked
# strided load of the lanes it leaves alone plus the clamped lanes' edge value
CLAMPED_CASES = {
    "121": ("img(clamp(2 * x - 1, 0, hi), y) + T(2) * img(clamp(2 * x, 0, hi), y) + img(clamp(2 * x + 1, 0, hi), y)",
            lambda i, x, y, hi: i[y, np.clip(2 * x - 1, 0, hi)] + 2 * i[y, np.clip(2 * x, 0, hi)]
            + i[y, np.clip(2 * x + 1, 0, hi)]),
    "stride3": ("img(clamp(3 * x - 4, 0, hi), y) * T(3) + img(max(3 * x + 2, 1), y)",
                lambda i, x, y, hi: 3 * i[y, np.clip(3 * x - 4, 0, hi)] + i[y, np.maximum(3 * x + 2, 1)]),
}


def clamped_program(case, typ, lanes):
    src = CLAMPED.replace("EXPR", CLAMPED_CASES[case][0]).replace("LANES", str(lanes)).replace("T", typ)
    return hdsl.loads(src, "cs.hl")


@pytest.mark.parametrize("case", list(CLAMPED_CASES))
@pytest.mark.parametrize("typ, lanes", [("f32", 16), ("f32", 8), ("u8", 32), ("f64", 4)])
@pytest.mark.parametrize("hi", [0, 5, 20, 1000])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_clamped_strided_loads_give_numpys_and_the_evaluators_values(case, typ, lanes, hi, target):
    w, h = 3 * lanes + 5, 3
    rs = np.random.RandomState(lanes + hi)
    img = rs.randint(0, 100, (h, max(4 * w + 8, hi + 1))).astype(DTYPES[typ])
    p = clamped_program(case, typ, lanes)
    got = p.compile(target).realize((w, h), img=img, hi=hi)
    xs, ys = np.meshgrid(np.arange(w), np.arange(h))
    want = CLAMPED_CASES[case][1](img.astype(np.int64), xs, ys, hi).astype(DTYPES[typ])
    assert np.array_equal(got, want)
    assert np.array_equal(got, p.realize((w, h), img=img, hi=hi))


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_clamped_strided_loads_are_not_gathers(target):
    """Where the clamp is kept (the vectors before and after the steady state), each of the
    three taps is two masked loads and a shuffle, not pattern checks and a gather."""
    ll = compiled_form(clamped_program("121", "f32", 16).ir, "llvm", target=target)
    assert "masked.gather" not in ll and ll.count("call <16 x float> @\"llvm.masked.load") >= 2 * 3 * 2
