"""stdlib/color.hl against NumPy: Rec. 601 luma, the power law, the sRGB
transfer curves and BT.601 full-range Y'CbCr, from the published formulas
(float64 references, f32 results)."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_close, run_both

COLOR = """pipeline color_test
use color

input  img: u8[3]
param  g: f32 = 2.2
output gray: f32[2]
output ycc: f32[3]
output back: f32[3]
output unit_ycc: f32[3]
output lin: f32[3]
output enc: f32[3]
output powed: f32[3]
output powed_expr: f32[2]

algorithm {
    gray = rgb_to_gray(img)
    ycc = rgb_to_ycbcr(img, 128)
    back = ycbcr_to_rgb(ycc, 128.0f)
    unit(x, y, c) = f32(img(x, y, c)) / 255.0f
    unit_ycc = rgb_to_ycbcr(unit, 0.5f)
    lin = srgb_to_linear(unit)
    enc = linear_to_srgb(unit)
    powed = gamma(unit, g)
    powed_expr(x, y) = gamma(unit(x, y, 1), 1.0f / g)
}
"""

# outputs computed with pow may differ between the evaluator and native code by a few ulp
POW_OUTPUTS = {"lin": 4, "enc": 4, "powed": 4, "powed_expr": 4}


def srgb_decode(v):
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def srgb_encode(v):
    return np.where(v <= 0.0031308, 12.92 * v, 1.055 * v ** (1 / 2.4) - 0.055)


BT601 = np.array([[0.299, 0.587, 0.114],
                  [-0.168736, -0.331264, 0.5],
                  [0.5, -0.418688, -0.081312]])


def test_color(rng):
    for shape in [(5, 7), (9, 4)]:     # in a loop: one worker compiles the pipeline once
        check_color(rng, shape)


def check_color(rng, shape):
    img = rng.integers(0, 256, shape + (3,)).astype(np.uint8)
    img[0, 0] = (0, 0, 0)            # include the curves' linear segments and the extremes
    img[0, 1] = (255, 255, 255)
    img[-1, -1] = (3, 10, 1)
    gamma = 1.8
    out = run_both(COLOR, "color.hl", ulps=POW_OUTPUTS, img=img, g=gamma)
    rgb = img.astype(np.float64)
    unit = rgb / 255.0

    assert_close(out["gray"], 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2], atol=1e-4)

    ycc = rgb @ BT601.T + np.array([0.0, 128.0, 128.0])
    assert_close(out["ycc"], ycc, atol=1e-4)
    assert_close(out["unit_ycc"], unit @ BT601.T + np.array([0.0, 0.5, 0.5]), atol=1e-6)
    y, cb, cr = ycc[..., 0], ycc[..., 1] - 128.0, ycc[..., 2] - 128.0
    back = np.stack([y + 1.402 * cr, y - 0.344136 * cb - 0.714136 * cr, y + 1.772 * cb], axis=-1)
    assert_close(out["back"], back, atol=2e-4)
    # the published BT.601 coefficients invert each other to about 1e-3 of the 0..255 range
    assert_close(out["back"], rgb, atol=2e-3)

    assert_close(out["lin"], srgb_decode(unit), atol=1e-6)
    assert_close(out["enc"], srgb_encode(unit), atol=1e-6)
    assert_close(out["powed"], unit ** gamma, atol=1e-6)
    assert_close(out["powed_expr"], unit[..., 1] ** (1 / np.float32(gamma)), atol=1e-6)


SRGB_ROUND_TRIP = """pipeline srgb_round_trip
use color

input  v: f32[1]
output there_and_back: f32[1]

algorithm {
    there_and_back = linear_to_srgb(srgb_to_linear(v))
}
"""


def test_srgb_curves_invert_each_other():
    """The two sRGB curves, applied to Funcs of another dimensionality (1-D), invert each other,
    across the breakpoints."""
    v = np.linspace(0.0, 1.0, 257).astype(np.float32)
    out = run_both(SRGB_ROUND_TRIP, "srgb.hl", ulps={"there_and_back": 8}, v=v)["there_and_back"]
    assert_close(out, v, atol=1e-6)
