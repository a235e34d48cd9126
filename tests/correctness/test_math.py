"""Built-in math and the less common types: f16 and f64 arithmetic, 64-bit
integers, shifts by negative or large amounts, bool buffers, abs/absd, lerp,
rounding functions, transcendental functions within a few ulp."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_same, program, rand_image


def test_f16_blur_bit_exact(rng):
    """Each f16 + and * rounds once to half precision."""
    p = program("""
pipeline half
use boundary
input img: f16[2]
output out: f16[2]
algorithm {
    c = repeat_edge(img)
    out(x, y) = (c(x - 1, y) + c(x, y) * f16(2.0f) + c(x + 1, y)) * f16(0.25f) - c(x, y - 1)
}
""")
    img = rng.uniform(-100, 100, (11, 13)).astype(np.float16)
    pad = np.pad(img, 1, mode="edge")
    l, m, r, u = pad[1:-1, :-2], pad[1:-1, 1:-1], pad[1:-1, 2:], pad[:-2, 1:-1]
    ref = (l + m * np.float16(2) + r) * np.float16(0.25) - u
    assert ref.dtype == np.float16
    assert_same(p(img=img), ref)


def test_f64_arithmetic_and_sqrt_bit_exact(rng):
    p = program("""
pipeline f64ops
input a: f64[2]
input b: f64[2]
output out: f64[2]
algorithm {
    out(x, y) = sqrt(a(x, y) * a(x, y) + b(x, y) * b(x, y)) / (b(x, y) - 0.5) + f64(x) * 0.1
}
""")
    a = rng.standard_normal((11, 13)) * 1e3
    b = rng.standard_normal((11, 13))
    ys, xs = np.mgrid[0:11, 0:13]
    # the literals 0.5 and 0.1 are f32 (Halide), widened exactly to f64
    ref = np.sqrt(a * a + b * b) / (b - 0.5) + xs * float(np.float32(0.1))
    assert_same(p(a=a, b=b), ref)


def test_64_bit_integers(rng):
    p = program("""
pipeline ints64
input a: u64[1]
input b: i64[1]
output o1: u64[1]
output o2: i64[1]
output o3: u64[1]
algorithm {
    o1(i) = a(i) * u64(3) + u64(7)
    o2(i) = b(i) / i64(-1000) + b(i) % i64(977)
    o3(i) = a(i) / u64(12345678901) + (a(i) >> u64(60))
}
""")
    a = rng.integers(0, 2 ** 64, 17, dtype=np.uint64)
    a[0] = 2 ** 64 - 1
    b = rng.integers(-2 ** 63 + 1, 2 ** 63, 17, dtype=np.int64)
    o1, o2, o3 = p(a=a, b=b)
    A = [int(v) for v in a]
    B = [int(v) for v in b]
    assert_same(o1, np.array([(v * 3 + 7) % 2 ** 64 for v in A], np.uint64))
    ref2 = []
    for v in B:
        q = -(v // 1000)                     # Euclidean: ceil(v / -1000)
        ref2.append(q + v % 977)
    assert_same(o2, np.array(ref2, np.int64))
    assert_same(o3, np.array([v // 12345678901 + (v >> 60) for v in A], np.uint64))


def test_shift_amounts():
    """Shifts by a variable amount; a negative amount shifts the other way (Halide)."""
    p = program("""
pipeline shifts
input a: i32[1]
input s: i32[1]
output l: i32[1]
output r: i32[1]
algorithm {
    l(i) = a(i) << s(i)
    r(i) = a(i) >> s(i)
}
""")
    a = np.array([5, -5, 1000, -1000, 123456, -1], np.int32)
    s = np.array([3, 3, -2, -2, 0, 5], np.int32)
    l, r = p(a=a, s=s)

    def shl(v, k):
        return v << k if k >= 0 else v >> -k

    ref_l = [(shl(int(v), int(k)) + 2 ** 31) % 2 ** 32 - 2 ** 31 for v, k in zip(a, s)]
    ref_r = [(shl(int(v), -int(k)) + 2 ** 31) % 2 ** 32 - 2 ** 31 for v, k in zip(a, s)]
    assert_same(l, np.array(ref_l, np.int32))
    assert_same(r, np.array(ref_r, np.int32))


def test_bool_buffers(rng):
    p = program("""
pipeline bools
input m: bool[2]
input v: u8[2]
output keep: bool[2]
output out: u8[2]
algorithm {
    keep(x, y) = m(x, y) && !(v(x, y) > 200) || (x == y)
    out(x, y) = select(m(x, y), v(x, y), u8(0)) + u8(m(x, y)) * u8(2)
}
""")
    m = rand_image(rng, (11, 13), np.bool_)
    v = rand_image(rng, (11, 13), np.uint8)
    ys, xs = np.mgrid[0:11, 0:13]
    keep, out = p(m=m, v=v)
    assert_same(keep, (m & ~(v > 200)) | (xs == ys))
    assert_same(out, (np.where(m, v, 0) + m.astype(np.uint8) * 2).astype(np.uint8))


def test_abs_absd_lerp(rng):
    p = program("""
pipeline absl
input a: i8[1]
input b: i8[1]
input w: u8[1]
input f: f32[1]
output o1: u8[1]
output o2: u8[1]
output o3: u8[1]
output o4: f32[1]
algorithm {
    o1(i) = abs(a(i))
    o2(i) = absd(a(i), b(i))
    o3(i) = lerp(u8(a(i)), u8(b(i)), w(i))
    o4(i) = lerp(f(i), f(i) * 2.0f + 1.0f, 0.25f)
}
""")
    a = rand_image(rng, (29,), np.int8)
    a[0] = -128
    b = rand_image(rng, (29,), np.int8)
    w = rand_image(rng, (29,), np.uint8)
    w[:2] = [0, 255]
    f = rand_image(rng, (29,), np.float32)
    o1, o2, o3, o4 = p(a=a, b=b, w=w, f=f)
    A, B, W = a.astype(np.int64), b.astype(np.int64), w.astype(np.int64)
    assert_same(o1, np.abs(A).astype(np.uint8))              # abs(-128) is 128 in u8
    assert_same(o2, np.abs(A - B).astype(np.uint8))
    # u8 lerp: zero + (one - zero) * w / 255, rounded to nearest (half up), exactly
    za, ob = A % 256, B % 256
    num = za * (255 - W) + ob * W
    assert_same(o3, ((2 * num + 255) // 510).astype(np.uint8))
    g = f * np.float32(2) + np.float32(1)
    w4 = np.float32(0.25)
    assert_same(o4, f * (np.float32(1) - w4) + g * w4)


def test_rounding_functions(rng):
    p = program("""
pipeline rounding
input f: f32[1]
output o: f32[1]
algorithm {
    o(i) = select(i % 4 == 0, floor(f(i / 4)),
           select(i % 4 == 1, ceil(f(i / 4)),
           select(i % 4 == 2, round(f(i / 4)), trunc(f(i / 4)))))
}
""")
    f = np.array([2.5, 3.5, -2.5, -0.5, 0.5, 1.7, -1.7, 1e9 + 0.5, -0.0], np.float32)
    out = p.realize((4 * len(f),), f=f)
    ref = np.stack([np.floor(f), np.ceil(f), np.round(f), np.trunc(f)], axis=1).ravel()
    assert np.round(np.float32(2.5)) == 2 and np.round(np.float32(-0.5)) == 0     # half to even
    assert_same(out, ref.astype(np.float32))


@pytest.mark.parametrize("expr,ref,positive", [
    ("exp(a(i) * 0.5f)", lambda a: np.exp(a * 0.5), False),
    ("log(a(i))", np.log, True),
    ("sin(a(i)) + cos(a(i)) * tan(a(i) * 0.1f)", lambda a: np.sin(a) + np.cos(a) * np.tan(a * 0.1), False),
    ("pow(a(i), 1.7f)", lambda a: np.power(a, 1.7), True),
    ("atan2(a(i), a(i) - 1.0f)", lambda a: np.arctan2(a, a - 1.0), False),
])
def test_transcendental_functions_f32(rng, expr, ref, positive):
    p = program(f"""
pipeline transc
input a: f32[1]
output o: f32[1]
algorithm {{
    o(i) = {expr}
}}
""")
    a = rng.uniform(0.1 if positive else -3.0, 3.0, 101).astype(np.float32)
    out = p(a=a)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=4e-7 * 8, atol=1e-6)


def test_integer_pow_expands_to_multiplications():
    p = program("""
pipeline ipow
input a: i32[1]
output o: i32[1]
algorithm {
    o(i) = pow(a(i), 3) + pow(a(i), 0) + pow(a(i), 5) % 1000
}
""")
    a = np.arange(-20, 21, dtype=np.int32)
    A = a.astype(np.int64)
    assert_same(p(a=a), (A ** 3 + 1 + np.mod(A ** 5, 1000)).astype(np.int32))
