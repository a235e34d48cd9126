"""examples/interpolate.hl: the holes are filled (compiled == evaluator, known pixels keep their
colour, the filled values stay within the known ones' range), it equals Halide's apps/interpolate
algorithm (benchmarks/halide_peers.py, in Halide's Python API, strict floats) bit for bit, and `hdsl run`
writes the result."""
from __future__ import annotations

import numpy as np

import hdsl

from .test_examples import EX, IMAGES, _cli


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


def test_interpolate_matches_halide_bit_for_bit():
    rgba = np.load(IMAGES / "rgba_holes.npy")
    got = hdsl.load(EX / "interpolate.hl").compile("host").realize((128, 96, 3), img=rgba)
    from benchmarks import halide_peers        # Halide's app, in its Python API
    peer = halide_peers.interpolate(rgba, strict=True)
    peer.run()
    expected = peer.output()
    assert got.shape == expected.shape == (96, 128, 3)
    assert np.array_equal(got, expected)


def test_interpolate_runs_from_the_command_line(tmp_path):
    out = tmp_path / "filled.npy"
    r = _cli("run", str(EX / "interpolate.hl"), "--input", f"img={IMAGES / 'rgba_holes.npy'}",
             "--size", "128,96,3", "--output", str(out))
    assert r.returncode == 0, r.stderr
    rgba = np.load(IMAGES / "rgba_holes.npy")
    assert np.array_equal(np.load(out), hdsl.load(EX / "interpolate.hl").compile("host").realize((128, 96, 3), img=rgba))
