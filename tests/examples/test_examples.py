"""The examples: each checks, runs through `hdsl run` on its bundled image (and writes what the
API computes), its compiled schedule gives the evaluator's values, and its output agrees
with a NumPy implementation of the algorithm written here from the papers' formulas.
(bilateral_grid and interpolate, whose inputs are f32 .npy images, have files of their own.)"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.runtime.images import load_image

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
IMAGES = EX / "images"
F = np.float32

# example -> (input name, bundled image, params for the CLI)
EXAMPLES = {
    "blur": ("img", "gray16.png", {}),
    "unsharp": ("img", "gray8.png", {}),
    "harris": ("img", "rgb8.png", {}),
    "hist_equalize": ("img", "gray8.png", {}),
    "local_laplacian": ("img", "rgb16.png", {"alpha": "2.0"}),
}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "hdsl.cli", *args], capture_output=True, text=True, timeout=300)


def halide_output(builder: str, *args, **kwargs) -> np.ndarray:
    """Build the Halide peer benchmarks/halide_peers.<builder>(*args, **kwargs) (a port of one of
    Halide's apps in Halide's Python API, its header naming the source lines it follows),
    realize it once and return a copy of its output in the (H, W[, C]) layout."""
    from benchmarks import halide_peers
    peer = getattr(halide_peers, builder)(*args, **kwargs)
    peer.run()
    return peer.output().copy()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_checks_and_runs_from_the_command_line(name, tmp_path):
    inp, image, params = EXAMPLES[name]
    path = EX / f"{name}.hl"
    r = _cli("check", str(path))
    assert r.returncode == 0, r.stderr
    out = tmp_path / f"{name}.png"
    args = ["run", str(path), "--input", f"{inp}={IMAGES / image}", "--output", str(out)]
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    written = load_image(out)
    img = load_image(IMAGES / image)
    expected = hdsl.load(path).compile("host")(**{inp: img}, **{k: float(v) for k, v in params.items()})
    assert written.shape == expected.shape and written.dtype == expected.dtype
    assert np.array_equal(written, expected)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_compiled_schedule_matches_the_evaluator(name):
    inp, image, params = EXAMPLES[name]
    p = hdsl.load(EX / f"{name}.hl")
    img = load_image(IMAGES / image)[:48, :72]          # the evaluator is slow: a crop
    kw = {k: float(v) for k, v in params.items()}
    got, ref = p.compile("host")(**{inp: img}, **kw), p(**{inp: img}, **kw)
    # (local_laplacian's exp is Halide's polynomial from halide_math.hl, not the C library's,
    # so it too is exact)
    assert np.array_equal(got, ref)


def _edge(a, pad):
    return np.pad(a, pad, mode="edge")


def test_unsharp_against_numpy():
    """out = round(f + amount (f - G_sigma * f)), G separable with weights exp(-k^2 / 2 sigma^2)
    normalized, radius ceil(3 sigma), edges repeated."""
    img = load_image(IMAGES / "gray8.png")
    sigma, amount = 1.5, 1.0
    out = hdsl.load(EX / "unsharp.hl").compile("host")(img=img, sigma=sigma, amount=amount)
    R = math.ceil(3 * sigma)
    k = np.arange(-R, R + 1)
    w = np.exp(-(k * k) / (2 * sigma * sigma))
    w /= w.sum()
    f = _edge(img.astype(np.float64), R)
    bx = sum(wk * f[:, R + j: R + j + img.shape[1]] for wk, j in zip(w, k))
    blur = sum(wk * bx[R + j: R + j + img.shape[0], :] for wk, j in zip(w, k))
    ref = np.clip(np.round(img + amount * (img - blur)), 0, 255)
    # f32 in hdsl against f64 here: values within one step, nearly all equal
    diff = np.abs(out.astype(np.int64) - ref)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01


def test_hist_equalize_against_numpy():
    img = load_image(IMAGES / "gray8.png")
    out = hdsl.load(EX / "hist_equalize.hl").compile("host")(img=img)
    hist = np.bincount(img.ravel(), minlength=256)
    cdf = np.cumsum(hist)
    n = img.size
    cmin = cdf[img.min()]
    lut = np.floor((cdf - cmin) * 255 / (n - cmin) + 0.5).clip(0, 255).astype(np.uint8)
    assert np.array_equal(out, lut[img])
    assert out.min() == 0 and out.max() == 255


def test_harris_against_numpy():
    """Gray (Rec. 601), Sobel Ix, Iy, 3x3 window sums, R = det - 0.04 trace^2, scaled to 8 bits."""
    img = load_image(IMAGES / "rgb8.png")
    out = hdsl.load(EX / "harris.hl").compile("host")(img=img)
    e = _edge(img.astype(np.float64), ((2, 2), (2, 2), (0, 0)))
    gray = 0.299 * e[..., 0] + 0.587 * e[..., 1] + 0.114 * e[..., 2]
    h, w = img.shape[:2]

    def at(a, dy, dx, hh, ww, off):
        return a[off + dy: off + dy + hh, off + dx: off + dx + ww]
    # Sobel on the (h + 2) x (w + 2) region around the image (window sums need one more)
    hh, ww = h + 2, w + 2
    ix = (at(gray, -1, 1, hh, ww, 1) + 2 * at(gray, 0, 1, hh, ww, 1) + at(gray, 1, 1, hh, ww, 1)
          - at(gray, -1, -1, hh, ww, 1) - 2 * at(gray, 0, -1, hh, ww, 1) - at(gray, 1, -1, hh, ww, 1))
    iy = (at(gray, 1, -1, hh, ww, 1) + 2 * at(gray, 1, 0, hh, ww, 1) + at(gray, 1, 1, hh, ww, 1)
          - at(gray, -1, -1, hh, ww, 1) - 2 * at(gray, -1, 0, hh, ww, 1) - at(gray, -1, 1, hh, ww, 1))

    def wsum(a):
        return sum(a[1 + dy: 1 + dy + h, 1 + dx: 1 + dx + w] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    sxx, syy, sxy = wsum(ix * ix), wsum(iy * iy), wsum(ix * iy)
    r = (sxx * syy - sxy * sxy) - 0.04 * (sxx + syy) ** 2
    ref = np.clip(128 + r * 5e-8, 0, 255).astype(np.uint8)       # u8() truncates, like astype
    diff = np.abs(out.astype(np.int64) - ref)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01
    assert (out > 200).any() and (out < 50).any()                 # corners and edges both show


@pytest.mark.parametrize("path", sorted(EX.glob("*.hl")), ids=lambda p: p.stem)
def test_every_example_file_checks(path, capsys):
    """`hdsl check` on every file in examples/ (the pipelines and the module halide_math.hl)."""
    from hdsl.cli import main
    assert main(["check", str(path)]) == 0, capsys.readouterr().err
