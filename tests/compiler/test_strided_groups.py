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


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
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
