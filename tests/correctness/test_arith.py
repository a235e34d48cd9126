"""Arithmetic and types: Euclidean division and modulus (x / 0 == x % 0 == 0),
casts (wrapping, truncating), saturating casts, Halide's type coercion,
select and ?:, bit operations, params of several types."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_same, program, rand_image


def euclid_div_mod(a, b):
    """Python ints: q, r with a == b * q + r and 0 <= r < |b|; both 0 when b == 0."""
    if b == 0:
        return 0, 0
    q = a // b if b > 0 else -(a // -b)       # floor for b > 0, ceil for b < 0
    r = a - b * q
    assert 0 <= r < abs(b)
    return q, r


def wrap(v, dtype):
    """A Python int wrapped into an integer dtype (two's complement)."""
    info = np.iinfo(dtype)
    span = 1 << info.bits
    return np.array((v - info.min) % span + info.min, dtype=dtype)[()]


@pytest.mark.parametrize("t,dtype", [("i32", np.int32), ("i16", np.int16), ("i8", np.int8),
                                     ("u8", np.uint8), ("u32", np.uint32), ("i64", np.int64)])
def test_integer_division_and_modulo(rng, t, dtype):
    p = program(f"""
pipeline divmod
input a: {t}[2]
input b: {t}[2]
output q: {t}[2]
output r: {t}[2]
algorithm {{
    q(x, y) = a(x, y) / b(x, y)
    r(x, y) = a(x, y) % b(x, y)
}}
""")
    info = np.iinfo(dtype)
    a = rand_image(rng, (11, 13), dtype)
    b = rng.integers(max(info.min, -9), min(info.max, 9) + 1, (11, 13)).astype(dtype)
    b[0, :5] = 0                                   # division by zero gives zero
    a[a == info.min] = info.min + 1                # min / -1 overflows: not tested here
    a[1, :3] = np.array([-7, 7, -1], dtype=np.int64).astype(dtype) if info.min < 0 else [7, 0, 255]
    b[1, :3] = np.array([2, -2, 5], dtype=np.int64).astype(dtype) if info.min < 0 else [2, 3, 5]
    q, r = p(a=a, b=b)
    qe = np.empty_like(a)
    re = np.empty_like(a)
    for i in np.ndindex(a.shape):
        qq, rr = euclid_div_mod(int(a[i]), int(b[i]))
        qe[i], re[i] = wrap(qq, dtype), wrap(rr, dtype)
    assert_same(q, qe)
    assert_same(r, re)


def test_division_by_literals_and_negative_literal():
    p = program("""
pipeline divlit
input a: i32[1]
output out: i32[1]
algorithm {
    out(i) = select(i % 6 == 0, a(i / 6) / 4,
             select(i % 6 == 1, a(i / 6) % 4,
             select(i % 6 == 2, a(i / 6) / -4,
             select(i % 6 == 3, a(i / 6) % -4,
             select(i % 6 == 4, a(i / 6) / 0, a(i / 6) % 0)))))
}
""")
    a = np.array([-9, -8, -1, 0, 1, 7, 8, 2147483647, -2147483647], np.int32)
    out = p.realize((6 * len(a),), a=a)
    ref = []
    for v in a:
        q4, r4 = euclid_div_mod(int(v), 4)
        qm, rm = euclid_div_mod(int(v), -4)
        ref += [q4, r4, qm, rm, 0, 0]
    assert_same(out, np.array(ref, np.int32))


def test_float_division_and_mod_bit_exact(rng):
    p = program("""
pipeline fdiv
input a: f32[2]
input b: f32[2]
output q: f32[2]
output m: f32[2]
algorithm {
    q(x, y) = a(x, y) / b(x, y) + sqrt(abs(a(x, y))) * b(x, y) - a(x, y)
    m(x, y) = a(x, y) % b(x, y)
}
""")
    a = rand_image(rng, (11, 13), np.float32)
    b = rand_image(rng, (11, 13), np.float32)
    b[b == 0] = 1
    q, m = p(a=a, b=b)
    with np.errstate(all="ignore"):
        assert_same(q, (a / b + np.sqrt(np.abs(a)) * b) - a)
        # Halide's float modulus: a - b * floor(a / b), each step rounded in f32
        assert_same(m, a - b * np.floor(a / b))


def test_casts_wrap_and_truncate(rng):
    p = program("""
pipeline casts
input a: i32[1]
input f: f32[1]
output out: i64[1]
algorithm {
    out(i) = select(i % 8 == 0, i64(u8(a(i / 8))),
             select(i % 8 == 1, i64(i8(a(i / 8))),
             select(i % 8 == 2, i64(u16(a(i / 8))),
             select(i % 8 == 3, i64(i16(u16(a(i / 8)))),
             select(i % 8 == 4, i64(i32(f(i / 8))),
             select(i % 8 == 5, i64(u8(abs(f(i / 8)))),
             select(i % 8 == 6, i64(u32(a(i / 8))),
                                i64(bool(a(i / 8) % 3)) * 10 + i64(u8(a(i / 8) > 0)))))))))
}
""")
    a = rng.integers(-100000, 100000, 21).astype(np.int32)
    a[:4] = [-1, 255, 256, -129]
    f = rng.uniform(-250, 250, 21).astype(np.float32)
    f[:4] = [-3.7, 3.7, -0.5, 254.99]
    out = p.realize((8 * 21,), a=a, f=f)
    ref = []
    for ai, fi in zip(a.tolist(), f.tolist()):
        ref += [ai % 256, (ai + 128) % 256 - 128, ai % 65536, (ai + 32768) % 65536 - 32768,
                int(np.trunc(fi)), int(np.trunc(abs(fi))), ai % 2 ** 32,
                (1 if euclid_div_mod(ai, 3)[1] != 0 else 0) * 10 + (1 if ai > 0 else 0)]
    assert_same(out, np.array(ref, np.int64))


def test_int_to_float_rounding(rng):
    p = program("""
pipeline i2f
input a: i32[1]
input d: f64[1]
output f: f32[1]
output g: f32[1]
algorithm {
    f(i) = f32(a(i))
    g(i) = f32(d(i))
}
""")
    a = rng.integers(-2 ** 31, 2 ** 31, 37, dtype=np.int64).astype(np.int32)
    a[:3] = [16777217, -16777219, 2 ** 31 - 1]           # not representable: round to nearest even
    d = rng.standard_normal(37) * 1e3
    f, g = p.realize((37,), a=a, d=d)
    assert_same(f, a.astype(np.float32))
    assert_same(g, d.astype(np.float32))
    assert f[0] == 16777216.0 and f[1] == -16777220.0


SAT_CASES = [
    # (source type, target type, values)
    ("i32", "u8", [-5, 0, 17, 255, 256, 100000, -2 ** 31]),
    ("i32", "i8", [-129, -128, -5, 127, 128, 2 ** 31 - 1]),
    ("u16", "i8", [0, 127, 128, 200, 65535]),
    ("i16", "u16", [-32768, -1, 0, 32767]),
    ("i64", "u32", [-1, 0, 2 ** 32 - 1, 2 ** 32, 2 ** 40]),
    ("u32", "i32", [0, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]),
    ("f32", "u8", [-2.5, -0.5, 0.0, 12.7, 254.9, 255.0, 255.5, 1e9]),
    ("f32", "i16", [-1e6, -32768.9, -3.99, 3.99, 32767.5, 1e6]),
    ("f64", "i32", [-1e12, -2147483648.5, 2147483647.9, 1e12, -7.5]),
]


@pytest.mark.parametrize("src,dst,values", SAT_CASES)
def test_saturating_casts(src, dst, values):
    p = program(f"""
pipeline sat
input a: {src}[1]
output out: {dst}[1]
algorithm {{
    out(i) = {dst}_sat(a(i))
}}
""")
    a = np.array(values, dtype=np.dtype({"i": "int", "u": "uint", "f": "float"}[src[0]] + src[1:]))
    out = p(a=a)
    dt = out.dtype
    info = np.iinfo(dt)
    ref = []
    for v in a.tolist():
        v = int(np.trunc(v)) if isinstance(v, float) else v
        ref.append(min(max(v, info.min), info.max))     # clamp, then truncate toward zero
    assert_same(out, np.array(ref, dtype=dt))


def test_float_saturating_cast_f64_to_f32():
    """Halide's saturating_cast between floats clamps to t.min() .. t.max(), which
    for f32 are -inf .. inf (Type::max()): so a finite f64 too large for f32
    still becomes inf, as the ordinary cast gives."""
    p = program("""
pipeline fsat
input a: f64[1]
output out: f32[1]
algorithm {
    out(i) = f32_sat(a(i))
}
""")
    a = np.array([1e300, -1e300, 1.5, -2.25e38, 3.4e38, np.inf])
    with np.errstate(over="ignore"):
        assert_same(p(a=a), a.astype(np.float32))


def test_type_coercion_rules(rng):
    """Halide's match_types: wider wins, signed beats unsigned of the same width,
    float beats int, a literal takes the other operand's type; narrow types wrap."""
    p = program("""
pipeline coerce
input a: u8[1]
input b: i8[1]
input c: u16[1]
input d: i16[1]
output o1: u8[1]
output o2: i8[1]
output o3: u16[1]
output o4: i16[1]
output o5: f32[1]
output o6: i32[1]
algorithm {
    o1(i) = a(i) * 3 + 250          # u8 wraps
    o2(i) = a(i) + b(i)             # u8 + i8 -> i8
    o3(i) = a(i) * c(i)             # u8 * u16 -> u16
    o4(i) = c(i) - d(i)             # u16 - i16 -> i16
    o5(i) = a(i) / 2.5f + d(i)      # float beats int
    o6(i) = i32(a(i)) - 300
}
""")
    n = 29
    a = rand_image(rng, (n,), np.uint8)
    b = rand_image(rng, (n,), np.int8)
    c = rand_image(rng, (n,), np.uint16)
    d = rand_image(rng, (n,), np.int16)
    outs = p(a=a, b=b, c=c, d=d)
    A, B, C, D = (v.astype(np.int64) for v in (a, b, c, d))
    assert_same(outs[0], ((A * 3 + 250) % 256).astype(np.uint8))
    assert_same(outs[1], ((A + B + 128) % 256 - 128).astype(np.int8))
    assert_same(outs[2], ((A * C) % 65536).astype(np.uint16))
    assert_same(outs[3], ((C - D + 32768) % 65536 - 32768).astype(np.int16))
    assert_same(outs[4], a.astype(np.float32) / np.float32(2.5) + d.astype(np.float32))
    assert_same(outs[5], (A - 300).astype(np.int32))


def test_select_and_ternary(rng):
    p = program("""
pipeline sel
input a: i16[2]
param t: i16 = 0
output out: i16[2]
algorithm {
    out(x, y) = a(x, y) > t ? (x < y ? a(x, y) : -a(x, y)) : select(a(x, y) == t || x == 0, i16(7), a(x, y) * 2)
}
""")
    a = rng.integers(-50, 50, (11, 13)).astype(np.int16)
    ys, xs = np.mgrid[0:11, 0:13]
    for t in (0, 10, -5):
        ref = np.where(a > t, np.where(xs < ys, a, -a), np.where((a == t) | (xs == 0), 7, a * 2)).astype(np.int16)
        assert_same(p(a=a, t=t), ref)


def test_bit_operations(rng):
    p = program("""
pipeline bits
input a: u16[1]
input s: i16[1]
output o1: u16[1]
output o2: i16[1]
output o3: i16[1]
algorithm {
    o1(i) = ((a(i) << 3) | (a(i) >> 11)) ^ (a(i) & 255)
    o2(i) = s(i) >> 2                      # arithmetic shift
    o3(i) = ~s(i) + (s(i) << 1)
}
""")
    a = rand_image(rng, (31,), np.uint16)
    s = rand_image(rng, (31,), np.int16)
    o1, o2, o3 = p(a=a, s=s)
    A, S = a.astype(np.int64), s.astype(np.int64)
    assert_same(o1, ((((A << 3) % 65536) | (A >> 11)) ^ (A & 255)).astype(np.uint16))
    assert_same(o2, (S >> 2).astype(np.int16))        # Python's >> is floor division by 4
    assert_same(o3, ((-S - 1 + S * 2 + 32768) % 65536 - 32768).astype(np.int16))


def test_params_of_several_types(rng):
    p = program("""pipeline params
input img: u8[2]
param gain: f32 = 1.5
param bias: i32 = -3
param shift: u8 = 1
param invert: bool = false
param scale: f64 = 0.25
param big: i64 = 10000000000
output out: f64[2]
algorithm {
    var x, y
    let v = f32(img(x, y) >> shift) * gain + f32(bias)
    out(x, y) = (invert ? -f64(v) : f64(v)) * scale + f64(big % 7)
}
""")
    img = rand_image(rng, (11, 13), np.uint8)

    def ref(gain, bias, shift, invert, scale, big):
        v = (img >> np.uint8(shift)).astype(np.float32) * np.float32(gain) + np.float32(bias)
        v = v.astype(np.float64)
        return (-v if invert else v) * scale + float(big % 7)

    assert_same(p(img=img), ref(1.5, -3, 1, False, 0.25, 10000000000))
    kw = dict(gain=-0.7, bias=100, shift=3, invert=True, scale=1.0 / 3.0, big=-123456789012)
    assert_same(p(img=img, **kw), ref(**kw))
