"""examples/bilateral_grid.hl (Chen et al. 2007, as Halide's apps/bilateral_grid): compiled ==
evaluator == a NumPy bilateral grid bit for bit, equal bit for bit to Halide's app (its algorithm
written below in Halide's Python API, strict floats), and `hdsl run` on the bundled image."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from tests.correctness.test_apps import bilateral_grid_ref

from .test_examples import EX, IMAGES, _cli

F = np.float32
S = 8              # Halide's s_sigma (a generator constant there, a const in the example)


def _image(h, w, seed=0):
    """Smooth shading, a step edge and noise, in [0, 1] with a few values outside (the app
    clamps them)."""
    rs = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = 0.4 + 0.3 * np.sin(xx / 9.0) * np.cos(yy / 7.0) + np.where(xx + yy > (h + w) // 2, 0.25, 0.0)
    return (base + rs.normal(0, 0.05, (h, w))).clip(-0.05, 1.05).astype(F)


def halide_bilateral_grid(img, r_sigma, schedule=False):
    """Halide's apps/bilateral_grid algorithm in Halide's Python API; with schedule=True, its CPU
    schedule. Strict floats (no fused multiply-adds), as hdsl's code has none."""
    import halide as hl
    h, w = img.shape
    x, y, z, c = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("c")
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    rs = hl.Param(hl.Float(32), "r_sigma")
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    r = hl.RDom([(0, S), (0, S)])
    val = hl.clamp(clamped[x * S + r.x - S // 2, y * S + r.y - S // 2], hl.f32(0.0), hl.f32(1.0))
    zi = hl.i32(val * (hl.f32(1.0) / rs) + hl.f32(0.5))
    histogram = hl.Func("histogram")
    histogram[x, y, z, c] = hl.f32(0.0)
    histogram[x, y, zi, c] += hl.mux(c, [val, hl.f32(1.0)])
    blurz, blurx, blury = hl.Func("blurz"), hl.Func("blurx"), hl.Func("blury")
    blurz[x, y, z, c] = (histogram[x, y, z - 2, c] + histogram[x, y, z - 1, c] * 4 + histogram[x, y, z, c] * 6
                         + histogram[x, y, z + 1, c] * 4 + histogram[x, y, z + 2, c])
    blurx[x, y, z, c] = (blurz[x - 2, y, z, c] + blurz[x - 1, y, z, c] * 4 + blurz[x, y, z, c] * 6
                         + blurz[x + 1, y, z, c] * 4 + blurz[x + 2, y, z, c])
    blury[x, y, z, c] = (blurx[x, y - 2, z, c] + blurx[x, y - 1, z, c] * 4 + blurx[x, y, z, c] * 6
                         + blurx[x, y + 1, z, c] * 4 + blurx[x, y + 2, z, c])
    v = hl.clamp(inp[x, y], hl.f32(0.0), hl.f32(1.0))
    zv = v * (hl.f32(1.0) / rs)
    zj = hl.i32(zv)
    zf = zv - zj
    xf = hl.f32(x % S) / S
    yf = hl.f32(y % S) / S
    xi, yi = x / S, y / S
    interpolated = hl.Func("interpolated")
    interpolated[x, y, c] = hl.lerp(
        hl.lerp(hl.lerp(blury[xi, yi, zj, c], blury[xi + 1, yi, zj, c], xf),
                hl.lerp(blury[xi, yi + 1, zj, c], blury[xi + 1, yi + 1, zj, c], xf), yf),
        hl.lerp(hl.lerp(blury[xi, yi, zj + 1, c], blury[xi + 1, yi, zj + 1, c], xf),
                hl.lerp(blury[xi, yi + 1, zj + 1, c], blury[xi + 1, yi + 1, zj + 1, c], xf), yf),
        zf)
    out = hl.Func("bilateral_grid")
    out[x, y] = interpolated[x, y, 0] / interpolated[x, y, 1]
    if schedule:                                   # the app's CPU schedule
        blurz.compute_at(blurx, y).reorder(c, z, x, y).vectorize(x, 8).unroll(c)
        histogram.compute_at(blurz, y)
        histogram.update().reorder(c, r.x, r.y, x, y).unroll(c)
        blurx.compute_root().reorder(c, x, z, y).parallel(y).vectorize(x, 8).unroll(c)
        blury.compute_at(out, y).store_in(hl.MemoryType.Stack).reorder(c, x, y, z) \
             .reorder_storage(c, z, x, y).vectorize(x, 8).unroll(c)
        out.compute_root().parallel(y, 8).vectorize(x, 8)
    else:
        for f in (histogram, blurz, blurx, blury):
            f.compute_root()
    arr = np.ascontiguousarray(img)
    buf = hl.Buffer(arr)                           # (H, W) array -> a W x H buffer
    inp.set(buf)
    rs.set(float(r_sigma))
    t = hl.get_jit_target_from_environment().with_feature(hl.TargetFeature.StrictFloat)
    res = np.asarray(out.realize([w, h], t)).copy()
    del buf                                        # (the buffer must not outlive arr)
    return res


@pytest.mark.parametrize("r_sigma", [0.1, 0.25])
def test_bilateral_grid_against_numpy_evaluator_and_compiled(r_sigma):
    """The grid's math in NumPy (tests/correctness/test_apps.py: f32, the same order of
    additions): compiled and evaluator both equal it bit for bit."""
    img = _image(40, 56)
    p = hdsl.load(EX / "bilateral_grid.hl")
    nat = p.compile("host")(img=img, r_sigma=r_sigma)
    ev = p(img=img, r_sigma=r_sigma)
    ref = bilateral_grid_ref(img, r_sigma, S=S)
    assert nat.dtype == ev.dtype == np.float32 and nat.shape == img.shape
    assert np.array_equal(nat, ev)
    assert np.array_equal(nat, ref)
    # an edge-preserving smoother: close to the (clamped) input, smoother than it
    c = img.clip(0, 1)
    assert np.abs(nat - c).mean() < 0.1
    assert np.abs(np.diff(nat, axis=1)).mean() < np.abs(np.diff(c, axis=1)).mean()


@pytest.mark.parametrize("schedule", [False, True], ids=["root", "app_schedule"])
def test_bilateral_grid_matches_halide_bit_for_bit(schedule):
    img = np.load(IMAGES / "gray_f32.npy")
    got = hdsl.load(EX / "bilateral_grid.hl").compile("host")(img=img, r_sigma=0.1)
    expected = halide_bilateral_grid(img, 0.1, schedule)
    assert got.shape == expected.shape == img.shape
    assert np.array_equal(got, expected)


def test_bilateral_grid_runs_from_the_command_line(tmp_path):
    path = EX / "bilateral_grid.hl"
    r = _cli("check", str(path))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "bg.npy"
    r = _cli("run", str(path), "--input", f"img={IMAGES / 'gray_f32.npy'}", "--param", "r_sigma=0.1",
             "--output", str(out))
    assert r.returncode == 0, r.stderr
    img = np.load(IMAGES / "gray_f32.npy")
    written = np.load(out)
    expected = hdsl.load(path).compile("host")(img=img, r_sigma=0.1)
    assert written.shape == img.shape and written.dtype == np.float32
    assert np.array_equal(written, expected)
