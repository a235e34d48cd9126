"""The bilateral slicing layer (examples/bilateral_slice.hl): forward and gradient, hdsl
against a NumPy reference (and PyTorch's autograd when it is installed).

    python benchmarks/bilateral_slice.py [--size W,H] [--grid GW,GH,GD] [--reps N]

The NumPy forward and backward are written here by hand from the layer's formulas (HDRNet,
Gharbi et al. 2017; Li et al. 2018 Sec. 6); tests/examples/test_bilateral_slice.py checks
that hdsl's derived gradient equals this hand-written one. Arrays use hdsl's [x, y, ...]
index order internally (the API's (H, W, C) layout is converted at the edges).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HDSL_NUM_THREADS", "2")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _corners(grid, guide):
    """For each of the 8 corners: (ix, iy, iz) clamped, the tent weights and d wz / d guide;
    grid is [gx, gy, gz, c], guide [x, y]."""
    GW, GH, GD, _ = grid.shape
    W, H = guide.shape
    x = np.arange(W, dtype=np.float32)[:, None]
    y = np.arange(H, dtype=np.float32)[None, :]
    gx = (x + np.float32(0.5)) * np.float32(GW) / np.float32(W)
    gy = (y + np.float32(0.5)) * np.float32(GH) / np.float32(H)
    gz = guide * np.float32(GD)
    fx, fy, fz = (np.floor(g - np.float32(0.5)).astype(np.int32) for g in (gx, gy, gz))
    for kz in (0, 1):
        for ky in (0, 1):
            for kx in (0, 1):
                dx = gx - np.float32(0.5) - (fx + kx)
                dy = gy - np.float32(0.5) - (fy + ky)
                dz = gz - np.float32(0.5) - (fz + kz)
                wx, wy, wz = (np.maximum(np.float32(1) - np.abs(d), np.float32(0)) for d in (dx, dy, dz))
                # d wz / d guide: -sign(dz) * GD where the tent is not flat (ties: the branch taken)
                dwz = np.where(np.float32(1) - np.abs(dz) >= 0, np.where(dz >= 0, -1.0, 1.0), 0.0) * GD
                ix = np.broadcast_to(np.clip(fx + kx, 0, GW - 1), guide.shape)
                iy = np.broadcast_to(np.clip(fy + ky, 0, GH - 1), guide.shape)
                iz = np.clip(fz + kz, 0, GD - 1)
                yield ix, iy, iz, np.broadcast_to(wx * wy, guide.shape), wz, dwz.astype(np.float32)


def numpy_forward(grid, guide, img):
    coeff = np.zeros(guide.shape + (grid.shape[3],), np.float32)
    for ix, iy, iz, wxy, wz, _ in _corners(grid, guide):
        coeff += grid[ix, iy, iz, :] * (wxy * wz)[..., None]
    out = np.stack([coeff[..., 4 * co] * img[..., 0] + coeff[..., 4 * co + 1] * img[..., 1]
                    + coeff[..., 4 * co + 2] * img[..., 2] + coeff[..., 4 * co + 3] for co in range(3)], -1)
    return out, coeff


def numpy_backward(grid, guide, img, dout):
    """(d grid, d guide, d img) of sum(out * dout)."""
    _, coeff = numpy_forward(grid, guide, img)
    dcoeff = np.zeros_like(coeff)
    dimg = np.zeros_like(img)
    for co in range(3):
        for ci in range(3):
            dcoeff[..., 4 * co + ci] = dout[..., co] * img[..., ci]
            dimg[..., ci] += dout[..., co] * coeff[..., 4 * co + ci]
        dcoeff[..., 4 * co + 3] = dout[..., co]
    dgrid = np.zeros_like(grid)
    dguide = np.zeros_like(guide)
    for ix, iy, iz, wxy, wz, dwz in _corners(grid, guide):
        np.add.at(dgrid, (ix, iy, iz), dcoeff * (wxy * wz)[..., None])
        dguide += np.einsum("xyc,xyc->xy", grid[ix, iy, iz, :], dcoeff) * wxy * dwz
    return dgrid, dguide, dimg


def hdsl_layer(target="host"):
    """(forward, gradient) callables over [x, y, ...]-ordered arrays, compiled once."""
    import hdsl
    p = hdsl.load(ROOT / "examples" / "bilateral_slice.hl")
    fwd = p.compile(target) if target != "interp" else p
    grad = p.gradient("loss", ["grid", "guide", "img"])
    grad = grad.compile(target) if target != "interp" else grad

    def t(a):              # [x, y, ...] -> the API's (H, W, ...) layout
        return np.ascontiguousarray(np.swapaxes(a, 0, 1))

    def forward(grid, guide, img):
        return t(fwd.realize(img.shape, grid=t(grid), guide=t(guide), img=t(img), dout=t(img)))

    def gradient(grid, guide, img, dout):
        r = grad(grid=t(grid), guide=t(guide), img=t(img), dout=t(dout))
        return t(r["grid"]), t(r["guide"]), t(r["img"])
    return forward, gradient


def inputs(size=(256, 256), grid=(16, 16, 8), seed=0):
    rng = np.random.default_rng(seed)
    W, H = size
    return (rng.standard_normal(tuple(grid) + (12,)).astype(np.float32),
            rng.uniform(0.02, 0.98, (W, H)).astype(np.float32),
            rng.uniform(0, 1, (W, H, 3)).astype(np.float32),
            rng.standard_normal((W, H, 3)).astype(np.float32))


def _time(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return np.median(ts) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="512,512")
    ap.add_argument("--grid", default="16,16,8")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    size = tuple(int(v) for v in a.size.split(","))
    gsize = tuple(int(v) for v in a.grid.split(","))
    grid, guide, img, dout = inputs(size, gsize)
    forward, gradient = hdsl_layer()
    rows = [("forward", lambda: forward(grid, guide, img), lambda: numpy_forward(grid, guide, img)),
            ("gradient (grid, guide, img)", lambda: gradient(grid, guide, img, dout),
             lambda: numpy_backward(grid, guide, img, dout))]
    print(f"bilateral slicing layer, {size[0]}x{size[1]} pixels, grid {gsize} x 12, "
          f"{os.environ['HDSL_NUM_THREADS']} threads; median of {a.reps} runs")
    for name, h, n in rows:
        th, tn = _time(h, a.reps), _time(n, a.reps)
        print(f"  {name:28s} hdsl {th:8.2f} ms   NumPy {tn:8.2f} ms   hdsl/NumPy {th / tn:.2f}")
    try:
        import torch  # noqa: F401
        print("  (PyTorch is installed but not compared yet)")
    except ImportError:
        print("  (PyTorch is not installed: no autograd comparison)")


if __name__ == "__main__":
    main()
