"""Stencils: box blurs (with Halide's wrap-around of narrow unsigned sums) and
a separable Gaussian in f32, compared bit for bit."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hdsl

from .helpers import assert_same, load, program, rand_image


def clamp_read(img, xs, ys):
    """img(x, y) with coordinates clamped into the image (repeat_edge)."""
    h, w = img.shape
    return img[np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)]


def grid(w, h):
    ys, xs = np.mgrid[0:h, 0:w]
    return xs, ys


def box_blur_ref(img):
    """Two passes of (a + b + c) / 3 in the image's own type: sums wrap."""
    t = img.dtype.type
    h, w = img.shape
    xs, ys = grid(w, h)

    def bx(xs, ys):
        with np.errstate(over="ignore"):
            s = clamp_read(img, xs - 1, ys) + clamp_read(img, xs, ys) + clamp_read(img, xs + 1, ys)
        return (s // t(3)).astype(img.dtype)

    with np.errstate(over="ignore"):
        s = bx(xs, ys - 1) + bx(xs, ys) + bx(xs, ys + 1)
    return (s // t(3)).astype(img.dtype)


def test_box_blur_u8_wraps(rng):
    img = rand_image(rng, (11, 13), np.uint8)
    out = load("box_blur_u8")(img=img)
    expected = box_blur_ref(img)
    assert_same(out, expected)
    # the test would be weak if no sum wrapped: make sure some did
    wide = img.astype(np.int64)
    assert (np.pad(wide, 1, mode="edge")[1:-1, :-2] + wide + np.pad(wide, 1, mode="edge")[1:-1, 2:] > 255).any()


@pytest.mark.parametrize("shape", [(11, 13), (1, 7), (9, 1), (3, 3)])
def test_box_blur_u16_example(rng, shape):
    """examples/blur.hl (repeat_edge, u16 sums that wrap at 65536)."""
    img = rand_image(rng, shape, np.uint16)
    p = hdsl.load(Path(__file__).parents[2] / "examples" / "blur.hl")
    assert_same(p(img=img), box_blur_ref(img))


def test_box_blur_widened(rng):
    img = rand_image(rng, (13, 11), np.uint8)
    p = load("box_blur_widened")
    padded = np.pad(img.astype(np.int64), 1, mode="edge")
    s = sum(padded[1 + dy:1 + dy + 13, 1 + dx:1 + dx + 11] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    assert_same(p(img=img), (s // 9).astype(np.uint8))


def test_box_blur_larger_output_than_needed_region(rng):
    """realize at a size and offset other than the input's: repeat_edge covers it."""
    img = rand_image(rng, (5, 7), np.uint8)
    out = load("box_blur_u8").realize((10, 9), img=img)
    big_xs, big_ys = grid(10, 9)
    t = np.uint8
    def bx(xs, ys):
        with np.errstate(over="ignore"):
            s = clamp_read(img, xs - 1, ys) + clamp_read(img, xs, ys) + clamp_read(img, xs + 1, ys)
        return s // t(3)
    with np.errstate(over="ignore"):
        expected = (bx(big_xs, big_ys - 1) + bx(big_xs, big_ys) + bx(big_xs, big_ys + 1)) // t(3)
    assert_same(out, expected.astype(np.uint8))


def mirror_image_index(i, n):
    """Halide's mirror_image: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ..."""
    i = np.asarray(i)
    m = np.mod(i, 2 * n)
    return np.where(m < n, m, 2 * n - 1 - m)


def test_separable_gaussian_f32_bit_exact(rng):
    img = rand_image(rng, (11, 13), np.float32)
    w = [np.float32(v) for v in (0.0702702703, 0.3162162162, 0.2270270270, 0.3162162162, 0.0702702703)]
    h, wd = img.shape
    xs, ys = grid(wd, h)

    def c(xs, ys):
        return img[mirror_image_index(ys, h), mirror_image_index(xs, wd)]

    def gx(xs, ys):
        acc = w[0] * c(xs - 2, ys)
        for k in range(1, 5):
            acc = acc + w[k] * c(xs + k - 2, ys)
        return acc

    acc = w[0] * gx(xs, ys - 2)
    for k in range(1, 5):
        acc = acc + w[k] * gx(xs, ys + k - 2)
    assert acc.dtype == np.float32
    assert_same(load("gauss_sep")(img=img), acc)


def test_gaussian_weights_from_exp_with_let_and_var(rng):
    """Weights computed in the program with exp (a few ulp), normalised by their sum."""
    p = program("""
pipeline gauss_exp
use boundary
input img: f32[2]
param sigma: f32 = 1.5
output out: f32[2]
algorithm {
    var x, y
    rdom k = [-3..4]
    let g = exp(-f32(k.x * k.x) / (2.0f * sigma * sigma))
    norm(x) = sum(g) + f32(x) * 0.0f
    c = repeat_edge(img)
    bx(x, y) = sum(g * c(x + k.x, y)) / norm(0)
    out(x, y) = sum(g * bx(x, y + k.x)) / norm(0)
}
""")
    img = rand_image(rng, (11, 13), np.float32)
    for sigma in (1.5, 0.8):
        out = p(img=img, sigma=sigma)
        taps = np.arange(-3, 4)
        g = np.exp(-(taps * taps) / (2.0 * sigma * sigma))
        g = g / g.sum()
        pad = np.pad(img.astype(np.float64), 3, mode="edge")
        bx = sum(g[i] * pad[:, 3 + t:3 + t + 13] for i, t in enumerate(taps))
        ref = sum(g[i] * bx[3 + t:3 + t + 11, :] for i, t in enumerate(taps))
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, ref, rtol=2e-6, atol=2e-6)
