"""examples/local_laplacian.hl: Halide's apps/local_laplacian, as in
apps/local_laplacian/local_laplacian_generator.cpp at Halide commit
abbf7ff983dc19d9994d32c5a5d11a8cdda88ed8 (the algorithm, lines 18-87 and 266-282).

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
from .test_examples import EX, IMAGES, _cli, halide_output

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

def halide_local_laplacian(img, levels=8, alpha=1.0, beta=1.0, strict=True, schedule=False):
    """apps/local_laplacian/local_laplacian_generator.cpp in Halide's Python bindings
    (benchmarks/halide_peers.py, the benchmark's peer): the pyramid levels compute_root and the
    rest inlined, or (schedule=True) the app's CPU schedule."""
    return halide_output("local_laplacian", img, levels, alpha, beta, strict=strict, schedule=schedule)


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
    """The example equals the peer, and the peer (the app in Halide's Python API, the
    benchmark's) equals the NumPy implementation: a slip shared by the example and its peer
    would show."""
    _, native = pipe
    img = small(3)
    expected = halide_local_laplacian(img, **params)
    assert np.array_equal(expected, numpy_local_laplacian(img, **params))
    assert np.array_equal(native(img=img, **params), expected)


@pytest.mark.parametrize("schedule", [False, True], ids=["root", "app_schedule"])
def test_local_laplacian_full_image_matches_halide(pipe, schedule):
    _, native = pipe
    img = load_image(IMAGES / "rgb16.png")
    assert np.array_equal(native(img=img, alpha=2.0), halide_local_laplacian(img, alpha=2.0, schedule=schedule))


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
