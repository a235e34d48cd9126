"""Products of 16-bit values widened to 32 bits, `i32(a) * i32(b)` with a and b of i16, i8 or
u8 (camera_pipe's colour matrix: Q8.8 coefficients times the demosaicked i16 samples), are
x86's pmaddwd (vpdpwssd where VNNI adds them to a sum): each operand zero-extended from its
16 bits, so that pmaddwd's x * y + 0 * 0 is the product (hdsl/codegen/cpu.py, madd_mul).
The values are the evaluator's and NumPy's int64 products, at the ends of each type's range
(-32768 * -32768 = 2^30, the largest), for vectors and broadcast scalars, vectors of 8 to
64 lanes with a tail, on the host (AVX-512 here) and AVX2; u16 operands (which do not fit a
signed 16-bit lane) stay ordinary multiplies."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline prods
input a: i16[2]
input b: i16[2]
input s: i8[2]
input u: u8[2]
input w: u16[2]
input k: i16[1]
param p: i16 = -32768
output out: i32[2]
algorithm {
    var x, y
    out(x, y) = (i32(a(x, y)) * i32(b(x, y)) + i32(k(0)) * i32(a(x, y)) + i32(s(x, y)) * i32(u(x, y)) +
                 i32(p) * i32(b(x, y)) - i32(w(x, y)) * i32(a(x, y)) + i32(k(1)) * i32(s(x, y)))
}
schedule {
    out.vectorize(x, LANES).parallel(y)
}
"""


def program(lanes):
    return hdsl.loads(SRC.replace("LANES", str(lanes)), "prods.hl")


def inputs(shape, seed):
    rs = np.random.RandomState(seed)
    a = rs.randint(-32768, 32768, shape).astype(np.int16)
    b = rs.randint(-32768, 32768, shape).astype(np.int16)
    s = rs.randint(-128, 128, shape).astype(np.int8)
    u = rs.randint(0, 256, shape).astype(np.uint8)
    w = rs.randint(0, 65536, shape).astype(np.uint16)
    # the ends of each range, where a wrong extension (sign vs zero) or an overflow would show
    a[0, :6] = [-32768, -32768, 32767, 32767, -1, 0]
    b[0, :6] = [-32768, 32767, -32768, 32767, -1, -32768]
    s[0, :4] = [-128, 127, -1, 0]
    u[0, :4] = [255, 255, 0, 128]
    w[0, :2] = [65535, 32768]
    return dict(a=a, b=b, s=s, u=u, w=w, k=np.array([-32768, 32767], np.int16))


def by_numpy(d, p):
    a, b, s, u, w = (d[n].astype(np.int64) for n in "absuw")
    k = d["k"].astype(np.int64)
    v = a * b + k[0] * a + s * u + p * b - w * a + k[1] * s
    return ((v + 2**31) % 2**32 - 2**31).astype(np.int32)        # i32 arithmetic wraps


@pytest.mark.parametrize("lanes", [8, 16, 32, 64])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_widened_i16_products_give_the_evaluators_values(lanes, target):
    d = inputs((5, 2 * lanes + 3), lanes)
    prog = program(lanes)
    for p in (-32768, 32767, -3):
        got = prog.compile(target).realize(d["a"].shape[::-1], p=p, **d)
        assert np.array_equal(got, by_numpy(d, p))
        assert np.array_equal(got, prog.realize(d["a"].shape[::-1], p=p, **d))


@pytest.mark.parametrize("target, name", [("x86-64-avx2", "llvm.x86.avx2.pmadd.wd"),
                                          ("x86-64-avx512", "llvm.x86.avx512.pmaddw.d.512")])
def test_the_products_are_pmaddwd_of_the_targets_width(target, name):
    """Five of the six products are pmaddwd (the u16 one is a multiply), in calls of the
    target's vector width: 4 calls per 32 lanes for each product on AVX2, 2 on AVX-512."""
    ir = compiled_form(program(32).ir, "llvm", target=target)
    calls = [line for line in ir.splitlines() if "call" in line and "pmadd" in line]
    assert calls and all(name in c for c in calls)
    per_product = 32 // (8 if "avx2." in name else 16)
    # the full vectors' loop, and the tail's masked vector loop
    assert len(calls) in (5 * per_product, 2 * 5 * per_product)
    assert "mul <32 x i32>" in ir                     # (the u16 product)
