"""stdlib/filters.hl against NumPy: box mean, normalized separable Gaussian,
unsharp mask, Sobel derivatives and magnitude, the Harris response and the
3x3 median, on u8 images with mirrored edges (`mirror_image`, NumPy's
'symmetric' padding). Integer-valued results (Sobel, median) are compared
exactly; the rest against float64 references."""
from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from .helpers import assert_close, assert_same, run_both

FILTERS = """pipeline filters_test
use boundary
use filters

input  img: u8[2]
param  r: i32 = 1
param  sigma: f32 = 1.0
param  amount: f32 = 0.5
output boxed: f32[2]
output blurred: f32[2]
output sharpened: f32[2]
output median: u8[2]

algorithm {
    c = mirror_image(img)
    boxed = box(c, r)
    blurred = gaussian(c, sigma)
    sharpened = unsharp(c, sigma, amount)
    median = median3x3(c)
}
"""

GRADIENTS = """pipeline gradients_test
use boundary
use filters

input  img: u8[2]
output gx: f32[2]
output gy: f32[2]
output magnitude: f32[2]
output corners: f32[2]
output corners_k: f32[2]

algorithm {
    c = mirror_image(img)
    gx = sobel_x(c)
    gy = sobel_y(c)
    magnitude = sobel_magnitude(c)
    corners = harris_response(c)
    corners_k = harris_k(c, 0.06f)
}

schedule {
    corners.harris_ix.compute_root()
    corners.harris_iy.compute_root()
}
"""


def windows(img, radius):
    """Every (2 radius + 1)^2 neighbourhood of img with mirrored edges: shape (h, w, 2r+1, 2r+1),
    indexed [y, x, dy + r, dx + r]."""
    padded = np.pad(img.astype(np.float64), radius, mode="symmetric")
    return sliding_window_view(padded, (2 * radius + 1, 2 * radius + 1))


def gaussian_ref(img, sigma):
    radius = math.ceil(np.float32(3.0) * np.float32(sigma))    # R = ceil(3 sigma), in f32 as documented
    k = np.arange(-radius, radius + 1)
    w = np.exp(-k.astype(np.float64) ** 2 / (2 * np.float64(np.float32(sigma)) ** 2))
    w /= w.sum()
    return np.einsum("yxij,i,j->yx", windows(img, radius), w, w)


SOBEL_X = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float64)   # rows: y - 1, y, y + 1


def correlate3(img, kernel):
    """sum over i, j in -1..1 of kernel[j + 1, i + 1] img(x + i, y + j), edges mirrored."""
    return np.einsum("yxij,ij->yx", windows(img, 1), kernel)


def test_filters(rng):
    # the cases run in a loop, so that one worker compiles the pipeline once
    for shape, r, sigma, amount in [((9, 13), 1, 0.8, 0.5), ((15, 11), 2, 1.5, 1.25), ((5, 6), 0, 0.4, 3.0)]:
        check_filters(rng, shape, r, sigma, amount)
    check_constant_image()


def check_filters(rng, shape, r, sigma, amount):
    img = rng.integers(0, 256, shape).astype(np.uint8)
    out = run_both(FILTERS, "filters.hl", ulps={"blurred": 8}, atol={"sharpened": 1e-4},
                   img=img, r=r, sigma=sigma, amount=amount)
    assert_close(out["boxed"], windows(img, r).mean(axis=(2, 3)), atol=1e-4)
    blurred = gaussian_ref(img, sigma)
    assert_close(out["blurred"], blurred, atol=2e-4)
    assert_close(out["sharpened"], img + np.float32(amount) * (img - blurred), atol=5e-4)
    median = np.median(windows(img, 1), axis=(2, 3)).astype(np.uint8)
    assert_same(out["median"], median)


def check_constant_image():
    """A constant image stays constant under the Gaussian (the weights sum to 1)."""
    img = np.full((7, 9), 200, np.uint8)
    out = run_both(FILTERS, "filters.hl", ulps={"blurred": 8}, atol={"sharpened": 1e-4},
                   img=img, r=1, sigma=1.1, amount=2.0)
    assert_close(out["blurred"], np.full(img.shape, 200.0), atol=1e-4)
    assert_close(out["sharpened"], np.full(img.shape, 200.0), atol=1e-3)
    assert_close(out["boxed"], np.full(img.shape, 200.0), atol=0)


def test_gradients(rng):
    for shape in [(11, 13), (6, 17)]:      # in a loop: one worker compiles the pipeline once
        check_gradients(rng, shape)


def check_gradients(rng, shape):
    img = rng.integers(0, 256, shape).astype(np.uint8)
    out = run_both(GRADIENTS, "gradients.hl", img=img)
    gx = correlate3(img, SOBEL_X)
    gy = correlate3(img, SOBEL_X.T)
    # Sobel sums of integers are exact in f32, and so is the square root (correctly rounded)
    assert_same(out["gx"], gx.astype(np.float32))
    assert_same(out["gy"], gy.astype(np.float32))
    assert_same(out["magnitude"], np.sqrt(gx ** 2 + gy ** 2).astype(np.float32))

    # Harris: derivatives over a border of 2 (mirrored image), then 3x3 window sums
    padded = np.pad(img, 2, mode="symmetric")
    ix = correlate3(padded, SOBEL_X)[1:-1, 1:-1]       # derivatives at x = -1 .. w, y = -1 .. h
    iy = correlate3(padded, SOBEL_X.T)[1:-1, 1:-1]

    def window_sum(a):
        return sliding_window_view(a, (3, 3)).sum(axis=(2, 3))
    sxx, syy, sxy = window_sum(ix * ix), window_sum(iy * iy), window_sum(ix * iy)
    for name, k in (("corners", 0.04), ("corners_k", 0.06)):
        k = np.float64(np.float32(k))
        ref = sxx * syy - sxy ** 2 - k * (sxx + syy) ** 2
        # f32 cancellation in det - k trace^2: tolerance relative to the size of the terms
        scale = (sxx * syy + sxy ** 2 + k * (sxx + syy) ** 2).max()
        assert_close(out[name], ref, atol=2e-6 * scale)
    assert (out["corners"] != out["corners_k"]).any()
