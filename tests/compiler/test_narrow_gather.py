"""Gathers of 8- and 16-bit elements (look-up tables: camera_pipe's tone curve) are one scalar
load per lane at the base plus the lane's 32-bit index (hdsl/codegen/cpu.py, lane_loads),
not LLVM's masked gather, whose expansion builds vectors of 64-bit addresses first. The
values are the evaluator's and NumPy's table look-ups, for every element type of 8 and 16
bits, vectors of 8 to 64 lanes with a tail, and indices at both ends of the tables."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline luts
input img: u16[2]
output out: i32[2]
algorithm {
    var x, y, i
    t8(i) = u8(i * 7 + 3)
    s8(i) = i8(i * 5 - 100)
    t16(i) = u16(i * 97 + 11)
    s16(i) = i16(i * 61 - 30000)
    let k = clamp(i32(img(x, y)), 0, 1023)
    out(x, y) = i32(t8(k)) + i32(s8(1023 - k)) * 3 + i32(t16(k)) * 5 + i32(s16(k)) * 7
}
schedule {
    t8.compute_root()
    s8.compute_root()
    t16.compute_root()
    s16.compute_root()
    out.vectorize(x, LANES).parallel(y)
}
"""


def program(lanes):
    return hdsl.loads(SRC.replace("LANES", str(lanes)), "luts.hl")


def by_numpy(img):
    k = np.clip(img.astype(np.int64), 0, 1023)
    t8 = (k * 7 + 3).astype(np.uint8).astype(np.int64)
    s8 = ((1023 - k) * 5 - 100).astype(np.int8).astype(np.int64)
    t16 = (k * 97 + 11).astype(np.uint16).astype(np.int64)
    s16 = (k * 61 - 30000).astype(np.int16).astype(np.int64)
    return (t8 + s8 * 3 + t16 * 5 + s16 * 7).astype(np.int32)


@pytest.mark.parametrize("lanes", [8, 16, 32, 64])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_narrow_table_lookups_give_the_evaluators_values(lanes, target):
    rs = np.random.RandomState(lanes)
    img = rs.randint(0, 1200, (9, 3 * lanes + 5)).astype(np.uint16)
    img[0, :4] = [0, 1023, 1024, 65535]          # both ends of the tables, and clamped past them
    p = program(lanes)
    got = p.compile(target).realize(img.shape[::-1], img=img)
    assert np.array_equal(got, by_numpy(img))
    assert np.array_equal(got, p.realize(img.shape[::-1], img=img))


def test_narrow_gathers_are_scalar_loads():
    """The full vectors' look-ups are a scalar load per lane of the table at the base plus
    the lane's index; a masked gather is left only in the vector tail (where the masked-off
    lanes must not be read), never with every lane on as before. (On a CPU without AVX-512
    VBMI: with it, the 8-bit tables' look-ups are byte permutes, test_table_permute.py.)"""
    ir = compiled_form(program(32).ir, "llvm", target="x86-64-avx512")
    gathers = [line for line in ir.splitlines() if "call" in line and "llvm.masked.gather" in line]
    assert gathers and not [g for g in gathers if "<i1 true" in g]
    assert ir.count("load i8, ptr") == 2 * 32 and ir.count("load i16, ptr") == 2 * 32
