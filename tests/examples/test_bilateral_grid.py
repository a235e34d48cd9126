"""examples/bilateral_grid.hl (Chen et al. 2007, as Halide's apps/bilateral_grid): compiled ==
evaluator == a NumPy bilateral grid bit for bit, equal bit for bit to Halide's app (its algorithm
in Halide's Python API in benchmarks/halide_peers.py, strict floats), and `hdsl run` on the bundled image."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from tests.correctness.test_apps import bilateral_grid_ref

from .test_examples import EX, IMAGES, _cli, halide_output

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
    """Halide's apps/bilateral_grid in Halide's Python API (benchmarks/halide_peers.py, the
    benchmark's peer); schedule=True: its CPU schedule. Strict floats (no fused multiply-adds),
    as hdsl's code has none."""
    return halide_output("bilateral_grid", img, r_sigma, strict=True, schedule=schedule)


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
    # the peer itself (the benchmark's) against the NumPy bilateral grid
    assert np.array_equal(expected, bilateral_grid_ref(img, 0.1, S=S))


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


def test_bilateral_grid_negative_r_sigma_is_halides():
    """With no clamp on the bins (as in Halide's app, line 25) a negative r_sigma puts them at
    -1 / r_sigma .. 0: compiled == evaluator == Halide's app bit for bit (the example once
    clamped the bins to 0 .. 1 / r_sigma, which changed these values); r_sigma = 0 or NaN is
    refused before anything runs (Halide's own bounds are undefined there)."""
    img = _image(24, 40, seed=2)
    p = hdsl.load(EX / "bilateral_grid.hl")
    c = p.compile("host")
    nat = c(img=img, r_sigma=-0.2)
    assert np.array_equal(nat, p(img=img, r_sigma=-0.2))
    assert np.array_equal(nat, halide_output("bilateral_grid", img, -0.2, strict=True, schedule=True))
    for bad in (0.0, float("nan")):
        with pytest.raises(hdsl.HdslError, match="computed through float arithmetic"):
            c(img=img, r_sigma=bad)
