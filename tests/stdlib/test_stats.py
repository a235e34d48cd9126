"""stdlib/stats.hl against NumPy, exactly: the 256-bin histogram of a u8
image, its cumulative distribution, and histogram equalization
(round((cdf(v) - cdf_min) * 255 / (N - cdf_min)), halves rounding up)."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import run_both

STATS = """pipeline stats_test
use stats

input  img: u8[2]
output hist: i32[1]
output cumulative: i32[1]
output equalized: u8[2]

algorithm {
    hist = histogram(img)
    cumulative = cdf(hist)
    equalized = equalize(img)
}

schedule {
    equalized.eq_hist.compute_root()
    equalized.eq_cdf.compute_root()
    equalized.eq_vmin.compute_root()
    equalized.eq_lut.compute_root()
}
"""


def equalize_ref(img):
    counts = np.bincount(img.ravel(), minlength=256)
    cdf = np.cumsum(counts)
    cdf_min = cdf[cdf > 0].min()
    n = img.size
    if n == cdf_min:
        return np.zeros_like(img)
    scaled = (cdf - cdf_min) * 255 / (n - cdf_min)     # exact halves stay exact in float64
    lut = np.clip(np.floor(scaled + 0.5), 0, 255).astype(np.uint8)
    return lut[img]


def images(rng):
    yield "uniform", rng.integers(0, 256, (13, 17)).astype(np.uint8)
    yield "narrow range", rng.integers(60, 90, (9, 11)).astype(np.uint8)
    skewed = (rng.beta(0.5, 3.0, (15, 7)) * 255).astype(np.uint8)
    skewed[0, 0], skewed[-1, -1] = 0, 255
    yield "skewed, full range", skewed
    yield "two values", np.where(rng.random((5, 9)) < 0.3, 40, 200).astype(np.uint8)
    yield "constant", np.full((3, 5), 77, np.uint8)
    yield "one pixel", np.array([[5]], np.uint8)


def test_stats(rng):
    for name, img in images(rng):      # in a loop: one worker compiles the pipeline once
        check_stats(name, img)


def check_stats(name, img):
    h, w = img.shape
    out = run_both(STATS, "stats.hl", [(256,), (256,), (w, h)], img=img)
    counts = np.bincount(img.ravel(), minlength=256)
    np.testing.assert_array_equal(out["hist"], counts, err_msg=name)
    assert out["hist"].dtype == np.int32
    np.testing.assert_array_equal(out["cumulative"], np.cumsum(counts), err_msg=name)
    assert out["equalized"].dtype == np.uint8
    np.testing.assert_array_equal(out["equalized"], equalize_ref(img), err_msg=name)
    if name in ("uniform", "narrow range", "skewed, full range"):
        # equalization stretches to the full range: the darkest value present maps to 0, the brightest to 255
        assert out["equalized"].min() == 0 and out["equalized"].max() == 255
