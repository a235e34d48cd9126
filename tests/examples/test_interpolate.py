"""examples/interpolate.hl: the holes are filled (compiled == evaluator, known pixels keep their
colour, the filled values stay within the known ones' range), it equals Halide's apps/interpolate
algorithm (written below in Halide's Python API, strict floats) bit for bit, and `hdsl run`
writes the result."""
from __future__ import annotations

import numpy as np
import hdsl

from .test_examples import EX, IMAGES, _cli

L = 10


def test_interpolate_fills_the_holes():
    """Compiled == evaluator bit for bit; every pixel gets a finite colour in [0, 1]; a known
    pixel keeps (nearly) its colour; a hole's colour lies within the range of the known ones."""
    rgba = np.load(IMAGES / "rgba_holes.npy")
    p = hdsl.load(EX / "interpolate.hl")
    got = p.compile("host").realize((128, 96, 3), img=rgba)
    assert np.array_equal(got, p.realize((128, 96, 3), img=rgba))
    assert got.shape == (96, 128, 3) and np.isfinite(got).all()
    known = rgba[..., 3] == 1
    assert np.allclose(got[known], rgba[..., :3][known], atol=0.08)
    for ch in range(3):
        vals = rgba[..., ch][known]
        assert vals.min() - 1e-6 <= got[..., ch].min() and got[..., ch].max() <= vals.max() + 1e-6


def halide_interpolate(rgba):
    """Halide's apps/interpolate algorithm in Halide's Python API, realized with strict floats."""
    import halide as hl
    h, w, _ = rgba.shape
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    inp = hl.ImageParam(hl.Float(32), 3, "img")
    f = hl.f32
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    ds = [hl.Func(f"ds{l}") for l in range(L)]
    ds[0][x, y, c] = hl.select(c < 3, clamped[x, y, c] * clamped[x, y, 3], clamped[x, y, 3])
    for l in range(1, L):
        prev = ds[l - 1]
        if l == 4:
            mid = hl.Func("mid")
            mid[x, y, c] = prev[hl.clamp(x, 0, inp.width() // (1 << l)), hl.clamp(y, 0, inp.height() // (1 << l)), c]
            prev = mid
        dx = hl.Func(f"dx{l}")
        dx[x, y, c] = (prev[x * 2 - 1, y, c] + f(2.0) * prev[x * 2, y, c] + prev[x * 2 + 1, y, c]) * f(0.25)
        ds[l][x, y, c] = (dx[x, y * 2 - 1, c] + f(2.0) * dx[x, y * 2, c] + dx[x, y * 2 + 1, c]) * f(0.25)
    it = [hl.Func(f"it{l}") for l in range(L)]
    it[L - 1][x, y, c] = ds[L - 1][x, y, c]
    for l in range(L - 2, -1, -1):
        ux, uy = hl.Func(f"ux{l}"), hl.Func(f"uy{l}")
        ux[x, y, c] = (it[l + 1][x // 2, y, c] + it[l + 1][(x + 1) // 2, y, c]) / f(2.0)
        uy[x, y, c] = (ux[x, y // 2, c] + ux[x, (y + 1) // 2, c]) / f(2.0)
        it[l][x, y, c] = ds[l][x, y, c] + (f(1.0) - ds[l][x, y, 3]) * uy[x, y, c]
    out = hl.Func("out")
    out[x, y, c] = it[0][x, y, c] / it[0][x, y, 3]
    for l in range(1, L):
        ds[l].compute_root()
        it[l].compute_root()
    planar = np.ascontiguousarray(rgba.transpose(2, 0, 1))
    buf = hl.Buffer(planar)
    inp.set(buf)
    t = hl.get_jit_target_from_environment().with_feature(hl.TargetFeature.StrictFloat)
    res = np.asarray(out.realize([w, h, 3], t))       # (C, H, W)
    return res.transpose(1, 2, 0).copy()


def test_interpolate_matches_halide_bit_for_bit():
    rgba = np.load(IMAGES / "rgba_holes.npy")
    got = hdsl.load(EX / "interpolate.hl").compile("host").realize((128, 96, 3), img=rgba)
    expected = halide_interpolate(rgba)
    assert got.shape == expected.shape == (96, 128, 3)
    assert np.array_equal(got, expected)


def test_interpolate_runs_from_the_command_line(tmp_path):
    out = tmp_path / "filled.npy"
    r = _cli("run", str(EX / "interpolate.hl"), "--input", f"img={IMAGES / 'rgba_holes.npy'}",
             "--size", "128,96,3", "--output", str(out))
    assert r.returncode == 0, r.stderr
    rgba = np.load(IMAGES / "rgba_holes.npy")
    assert np.array_equal(np.load(out), hdsl.load(EX / "interpolate.hl").compile("host").realize((128, 96, 3), img=rgba))
