"""examples/local_laplacian.hl: Halide's apps/local_laplacian (release 21).

(a) against a NumPy implementation of the filter written here from its description (Paris et
    al. 2011 with Aubry et al.'s discretised intensity levels, the app's kernels and roundings:
    f32 throughout, each pyramid level held as an array over the box of coordinates the output
    needs, the input's edges repeated), through the evaluator and the compiled schedule,
    exactly (the output is u16);
(b) `hdsl run` on the bundled image writes what the API computes; (c) `hdsl check` passes;
(d) bit for bit against the app itself, written below with Halide's Python bindings, realized
    with the strict_float target feature. Without it LLVM contracts and reassociates the f32
    arithmetic (the pyramids and Halide's polynomial exp) into FMAs, so a fraction of the
    outputs move by one; that is measured, not asserted, in the fast-math test.
"""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.runtime.images import load_image

from .test_camera_pipe import np_exp
from .test_examples import EX, IMAGES, _cli

F = np.float32
PATH = EX / "local_laplacian.hl"
J = 8


# --- NumPy -----------------------------------------------------------------------------------

class Level:
    """A Func on a box: arr[..., y - y0, x - x0] (leading axes for the intensity level k)."""

    def __init__(self, arr, x0, y0):
        self.arr, self.x0, self.y0 = arr, x0, y0

    def box(self, xa, xb, ya, yb):
        assert xa >= self.x0 and ya >= self.y0
        assert xb <= self.x0 + self.arr.shape[-1] and yb <= self.y0 + self.arr.shape[-2]
        return self.arr[..., ya - self.y0:yb - self.y0, xa - self.x0:xb - self.x0]


def down_box(r):
    """The coordinates a 1-3-3-1 downsample over [a, b) reads: 2a - 1 .. 2b."""
    a, b = r
    return 2 * a - 1, 2 * b + 1


def up_box(r):
    """The coarse coordinates the interpolation over [a, b) reads."""
    a, b = r
    return (a - 1) // 2, b // 2 + 1


def union(r, s):
    return min(r[0], s[0]), max(r[1], s[1])


def downsample(f, xr, yr):
    """Blur with (1, 3, 3, 1) / 8 and take every other sample, along y and then along x."""
    def taps(g, n, axis):
        take = [np.take(g, np.arange(n) * 2 + d, axis=axis) for d in range(4)]
        return (take[0] + F(3) * (take[1] + take[2]) + take[3]) / F(8)
    ya, yb = down_box(yr)
    xa, xb = down_box(xr)
    g = f.box(xa, xb, ya, yb)
    dy = taps(g, yr[1] - yr[0], g.ndim - 2)
    return Level(taps(dy, xr[1] - xr[0], g.ndim - 1), xr[0], yr[0])


def upsample(f, xr, yr):
    """Bilinear doubling: fine 2n is 3/4 coarse n + 1/4 coarse n - 1, fine 2n + 1 is 1/4 coarse
    n + 1 + 3/4 coarse n (each as lerp(a, b, w) = a (1 - w) + b w), along x and then along y."""
    def lerp_axis(g, g0, lo, hi, axis):
        x = np.arange(lo, hi)
        a = np.take(g, (x + 1) // 2 - g0, axis=axis)
        b = np.take(g, (x - 1) // 2 - g0, axis=axis)
        w = ((x % 2) * 2 + 1).astype(F) / F(4)
        shape = [1] * g.ndim
        shape[axis] = -1
        w = w.reshape(shape)
        return a * (F(1) - w) + b * w
    cx, cy = up_box(xr), up_box(yr)
    g = f.box(cx[0], cx[1], cy[0], cy[1])
    ux = lerp_axis(g, cx[0], xr[0], xr[1], g.ndim - 1)
    return Level(lerp_axis(ux, cy[0], yr[0], yr[1], g.ndim - 2), xr[0], yr[0])


def numpy_local_laplacian(img, levels=8, alpha=1.0, beta=1.0):
    h, w, _ = img.shape
    # the boxes each level is needed on, from the output down to the coarsest level
    out_r = [((0, w), (0, h))]
    for j in range(1, J):
        out_r.append((up_box(out_r[-1][0]), up_box(out_r[-1][1])))
    gp_r = [None] * J
    for j in reversed(range(J)):
        xr, yr = out_r[j]
        if j + 1 < J:       # (lp[j - 1] reads level j on out_r[j] too)
            xr, yr = union(xr, down_box(gp_r[j + 1][0])), union(yr, down_box(gp_r[j + 1][1]))
        gp_r[j] = (xr, yr)
    # level 0: the gray level of the input with its edges repeated
    (xa, xb), (ya, yb) = gp_r[0]
    rows = np.clip(np.arange(ya, yb), 0, h - 1)
    cols = np.clip(np.arange(xa, xb), 0, w - 1)
    fl = img[rows][:, cols].astype(F) / F(65535)
    gray = F(0.299) * fl[..., 0] + F(0.587) * fl[..., 1] + F(0.114) * fl[..., 2]
    # remapping: around each intensity level k / (levels - 1), beta scales the distance and
    # alpha * d * exp(-d^2 / 2) adds detail (d in units of 1 / (levels - 1), 256 steps each)
    t = np.arange(-(levels - 1) * 256, (levels - 1) * 256 + 1)
    fx = t.astype(F) / F(256)
    remap = F(alpha) * fx * np_exp(-fx * fx / F(2))
    idx = np.clip((gray * F(levels - 1) * F(256)).astype(np.int32), 0, (levels - 1) * 256)
    ks = np.arange(levels).reshape(-1, 1, 1)
    lvl = ks.astype(F) * (F(1) / F(levels - 1))
    g0 = F(beta) * (gray[None] - lvl) + lvl + remap[idx[None] - 256 * ks + (levels - 1) * 256]
    gp = [Level(g0.astype(F), xa, ya)]
    ig = [Level(gray, xa, ya)]
    for j in range(1, J):
        gp.append(downsample(gp[-1], *gp_r[j]))
        ig.append(downsample(ig[-1], *gp_r[j]))
    # Laplacian pyramids of the processed levels, and the output's, picked per pixel by the
    # input's smoothed gray level (linear between the two nearest processed levels)
    ol = []
    for j in range(J):
        xr, yr = out_r[j]
        lp = gp[j].box(xr[0], xr[1], yr[0], yr[1])
        if j + 1 < J:
            lp = lp - upsample(gp[j + 1], xr, yr).arr
        v = ig[j].box(xr[0], xr[1], yr[0], yr[1]) * F(levels - 1)
        li = np.clip(v.astype(np.int32), 0, levels - 2)
        lf = v - li.astype(F)
        lo = np.take_along_axis(lp, li[None], axis=0)[0]
        hi = np.take_along_axis(lp, li[None] + 1, axis=0)[0]
        ol.append(Level((F(1) - lf) * lo + lf * hi, xr[0], yr[0]))
    og = ol[J - 1]
    for j in reversed(range(J - 1)):
        xr, yr = out_r[j]
        og = Level(upsample(og, xr, yr).arr + ol[j].arr, xr[0], yr[0])
    gray0 = ig[0].box(0, w, 0, h)
    colour = img.astype(F) * (og.arr + F(0.01))[..., None] / (gray0 + F(0.01))[..., None]
    return np.clip(colour, F(0), F(65535)).astype(np.uint16)


# --- Halide ----------------------------------------------------------------------------------

def halide_local_laplacian(img, levels=8, alpha=1.0, beta=1.0, strict=True):
    """apps/local_laplacian/local_laplacian_generator.cpp (release 21) in Halide's Python bindings;
    the pyramid levels compute_root, the rest inlined."""
    import halide as hl
    x, y, c, k = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("k")
    inp = hl.ImageParam(hl.UInt(16), 3, "input")
    p_levels = hl.Param(hl.Int(32), "levels", levels)
    p_alpha = hl.Param(hl.Float(32), "alpha", alpha)
    p_beta = hl.Param(hl.Float(32), "beta", beta)

    def downsample(f, dims):
        downx, downy = hl.Func(), hl.Func()
        if dims == 3:
            downy[x, y, k] = (f[x, 2 * y - 1, k] + 3.0 * (f[x, 2 * y, k] + f[x, 2 * y + 1, k]) + f[x, 2 * y + 2, k]) / 8.0
            downx[x, y, k] = (downy[2 * x - 1, y, k] + 3.0 * (downy[2 * x, y, k] + downy[2 * x + 1, y, k]) + downy[2 * x + 2, y, k]) / 8.0
        else:
            downy[x, y] = (f[x, 2 * y - 1] + 3.0 * (f[x, 2 * y] + f[x, 2 * y + 1]) + f[x, 2 * y + 2]) / 8.0
            downx[x, y] = (downy[2 * x - 1, y] + 3.0 * (downy[2 * x, y] + downy[2 * x + 1, y]) + downy[2 * x + 2, y]) / 8.0
        return downx

    def upsample(f, dims):
        upx, upy = hl.Func(), hl.Func()
        if dims == 3:
            upx[x, y, k] = hl.lerp(f[(x + 1) // 2, y, k], f[(x - 1) // 2, y, k], ((x % 2) * 2 + 1) / hl.f32(4.0))
            upy[x, y, k] = hl.lerp(upx[x, (y + 1) // 2, k], upx[x, (y - 1) // 2, k], ((y % 2) * 2 + 1) / hl.f32(4.0))
        else:
            upx[x, y] = hl.lerp(f[(x + 1) // 2, y], f[(x - 1) // 2, y], ((x % 2) * 2 + 1) / hl.f32(4.0))
            upy[x, y] = hl.lerp(upx[x, (y + 1) // 2], upx[x, (y - 1) // 2], ((y % 2) * 2 + 1) / hl.f32(4.0))
        return upy

    remap = hl.Func("remap")
    fx = hl.cast(hl.Float(32), x) / 256.0
    remap[x] = p_alpha * fx * hl.exp(-fx * fx / 2.0)
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    floating = hl.Func("floating")
    floating[x, y, c] = clamped[x, y, c] / hl.f32(65535.0)
    gray = hl.Func("gray")
    gray[x, y] = hl.f32(0.299) * floating[x, y, 0] + hl.f32(0.587) * floating[x, y, 1] + hl.f32(0.114) * floating[x, y, 2]
    gP = [hl.Func(f"gPyramid{j}") for j in range(J)]
    level = k * (hl.f32(1.0) / (p_levels - 1))
    idx = gray[x, y] * hl.cast(hl.Float(32), p_levels - 1) * 256.0
    idx = hl.clamp(hl.cast(hl.Int(32), idx), 0, (p_levels - 1) * 256)
    gP[0][x, y, k] = p_beta * (gray[x, y] - level) + level + remap[idx - 256 * k]
    for j in range(1, J):
        gP[j][x, y, k] = downsample(gP[j - 1], 3)[x, y, k]
    lP = [hl.Func(f"lPyramid{j}") for j in range(J)]
    lP[J - 1][x, y, k] = gP[J - 1][x, y, k]
    for j in range(J - 2, -1, -1):
        lP[j][x, y, k] = gP[j][x, y, k] - upsample(gP[j + 1], 3)[x, y, k]
    inG = [hl.Func(f"inGPyramid{j}") for j in range(J)]
    inG[0][x, y] = gray[x, y]
    for j in range(1, J):
        inG[j][x, y] = downsample(inG[j - 1], 2)[x, y]
    outL = [hl.Func(f"outLPyramid{j}") for j in range(J)]
    for j in range(J):
        lv = inG[j][x, y] * hl.cast(hl.Float(32), p_levels - 1)
        li = hl.clamp(hl.cast(hl.Int(32), lv), 0, p_levels - 2)
        lf = lv - hl.cast(hl.Float(32), li)
        outL[j][x, y] = (1.0 - lf) * lP[j][x, y, li] + lf * lP[j][x, y, li + 1]
    outG = [hl.Func(f"outGPyramid{j}") for j in range(J)]
    outG[J - 1][x, y] = outL[J - 1][x, y]
    for j in range(J - 2, -1, -1):
        outG[j][x, y] = upsample(outG[j + 1], 2)[x, y] + outL[j][x, y]
    color = hl.Func("color")
    eps = hl.f32(0.01)
    color[x, y, c] = inp[x, y, c] * (outG[0][x, y] + eps) / (gray[x, y] + eps)
    output = hl.Func("output")
    output[x, y, c] = hl.cast(hl.UInt(16), hl.clamp(color[x, y, c], 0.0, 65535.0))

    remap.compute_root()
    gray.compute_root()
    for j in range(1, J):
        inG[j].compute_root()
        gP[j].compute_root()
        outG[j].compute_root()
    h, w, _ = img.shape
    planar = np.array(img.transpose(2, 0, 1), order="C")        # (c, y, x): x innermost
    inp.set(hl.Buffer(planar))
    t = hl.get_jit_target_from_environment()
    if strict:
        t = t.with_feature(hl.TargetFeature.StrictFloat)
    res = np.asarray(output.realize([w, h, 3], t))
    return res.transpose(1, 2, 0).copy()


# --- tests -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pipe():
    p = hdsl.load(PATH)
    return p, p.compile("host")


def small(seed=3, w=72, h=48):
    img = load_image(IMAGES / "rgb16.png")
    y0, x0 = {3: (20, 100), 4: (120, 30)}[seed]
    return np.ascontiguousarray(img[y0:y0 + h, x0:x0 + w])


def test_numpy_remap_is_the_detail_curve():
    """The NumPy table: zero at the level, odd, alpha d exp(-d^2 / 2) within 1e-6 relative."""
    t = np.arange(-1792, 1793)
    fx = t.astype(F) / F(256)
    got = F(2.0) * fx * np_exp(-fx * fx / F(2))
    want = 2.0 * fx.astype(np.float64) * np.exp(-fx.astype(np.float64) ** 2 / 2)
    assert got[1792] == 0 and np.array_equal(got[::-1], -got)
    assert np.allclose(got, want, rtol=2e-6, atol=1e-12)


@pytest.mark.parametrize("params", [dict(alpha=2.0), dict(levels=6, alpha=0.5, beta=0.7)],
                         ids=["alpha2", "levels6"])
def test_local_laplacian_against_numpy(pipe, params):
    p, native = pipe
    img = small(3 if "beta" not in params else 4)
    expected = numpy_local_laplacian(img, **params)
    got_interp = p(img=img, **params)
    got_native = native(img=img, **params)
    assert got_native.shape == img.shape and got_native.dtype == np.uint16
    assert np.array_equal(got_interp, expected)
    assert np.array_equal(got_native, expected)
    # the filter does something: detail enhanced (alpha 2) or flattened (alpha 0.5)
    assert not np.array_equal(expected, img)


@pytest.mark.parametrize("params", [dict(alpha=2.0), dict(levels=6, alpha=0.5, beta=0.7)],
                         ids=["alpha2", "levels6"])
def test_local_laplacian_matches_halide_bit_for_bit(pipe, params):
    _, native = pipe
    img = small(3)
    assert np.array_equal(native(img=img, **params), halide_local_laplacian(img, **params))


def test_local_laplacian_full_image_matches_halide(pipe):
    _, native = pipe
    img = load_image(IMAGES / "rgb16.png")
    assert np.array_equal(native(img=img, alpha=2.0), halide_local_laplacian(img, alpha=2.0))


def test_local_laplacian_fast_math_halide_is_close(pipe):
    """Halide's default (fast-math) floats differ from strict ones in a few last bits, which
    moves some outputs by one."""
    _, native = pipe
    img = small(3)
    got = native(img=img, alpha=2.0).astype(np.int64)
    fast = halide_local_laplacian(img, alpha=2.0, strict=False)
    assert np.abs(got - fast).max() <= 2


def test_local_laplacian_runs_from_the_command_line(pipe, tmp_path):
    r = _cli("check", str(PATH))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "local_laplacian.png"
    r = _cli("run", str(PATH), "--input", f"img={IMAGES / 'rgb16.png'}", "--param", "alpha=2.0",
             "--output", str(out))
    assert r.returncode == 0, r.stderr
    written = load_image(out)
    img = load_image(IMAGES / "rgb16.png")
    expected = pipe[1](img=img, alpha=2.0)
    assert written.shape == img.shape and written.dtype == np.uint16
    assert np.array_equal(written, expected)
