"""`uN((W(a) + W(b) + 1) / 2)` of two uN values (N = 8 or 16; Halide's avg, camera_pipe's
avg8, avg16 and blur121) is one x86 pavgb / pavgw in vector code (hdsl/codegen/cpu.py,
rounding_avg). Values: NumPy's (a + b + 1) // 2 in 64-bit integers (an independent oracle)
and the evaluator's, for u8 and u16, wide types u16, u32, i16, i32 and u64, the three terms
in any order, `>> 1` for `/ 2`, 8 to 64 lanes with a tail, and operands at both ends of
their range; look-alikes that are not averages (a sum that wraps, signed operands, `+ 2`)
keep their own values. Assembly: camera_pipe's unsharp mask (blur121 of blur121, then
widened to i16) is pavgb on bytes, where LLVM had made pavgw of bytes unpacked to words."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline avgs
input a: T[2]
input b: T[2]
output out: T[2]
algorithm {
    var x, y
    out(x, y) = T(EXPR)
}
schedule {
    out.vectorize(x, LANES)
}
"""

CASES = [
    ("u8", "(u16(a(x, y)) + u16(b(x, y)) + 1) / 2", lambda a, b: (a + b + 1) // 2),
    ("u8", "(1 + u32(a(x, y)) + u32(b(x, y))) / 2", lambda a, b: (a + b + 1) // 2),
    ("u8", "(i16(a(x, y)) + (1 + i16(b(x, y)))) >> 1", lambda a, b: (a + b + 1) // 2),
    ("u8", "(i32(b(x, y)) + i32(a(x, y)) + 1) / 2", lambda a, b: (a + b + 1) // 2),
    ("u16", "(u32(a(x, y)) + u32(b(x, y)) + 1) / 2", lambda a, b: (a + b + 1) // 2),
    ("u16", "(u64(a(x, y)) + u64(b(x, y)) + 1) >> 1", lambda a, b: (a + b + 1) // 2),
    ("u16", "(i32(a(x, y)) + i32(b(x, y)) + 1) / 2", lambda a, b: (a + b + 1) // 2),
    # not averages: a sum of the narrow type wraps; + 2; i16 has no room for u16 + u16 + 1
    ("u8", "(a(x, y) + b(x, y) + 1) / 2", lambda a, b: ((a + b + 1) % 256) // 2),
    ("u8", "(u16(a(x, y)) + u16(b(x, y)) + 2) / 2", lambda a, b: (a + b + 2) // 2),
    ("u16", "(i16(a(x, y)) + i16(b(x, y)) + 1) / 2", None),
]


def program(typ, expr, lanes):
    return hdsl.loads(SRC.replace("EXPR", expr).replace("LANES", str(lanes)).replace("T", typ), "avgs.hl")


@pytest.mark.parametrize("lanes", [8, 16, 32, 64])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_averages_give_numpys_and_the_evaluators_values(case, lanes, target):
    typ, expr, oracle = CASES[case]
    dt = np.uint8 if typ == "u8" else np.uint16
    top = np.iinfo(dt).max
    rs = np.random.RandomState(case * 100 + lanes)
    a = rs.randint(0, top + 1, (5, 2 * lanes + 3)).astype(dt)
    b = rs.randint(0, top + 1, a.shape).astype(dt)
    a[0, :4], b[0, :4] = [0, top, top, 0], [0, top, 0, top]       # the range's ends
    p = program(typ, expr, lanes)
    got = p.compile(target).realize(a.shape[::-1], a=a, b=b)
    assert np.array_equal(got, p.realize(a.shape[::-1], a=a, b=b))
    if oracle is not None:
        assert np.array_equal(got, oracle(a.astype(np.int64), b.astype(np.int64)).astype(dt))


SHARPEN = """
pipeline sharpen
input curved: u8[3]
output processed: i16[3]
fn avg8(a, b) {
    return u8((u16(a) + u16(b) + 1) / 2)
}
fn blur121(a, b, c) {
    return avg8(avg8(a, c), b)
}
algorithm {
    var x, y, c
    cv(x, y, c) = curved(x + 1, y + 1, c)
    unsharp_y(x, y, c) = blur121(cv(x, y - 1, c), cv(x, y, c), cv(x, y + 1, c))
    unsharp(x, y, c) = blur121(unsharp_y(x - 1, y, c), unsharp_y(x, y, c), unsharp_y(x + 1, y, c))
    processed(x, y, c) = i16(cv(x, y, c)) - i16(unsharp(x, y, c))
}
schedule {
    processed.bound(c, 0, 3).reorder(c, x, y).vectorize(x, 32).unroll(c)
}
"""


def test_the_unsharp_mask_averages_bytes():
    asm = compiled_form(hdsl.loads(SHARPEN, "sharpen.hl").ir, "asm", target="x86-64-avx2")
    assert asm.count("vpavgb") >= 3 * 8 and "vpavgw" not in asm


def test_the_unsharp_mask_gives_the_evaluators_values():
    p = hdsl.loads(SHARPEN, "sharpen.hl")
    img = np.random.RandomState(3).randint(0, 256, (11, 70, 3)).astype(np.uint8)      # [y, x, c]
    size = (66, 9, 3)                                                                 # x, y, c
    for target in ("host", "x86-64-avx2"):
        got = p.compile(target).realize(size, curved=img)
        assert np.array_equal(got, p.realize(size, curved=img))
