"""stdlib/resample.hl against NumPy: nearest, bilinear, bicubic (Keys,
a = -0.5), Lanczos-3 and an affine warp, enlarging and shrinking by
non-integer factors. Sample positions are computed in f32 in the references
too (as documented), so that both pick the same source pixels; the weights
and sums are float64 in the references."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import F32, assert_close, assert_same, edge, grid, run_both

RESAMPLE = """pipeline resample_test
use boundary
use resample

input  img: f32[2]
input  img8: u8[2]
param  sx: f32 = 1.0
param  sy: f32 = 1.0
output near: f32[2]
output near8: u8[2]
output lin: f32[2]
output cubic: f32[2]
output lanczos: f32[2]

algorithm {
    c = repeat_edge(img)
    near = nearest(c, sx, sy)
    near8 = nearest(repeat_edge(img8), sx, sy)
    lin = bilinear(c, sx, sy)
    cubic = bicubic(c, sx, sy)
    lanczos = lanczos3(c, sx, sy)
}
"""


def source_coord(n, s):
    """Centre-aligned: output pixel n samples the source at (n + 0.5) / s - 0.5 (in f32)."""
    return (n.astype(F32) + F32(0.5)) / F32(s) - F32(0.5)


def keys(d, a=-0.5):
    d = np.abs(d)
    return np.where(d <= 1, (a + 2) * d**3 - (a + 3) * d**2 + 1,
                    np.where(d < 2, a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a, 0.0))


def lanczos3_kernel(d):
    return np.where(np.abs(d) < 3, np.sinc(d) * np.sinc(d / 3), 0.0)


def separable_ref(img, w, h, sx, sy, kernel, taps, normalize):
    """sum over source pixels i, j near (u, v) of k(u - i) k(v - j) img(i, j), edges repeated;
    taps: the offsets from floor(u) that the kernel's support covers."""
    f = edge(img.astype(np.float64))
    x, y = grid(w, h)
    u, v = source_coord(x, sx), source_coord(y, sy)
    n, m = np.floor(u).astype(np.int64), np.floor(v).astype(np.int64)
    u, v = u.astype(np.float64), v.astype(np.float64)
    total = np.zeros((h, w))
    wsum_x = sum(kernel(u - (n + k)) for k in taps)
    wsum_y = sum(kernel(v - (m + k)) for k in taps)
    for j in taps:
        for i in taps:
            total += kernel(u - (n + i)) * kernel(v - (m + j)) * f(n + i, m + j)
    return total / (wsum_x * wsum_y) if normalize else total


def bilinear_ref(f, u, v):
    n, m = np.floor(u).astype(np.int64), np.floor(v).astype(np.int64)
    s, t = u - n, v - m
    return ((1 - s) * (1 - t) * f(n, m) + s * (1 - t) * f(n + 1, m)
            + (1 - s) * t * f(n, m + 1) + s * t * f(n + 1, m + 1))


CASES = [((7, 9), (13, 16), 13 / 9, 16 / 7),       # enlarge by about 1.4 and 2.3
         ((11, 13), (5, 7), 0.55, 0.45),           # shrink
         ((9, 7), (14, 18), 2.0, 2.0)]             # exactly 2x: sample points on quarter pixels


def test_resample(rng):
    # the cases run in a loop, so that one worker compiles the pipeline once
    for case in CASES:
        check_resample(rng, *case)
    check_scale_1(rng)


def check_resample(rng, shape, out_size, sx, sy):
    img = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    img8 = rng.integers(0, 256, shape).astype(np.uint8)
    w, h = out_size
    out = run_both(RESAMPLE, "resample.hl", (w, h), atol={"lanczos": 1e-6}, img=img, img8=img8, sx=sx, sy=sy)
    x, y = grid(w, h)
    # nearest: the source pixel whose centre is nearest to the sample point u, ties rounding
    # up: floor(u + 0.5) = floor((x + 0.5) / sx), in f32
    ni = np.floor((x.astype(F32) + F32(0.5)) / F32(sx)).astype(np.int64)
    nj = np.floor((y.astype(F32) + F32(0.5)) / F32(sy)).astype(np.int64)
    assert_same(out["near"], edge(img)(ni, nj))
    assert_same(out["near8"], edge(img8)(ni, nj))
    lin = bilinear_ref(edge(img.astype(np.float64)), source_coord(x, sx).astype(np.float64),
                       source_coord(y, sy).astype(np.float64))
    assert_close(out["lin"], lin, atol=1e-6)
    assert_close(out["cubic"], separable_ref(img, w, h, sx, sy, keys, range(-1, 3), False), atol=2e-6)
    assert_close(out["lanczos"], separable_ref(img, w, h, sx, sy, lanczos3_kernel, range(-2, 4), True),
                 atol=2e-6)


def check_scale_1(rng):
    """At scale 1 every sample point is a pixel centre: all interpolators return the image."""
    img = rng.uniform(0.0, 1.0, (7, 11)).astype(np.float32)
    img8 = rng.integers(0, 256, (7, 11)).astype(np.uint8)
    out = run_both(RESAMPLE, "resample.hl", atol={"lanczos": 1e-6}, img=img, img8=img8, sx=1.0, sy=1.0)
    assert_same(out["near"], img)
    assert_same(out["near8"], img8)
    for name in ("lin", "cubic", "lanczos"):
        assert_close(out[name], img, atol=1e-6)


AFFINE = """pipeline affine_test
use boundary
use resample

input  img: f32[2]
param  a00: f32 = 1.0
param  a01: f32 = 0.0
param  a02: f32 = 0.0
param  a10: f32 = 0.0
param  a11: f32 = 1.0
param  a12: f32 = 0.0
output warped: f32[2]
output lin: f32[2]

algorithm {
    warped = warp_affine(constant_exterior(img, 0.0f), a00, a01, a02, a10, a11, a12)
    lin(x, y) = sample_bilinear(repeat_edge(img), f32(x) * 0.5f + 0.25f, f32(y) * 0.75f - 0.5f)
}
"""


MATRICES = [
    (0.9, 0.3, -1.25, -0.4, 1.1, 2.5),                              # rotation-like, scaled, shifted
    (np.cos(0.5), -np.sin(0.5), 3.0, np.sin(0.5), np.cos(0.5), -2.0),  # a rotation
    (1.0, 0.0, 2.0, 0.0, 1.0, -1.0),                                # a whole-pixel shift
]


def test_warp_affine(rng):
    for matrix in MATRICES:
        check_warp_affine(rng, matrix)


def check_warp_affine(rng, matrix):
    img = rng.uniform(0.5, 1.0, (9, 12)).astype(np.float32)
    h, w = img.shape
    params = dict(zip(["a00", "a01", "a02", "a10", "a11", "a12"], matrix))
    out = run_both(AFFINE, "affine.hl", img=img, **params)
    x, y = grid(w, h)
    a = [F32(m) for m in matrix]
    # the matrix maps output pixels to source points, evaluated in f32 as documented
    u = a[0] * x.astype(F32) + a[1] * y.astype(F32) + a[2]
    v = a[3] * x.astype(F32) + a[4] * y.astype(F32) + a[5]
    src = img.astype(np.float64)

    def black_outside(i, j):
        inside = (i >= 0) & (i < w) & (j >= 0) & (j < h)
        return np.where(inside, src[np.clip(j, 0, h - 1), np.clip(i, 0, w - 1)], 0.0)
    assert_close(out["warped"], bilinear_ref(black_outside, u.astype(np.float64), v.astype(np.float64)), atol=1e-6)
    if matrix[0] == 1.0 and matrix[1] == 0.0:      # a whole-pixel shift copies pixels exactly
        assert_same(out["warped"], black_outside(x + 2, y - 1).astype(np.float32))
    lin = bilinear_ref(edge(src), x * 0.5 + 0.25, y * 0.75 - 0.5)
    assert_close(out["lin"], lin, atol=1e-6)


KERNELS = """pipeline kernels_test
use resample

input  d: f32[1]
output keys: f32[1]
output lanczos: f32[1]

algorithm {
    keys(i) = keys_weight(d(i))
    lanczos(i) = lanczos3_weight(d(i))
}
"""


def test_kernels():
    """The two kernels at distances across their pieces: 0, the knots at 1 and 2 (3), and beyond."""
    d = np.concatenate([np.linspace(-3.5, 3.5, 57), [0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 1e-3]])
    d = d.astype(np.float32)
    out = run_both(KERNELS, "kernels.hl", atol={"lanczos": 1e-7}, d=d)
    dd = d.astype(np.float64)
    assert_close(out["keys"], keys(dd), atol=1e-6)
    assert_close(out["lanczos"], lanczos3_kernel(dd), atol=1e-6)
    assert out["keys"][d == 0][0] == 1.0 and out["lanczos"][d == 0][0] == 1.0
    assert (out["keys"][np.abs(d) >= 2] == 0).all() and (out["lanczos"][np.abs(d) >= 3] == 0).all()
