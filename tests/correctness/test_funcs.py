"""Func structure: tuples, multi-output pipelines, compile-time fn / for /
arrays of Funcs, partial application, let and var, buffer properties and
3-channel images."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_same, load, program, rand_image


def test_tuple_func(rng):
    p = program("""
pipeline tuples
input a: i32[2]
input b: f32[2]
output out: f32[2]
output idx: i32[2]
algorithm {
    t(x, y) = (a(x, y) * 2, b(x, y) + 1.0f, x - y)
    u(x, y) = t(x, y)
    u(x, y) = (u(x, y)[0] + u(x, y)[2], u(x, y)[1] * 2.0f, u(x, y)[0])   # a tuple update: all read before any write
    out(x, y) = f32(u(x, y)[0]) + u(x, y)[1]
    idx(x, y) = u(x, y)[2] - t(x, y)[2]
}
""")
    a = rng.integers(-100, 100, (11, 13)).astype(np.int32)
    b = rand_image(rng, (11, 13), np.float32)
    ys, xs = np.mgrid[0:11, 0:13]
    t0, t1, t2 = a * 2, b + np.float32(1), (xs - ys).astype(np.int32)
    u0, u1, u2 = t0 + t2, t1 * np.float32(2), t0
    out, idx = p(a=a, b=b)
    assert_same(out, u0.astype(np.float32) + u1)
    assert_same(idx, (u2 - t2).astype(np.int32))


def test_multi_output_pipeline(rng):
    p = program("""
pipeline two_outputs
input img: u8[2]
output lo: u8[2]
output hi: u16[2]
algorithm {
    s(x, y) = u16(img(x, y)) * 3
    lo(x, y) = u8(s(x, y) & 255)
    hi(x, y) = s(x, y) >> 8
}
""")
    img = rand_image(rng, (11, 13), np.uint8)
    lo, hi = p(img=img)
    s = img.astype(np.uint16) * np.uint16(3)
    assert_same(lo, (s & 255).astype(np.uint8))
    assert_same(hi, (s >> 8).astype(np.uint16))
    # realize at another size: both outputs get it
    lo2, hi2 = p.realize((5, 4), img=img)
    assert_same(lo2, lo[:4, :5])
    assert_same(hi2, hi[:4, :5])


def test_multi_output_different_dims(rng):
    p = program("""
pipeline rows_and_image
input img: i32[2]
output scaled: i32[2]
output rowsum: i32[1]
algorithm {
    scaled(x, y) = img(x, y) * 2
    rdom r = [0..img.height]
    rowsum(x) = 0
    rowsum(x) += img(x, r.x)
}
""")
    img = rng.integers(-100, 100, (11, 13)).astype(np.int32)
    scaled, rowsum = p(img=img)
    assert_same(scaled, img * 2)
    assert_same(rowsum, img.sum(axis=0).astype(np.int32))


def ref_pyramid(img):
    """The same pyramid, as functions of integer coordinate arrays."""
    h, w = img.shape
    f32 = np.float32

    def base(xs, ys):
        return img[np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)]

    def down(f):
        def dx(xs, ys):
            return (f(2 * xs - 1, ys) + f32(3) * f(2 * xs, ys) + f32(3) * f(2 * xs + 1, ys) + f(2 * xs + 2, ys)) / f32(8)

        def dy(xs, ys):
            return (dx(xs, 2 * ys - 1) + f32(3) * dx(xs, 2 * ys) + f32(3) * dx(xs, 2 * ys + 1) + dx(xs, 2 * ys + 2)) / f32(8)
        return dy

    def up(f):
        def ux(xs, ys):
            # integer / and % with a positive divisor: floor division, non-negative remainder
            return f32(0.25) * f(xs // 2 - 1 + 2 * (xs % 2), ys) + f32(0.75) * f(xs // 2, ys)

        def uy(xs, ys):
            return f32(0.25) * ux(xs, ys // 2 - 1 + 2 * (ys % 2)) + f32(0.75) * ux(xs, ys // 2)
        return uy

    g1 = down(base)
    g2 = down(g1)
    rec = up(up(g2))
    detail = lambda xs, ys: base(xs, ys) - up(g1)(xs, ys)
    ys, xs = np.mgrid[0:h, 0:w]
    return rec(xs, ys), detail(xs, ys)


@pytest.mark.parametrize("shape", [(11, 13), (7, 5)])
def test_gaussian_pyramid_fn_for_arrays(rng, shape):
    img = rand_image(rng, shape, np.float32)
    out, detail = load("pyramid")(img=img)
    ref_out, ref_detail = ref_pyramid(img)
    assert ref_out.dtype == np.float32
    assert_same(out, ref_out)
    assert_same(detail, ref_detail)


def test_fn_returning_expression_and_local_funcs(rng):
    p = program("""
pipeline fns
input img: i32[2]
output out: i32[2]

fn sq(e) {
    return e * e
}

fn shifted(f, dx) {
    g(x, y) = f(x + dx, y)
    return g
}

const N = 4

algorithm {
    var x, y
    acc[0](x, y) = 0
    for k in 1..N {
        s[k] = shifted(img, k - 1)
        acc[k](x, y) = acc[k - 1](x, y) + sq(s[k](x, y)) * k
    }
    out(x, y) = acc[N - 1](x, y)
}
""")
    img = rng.integers(-30, 30, (5, 13)).astype(np.int32)
    out = p.realize((13 - 2, 5), img=img)
    ref = sum(img[:, k - 1:k - 1 + 11] ** 2 * k for k in range(1, 4))
    assert_same(out, ref.astype(np.int32))


def test_partial_application(rng):
    p = program("""
pipeline partial
input a: f32[2]
input b: f32[2]
output out: f32[2]
algorithm {
    f(x, y) = a(x, y) * 2.0f
    g(x, y) = b(y, x)                 # transposed
    h = f + g * 0.5f - a
    k = sqrt(abs(h))
    out(x, y) = k(x, y) + h(x, y)
}
""")
    a = rand_image(rng, (9, 9), np.float32)
    b = rand_image(rng, (9, 9), np.float32)
    h = a * np.float32(2) + b.T * np.float32(0.5) - a
    assert_same(p(a=a, b=b), np.sqrt(np.abs(h)) + h)


def test_let_and_var(rng):
    p = program("""
pipeline lets
input img: i32[2]
param k: i32 = 3
output out: i32[2]
algorithm {
    var x, y
    let d = x - y
    let w = d * d + k
    let pair = (w, d)
    out(x, y) = img(x, y) * pair[0] + pair[1]
}
""")
    img = rng.integers(-100, 100, (11, 13)).astype(np.int32)
    ys, xs = np.mgrid[0:11, 0:13]
    d = xs - ys
    for k in (3, -2):
        assert_same(p(img=img, k=k), (img * (d * d + k) + d).astype(np.int32))


def test_rgb_to_gray_and_buffer_properties(rng):
    img = rand_image(rng, (11, 13, 3), np.uint8)
    gray, swapped = load("rgb_gray")(img=img)
    f = img.astype(np.float32)
    lum = np.float32(0.299) * f[..., 0] + np.float32(0.587) * f[..., 1] + np.float32(0.114) * f[..., 2]
    v = lum + np.float32(0.5)
    assert_same(gray, np.trunc(np.clip(v, 0, 255)).astype(np.uint8))
    assert_same(swapped, img[::-1, ::-1, ::-1])


def test_buffer_properties_in_expressions(rng):
    p = program("""
pipeline props
input img: u8[2]
input v: i16[1]
output out: i32[2]
algorithm {
    out(x, y) = (img.width * 1000000 + img.height * 10000 + img.dim(0).extent * 100 + img.dim(1).min * 10
                 + v.width + i32(img(img.dim(0).extent - 1 - x, y)) * 0)
}
""")
    img = rand_image(rng, (11, 13), np.uint8)
    v = np.zeros(6, np.int16)
    out = p(img=img, v=v)
    assert_same(out, np.full((11, 13), 13 * 1000000 + 11 * 10000 + 13 * 100 + 0 + 6, np.int32))


def test_channel_loop_3d_output(rng):
    p = program("""
pipeline per_channel
use boundary
input img: u16[3]
output out: u16[3]
algorithm {
    c = mirror_interior(img)
    out(x, y, ch) = (c(x - 1, y, ch) + c(x + 1, y, ch)) / 2 + u16(ch)
}
""")
    img = rng.integers(0, 30000, (5, 7, 3)).astype(np.uint16)
    out = p(img=img)
    pad = np.pad(img, ((0, 0), (1, 1), (0, 0)), mode="reflect")      # mirror_interior: ... 1 | 0 1 ... | n-2 ...
    ref = (pad[:, :-2, :].astype(np.int64) + pad[:, 2:, :]) // 2 + np.arange(3)
    assert_same(out, ref.astype(np.uint16))
