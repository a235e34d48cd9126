"""Whole applications: the bilateral grid (Halide's apps/bilateral_grid)
against a NumPy transcription of its math, bit for bit. bilateral_grid_ref follows
apps/bilateral_grid/bilateral_grid_generator.cpp at Halide commit
abbf7ff983dc19d9994d32c5a5d11a8cdda88ed8, lines 14-67 (checked line by line), with s_sigma = S;
tests/examples/test_bilateral_grid.py uses it as the oracle of examples/bilateral_grid.hl and
of its Halide peer."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_same, load

F = np.float32


class Grid:
    """An array over an integer box: values at coordinates lo[d] .. lo[d] + shape[d] - 1."""

    def __init__(self, arr, lo):
        self.arr, self.lo = arr, list(lo)

    def __call__(self, *coords):
        return self.arr[tuple(np.asarray(c) - l for c, l in zip(coords, self.lo))]

    def tap5(self, axis):
        """(g(v-2) + 4 g(v-1) + 6 g(v) + 4 g(v+1) + g(v+2)) along axis, left to right."""
        n = self.arr.shape[axis]
        t = lambda k: np.take(self.arr, np.arange(k, n - 4 + k), axis=axis)
        out = t(0) + t(1) * F(4) + t(2) * F(6) + t(3) * F(4) + t(4)
        lo = list(self.lo)
        lo[axis] += 2
        return Grid(out, lo)


def bilateral_grid_ref(img, r_sigma, S=4):
    h, w = img.shape
    inv = F(1.0) / F(r_sigma)
    pad = 6
    gx = np.arange(-pad, (w - 1) // S + 1 + pad)
    gy = np.arange(-pad, (h - 1) // S + 1 + pad)
    nz = int(F(1.0) * inv + F(0.5)) + 1            # zi is in 0 .. nz - 1
    gz = np.arange(-pad, nz + pad)
    hist = Grid(np.zeros((len(gx), len(gy), len(gz), 2), F), [gx[0], gy[0], gz[0], 0])
    GX, GY = np.meshgrid(gx, gy, indexing="ij")
    ii, jj = GX - gx[0], GY - gy[0]
    for ry in range(S):                           # r.y outer, r.x inner: one rounding per add
        for rx in range(S):
            sx = np.clip(GX * S + rx - S // 2, 0, w - 1)
            sy = np.clip(GY * S + ry - S // 2, 0, h - 1)
            val = np.clip(img[sy, sx], F(0), F(1))
            zi = (val * inv + F(0.5)).astype(np.int64)
            hist.arr[ii, jj, zi - gz[0], 0] += val
            hist.arr[ii, jj, zi - gz[0], 1] += F(1)
    blury = hist.tap5(2).tap5(0).tap5(1)

    ys, xs = np.mgrid[0:h, 0:w]
    v2 = np.clip(img, F(0), F(1))
    zv = v2 * inv
    zj = zv.astype(np.int64)
    zf = zv - zj.astype(F)
    xf = (xs % S).astype(F) / F(S)
    yf = (ys % S).astype(F) / F(S)
    xi, yi = xs // S, ys // S

    def lerp(a, b, t):
        return a * (F(1) - t) + b * t

    def interp(c):
        return lerp(lerp(lerp(blury(xi, yi, zj, c), blury(xi + 1, yi, zj, c), xf),
                         lerp(blury(xi, yi + 1, zj, c), blury(xi + 1, yi + 1, zj, c), xf), yf),
                    lerp(lerp(blury(xi, yi, zj + 1, c), blury(xi + 1, yi, zj + 1, c), xf),
                         lerp(blury(xi, yi + 1, zj + 1, c), blury(xi + 1, yi + 1, zj + 1, c), xf), yf),
                    zf)

    return interp(0) / interp(1)


@pytest.mark.parametrize("shape,r_sigma", [((13, 11), 0.1), ((9, 17), 0.25)])
def test_bilateral_grid(rng, shape, r_sigma):
    img = rng.uniform(-0.1, 1.1, shape).astype(np.float32)
    out = load("bilateral_grid")(img=img, r_sigma=r_sigma)
    assert_same(out, bilateral_grid_ref(img, r_sigma))
