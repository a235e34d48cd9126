"""examples/interpolate.hl: Halide's apps/interpolate.

(a) against a NumPy implementation written here directly from Halide's generator source,
    apps/interpolate/interpolate_generator.cpp at Halide commit
    abbf7ff983dc19d9994d32c5a5d11a8cdda88ed8 (lines cited below), through the evaluator and
    the compiled schedule, bit for bit; on the bundled image and on sizes that are not
    multiples of 16, where the level-4 clamp's bound (width / 8, lines 39-47) matters;
(b) bit for bit against the app in Halide's Python API (benchmarks/halide_peers.py, strict
    floats), which is itself checked against the NumPy implementation, so that an error
    shared by the example and the peer (as the level-4 clamp's width / 16 was) shows;
(c) the holes are filled sensibly; (d) `hdsl run` writes what the API computes.
"""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

from .test_examples import EX, IMAGES, _cli, halide_output

F = np.float32
PATH = EX / "interpolate.hl"


# --- NumPy, from apps/interpolate/interpolate_generator.cpp ----------------------------------

class Box:
    """A Func over an integer box: arr[y - y0, x - x0, c] for c = 0 .. 3."""

    def __init__(self, arr, x0, y0):
        self.arr, self.x0, self.y0 = arr, x0, y0

    def at(self, xs, ys):
        """The values at columns xs and rows ys (integer arrays): (len(ys), len(xs), 4)."""
        xs, ys = np.asarray(xs) - self.x0, np.asarray(ys) - self.y0
        assert xs.min() >= 0 and ys.min() >= 0, "read outside the computed box"
        assert xs.max() < self.arr.shape[1] and ys.max() < self.arr.shape[0], "read outside the computed box"
        return self.arr[ys][:, xs]


def numpy_interpolate(rgba, levels=10, clamp_level_shift=3):
    """interpolate_generator.cpp's algorithm (lines 32-72) in f32, one rounding per operation in
    the source's order; each level is computed on the box of coordinates the output needs.
    clamp_level_shift: the level-4 clamp bounds are width >> shift and height >> shift; the app
    has 1 << (l - 1) with l = 4, i.e. 3 (a different value is only for showing that the tests
    see the difference)."""
    h, w, _ = rgba.shape
    L = levels
    rng = lambda r: np.arange(r[0], r[1] + 1)
    up_need = lambda r: (r[0] // 2, (r[1] + 1) // 2)          # read at x / 2 and (x + 1) / 2
    down_need = lambda r: (2 * r[0] - 1, 2 * r[1] + 1)        # read at 2x - 1 .. 2x + 1
    union = lambda r, s: (min(r[0], s[0]), max(r[1], s[1]))
    cw, ch = w >> clamp_level_shift, h >> clamp_level_shift
    clamp_box = lambda r, hi: (min(max(r[0], 0), hi), min(max(r[1], 0), hi))
    # the boxes (inclusive, per axis) each level is needed on, from the output up
    it_need = [((0, w - 1), (0, h - 1))]
    for _ in range(1, L):
        it_need.append(tuple(up_need(r) for r in it_need[-1]))
    ds_need = list(it_need)
    for l in range(L - 1, 0, -1):
        nx, ny = (down_need(r) for r in ds_need[l])
        if l == 4:
            nx, ny = clamp_box(nx, cw), clamp_box(ny, ch)
        ds_need[l - 1] = (union(ds_need[l - 1][0], nx), union(ds_need[l - 1][1], ny))
    # line 32: repeat_edge(input); line 34: downsampled[0] = premultiplied colour, and alpha
    (xa, xb), (ya, yb) = ds_need[0]
    v = rgba[np.clip(rng((ya, yb)), 0, h - 1)][:, np.clip(rng((xa, xb)), 0, w - 1)].astype(F)
    d0 = np.empty_like(v)
    d0[..., :3] = v[..., :3] * v[..., 3:4]
    d0[..., 3] = v[..., 3]
    ds = [Box(d0, xa, ya)]
    # lines 36-57: [1 2 1] / 4 along x (downx), then along y; before level 4, the previous level
    # clamped to [0, w] x [0, h] with w = input.width() / (1 << (l - 1)) (lines 39-47)
    for l in range(1, L):
        prev = ds[l - 1]
        if l == 4:
            px, py = (lambda xs: np.clip(xs, 0, cw)), (lambda ys: np.clip(ys, 0, ch))
        else:
            px = py = (lambda cs: cs)
        (xa, xb), (ya, yb) = ds_need[l]
        xs, ys = rng((xa, xb)), rng((ya, yb))
        rows = np.arange(2 * ya - 1, 2 * yb + 2)
        downx = (prev.at(px(2 * xs - 1), py(rows)) + F(2) * prev.at(px(2 * xs), py(rows))
                 + prev.at(px(2 * xs + 1), py(rows))) * F(0.25)
        dx = lambda yy: downx[yy - rows[0]]
        ds.append(Box((dx(2 * ys - 1) + F(2) * dx(2 * ys) + dx(2 * ys + 1)) * F(0.25), xa, ya))
    # lines 58-69: interpolated[L - 1] = downsampled[L - 1]; then from the coarsest level down,
    # upsampled along x, then y, each the mean of two samples, and
    # interpolated = downsampled + (1 - downsampled alpha) * upsampled
    it = ds[L - 1]
    for l in range(L - 2, -1, -1):
        (xa, xb), (ya, yb) = it_need[l]
        xs, ys = rng((xa, xb)), rng((ya, yb))
        rows = np.arange(ya // 2, (yb + 1) // 2 + 1)
        upx = (it.at(xs // 2, rows) + it.at((xs + 1) // 2, rows)) / F(2)
        ux = lambda yy: upx[yy - rows[0]]
        up = (ux(ys // 2) + ux((ys + 1) // 2)) / F(2)
        d = ds[l].at(xs, ys)
        it = Box(d + (F(1) - d[..., 3:4]) * up, xa, ya)
    # line 72: normalize by alpha; filter.cpp line 23: 3 output channels
    out = it.at(rng((0, w - 1)), rng((0, h - 1)))
    return out[..., :3] / out[..., 3:4]


def random_rgba(h, w, seed, known=0.15):
    """Random colours, a fraction `known` of them with alpha 1, the rest holes (alpha 0)."""
    rs = np.random.RandomState(seed)
    rgba = rs.rand(h, w, 4).astype(F)
    rgba[..., 3] = rs.rand(h, w) < known
    return rgba


def inputs():
    """The bundled image (128 x 96) and two sizes that are not multiples of 16."""
    return {"bundled": np.load(IMAGES / "rgba_holes.npy"), "101x77": random_rgba(77, 101, 1),
            "203x50": random_rgba(50, 203, 2)}


@pytest.fixture(scope="module")
def pipe():
    p = hdsl.load(PATH)
    return p, p.compile("host")


# --- tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bundled", "101x77", "203x50"])
def test_interpolate_against_numpy(pipe, name):
    """Compiled and evaluator equal the NumPy implementation of the generator bit for bit."""
    p, native = pipe
    rgba = inputs()[name]
    h, w, _ = rgba.shape
    expected = numpy_interpolate(rgba)
    got_native = native.realize((w, h, 3), img=rgba)
    assert got_native.shape == (h, w, 3) and got_native.dtype == np.float32
    assert np.array_equal(got_native, expected)
    assert np.array_equal(p.realize((w, h, 3), img=rgba), expected)


@pytest.mark.parametrize("name", ["bundled", "101x77", "203x50"])
def test_the_inputs_see_the_level_4_clamp(pipe, name):
    """The NumPy implementation with the level-4 clamp at width / 16 (the error the example and
    its peer once shared) differs from the example on most pixels: the tests above would have
    caught it."""
    _, native = pipe
    rgba = inputs()[name]
    h, w, _ = rgba.shape
    wrong = numpy_interpolate(rgba, clamp_level_shift=4)
    got = native.realize((w, h, 3), img=rgba)
    assert (got != wrong).mean() > 0.5 and np.abs(got - wrong).max() > 0.01


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("name", ["bundled", "101x77"])
def test_interpolate_matches_halide_bit_for_bit(pipe, name, target):
    """The peer (Halide's app in Halide's Python API, with the app's CPU schedule for the
    target) equals the NumPy implementation, and the example (its schedule for the target)
    equals the peer, bit for bit."""
    native = pipe[1] if target == "host" else pipe[0].compile(target)
    rgba = inputs()[name]
    h, w, _ = rgba.shape
    expected = halide_output("interpolate", rgba, strict=True, target=target)
    assert expected.shape == (h, w, 3)
    assert np.array_equal(expected, numpy_interpolate(rgba))
    assert np.array_equal(native.realize((w, h, 3), img=rgba), expected)


def test_interpolate_fills_the_holes(pipe):
    """Every pixel gets a finite colour in [0, 1]; a known pixel keeps (nearly) its colour; a
    hole's colour lies within the range of the known ones."""
    _, native = pipe
    rgba = np.load(IMAGES / "rgba_holes.npy")
    got = native.realize((128, 96, 3), img=rgba)
    assert got.shape == (96, 128, 3) and np.isfinite(got).all()
    known = rgba[..., 3] == 1
    assert np.allclose(got[known], rgba[..., :3][known], atol=0.08)
    for ch in range(3):
        vals = rgba[..., ch][known]
        assert vals.min() - 1e-6 <= got[..., ch].min() and got[..., ch].max() <= vals.max() + 1e-6


def test_interpolate_runs_from_the_command_line(pipe, tmp_path):
    out = tmp_path / "filled.npy"
    r = _cli("run", str(PATH), "--input", f"img={IMAGES / 'rgba_holes.npy'}",
             "--size", "128,96,3", "--output", str(out))
    assert r.returncode == 0, r.stderr
    rgba = np.load(IMAGES / "rgba_holes.npy")
    assert np.array_equal(np.load(out), pipe[1].realize((128, 96, 3), img=rgba))
