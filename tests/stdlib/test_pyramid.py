"""stdlib/pyramid.hl against NumPy: the 1-3-3-1 downsample, its matching
upsample, Gaussian and Laplacian pyramids and their collapse, in f32 (to a
tight tolerance) and in i32 (exactly, with floor division)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from .helpers import assert_close, edge, grid, run_both

KERNEL = (1, 3, 3, 1)       # binomial weights at 2x - 1 .. 2x + 2, summing to 8


def fdiv(a, b):
    return a / b


def idiv(a, b):
    return a // b       # NumPy's // floors, as hdsl's integer division does


def down_ref(f, div):
    """Halve the resolution: along x, (1/8) sum_k KERNEL[k] f(2x - 1 + k, y); then along y."""
    def along_x(x, y):
        return div(sum(KERNEL[k] * f(2 * x - 1 + k, y) for k in range(4)), 8)

    def along_y(x, y):
        return div(sum(KERNEL[k] * along_x(x, 2 * y - 1 + k) for k in range(4)), 8)
    return along_y


def up_ref(f, div):
    """Double the resolution: fine pixel x sits at coarse coordinate c = (x + 0.5) / 2 - 0.5;
    interpolate linearly between floor(c) and floor(c) + 1 (weights in quarters), x then y."""
    def lin(g, x):
        c4 = 2 * x - 1                 # 4 c
        i0 = c4 // 4
        q = c4 - 4 * i0                # 4 (c - floor(c)), 1 or 3
        return div((4 - q) * g(i0) + q * g(i0 + 1), 4)

    def along_x(x, y):
        return lin(lambda i: f(i, y), x)

    def along_y(x, y):
        return lin(lambda j: along_x(x, j), y)
    return along_y


def sub(f, g):
    return lambda x, y: f(x, y) - g(x, y)


def add(f, g):
    return lambda x, y: f(x, y) + g(x, y)


def pyramids_ref(img, levels, div):
    gp = [edge(img)]
    for _ in range(1, levels):
        gp.append(down_ref(gp[-1], div))
    lp = [sub(gp[j], up_ref(gp[j + 1], div)) for j in range(levels - 1)] + [gp[-1]]
    r = lp[-1]
    for j in reversed(range(levels - 1)):
        r = add(lp[j], up_ref(r, div))
    return gp, lp, r


PYRAMID = """pipeline pyramid_test
use boundary
use pyramid

const LEVELS = 3

input  img: T[2]
output down: T[2]
output up: T[2]
output g1: T[2]
output g2: T[2]
output l0: T[2]
output l1: T[2]
output l2: T[2]
output rebuilt: T[2]

algorithm {
    c = repeat_edge(img)
    down = downsample(c)
    up = upsample(c)
    gp = gaussian_pyramid(c, LEVELS)
    g1(x, y) = gp[1](x, y)
    g2(x, y) = gp[2](x, y)
    lp = laplacian_from_gaussian(gp, LEVELS)
    l0(x, y) = lp[0](x, y)
    l1(x, y) = lp[1](x, y)
    l2(x, y) = lp[2](x, y)
    rebuilt = collapse(lp, LEVELS)
}

schedule {
    for j in 1..LEVELS { gp[j].compute_root() }
    gp[2].down_x.compute_root()
    for j in 0..LEVELS - 1 { lp[j].compute_root() }
}
"""


def level_size(n, j):
    return math.ceil(n / 2 ** j)


def run_pyramid(img, type_name):
    h, w = img.shape
    sizes = [(level_size(w, 1), level_size(h, 1)), (2 * w, 2 * h),
             (level_size(w, 1), level_size(h, 1)), (level_size(w, 2), level_size(h, 2)),
             (w, h), (level_size(w, 1), level_size(h, 1)), (level_size(w, 2), level_size(h, 2)), (w, h)]
    out = run_both(PYRAMID.replace("T[2]", f"{type_name}[2]"), f"pyramid_{type_name}.hl", sizes, img=img)
    return out, sizes


def expected(img, div, sizes):
    gp, lp, rebuilt = pyramids_ref(img, 3, div)
    refs = [down_ref(edge(img), div), up_ref(edge(img), div), gp[1], gp[2], lp[0], lp[1], lp[2], rebuilt]
    names = ["down", "up", "g1", "g2", "l0", "l1", "l2", "rebuilt"]
    return {n: f(*grid(*s)) for n, f, s in zip(names, refs, sizes)}


# Each test runs its cases in a loop, so that one worker compiles its pipeline once.
SHAPES = [(11, 13), (7, 10), (5, 9)]


def test_pyramid_f32(rng):
    for shape in SHAPES:
        img = rng.uniform(0.0, 1.0, shape).astype(np.float32)
        out, sizes = run_pyramid(img, "f32")
        for name, ref in expected(img.astype(np.float64), fdiv, sizes).items():
            assert out[name].shape == ref.shape, (shape, name)
            assert_close(out[name], ref, atol=2e-6)
        # collapsing the Laplacian pyramid gives back the image, up to rounding
        assert_close(out["rebuilt"], img, atol=2e-6)


def test_pyramid_i32_exact(rng):
    for shape in SHAPES:
        img = rng.integers(-1000, 1000, shape).astype(np.int32)
        out, sizes = run_pyramid(img, "i32")
        for name, ref in expected(img.astype(np.int64), idiv, sizes).items():
            assert out[name].dtype == np.int32, name
            np.testing.assert_array_equal(out[name], ref, err_msg=f"{shape} {name}")
        # in integers the reconstruction is exact
        np.testing.assert_array_equal(out["rebuilt"], img)


LAPLACIAN = """pipeline laplacian_test
use boundary
use pyramid

input  img: f32[2]
output l0: f32[2]

algorithm {
    c = mirror_image(img)
    lp = laplacian_pyramid(c, 2)
    l0(x, y) = lp[0](x, y)
}

schedule {
    lp[1].compute_root()        # the coarse level, which is also what lp[0] upsamples
}
"""


def test_laplacian_pyramid_of_a_func(rng):
    """laplacian_pyramid(f, J) builds its own Gaussian pyramid."""
    img = rng.uniform(0.0, 1.0, (9, 11)).astype(np.float32)
    out = run_both(LAPLACIAN, "laplacian.hl", img=img)["l0"]
    h, w = img.shape
    p = np.pad(img.astype(np.float64), 4, mode="symmetric")      # mirror_image
    f = lambda x, y: p[y + 4, x + 4]
    ref = sub(f, up_ref(down_ref(f, fdiv), fdiv))(*grid(w, h))
    assert_close(out, ref, atol=2e-6)
