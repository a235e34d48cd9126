"""Every example's `schedule cuda` block, run by the host-emulation device (target
cuda-emulate: the very kernels the CUDA target makes, compiled for the host), gives
exactly the reference's values: the evaluator's, or for the slow-to-evaluate apps the
NumPy implementations their own tests check bit for bit. Each runs as kernels (launches
counted), and its one output is copied back to the host once."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from tests.targets import GPU_TARGET
from hdsl.runtime.images import load_image

from .test_examples import EX, EXAMPLES, IMAGES


def run_emulated(p, *args, **kw):
    c = p.compile(GPU_TARGET)
    assert c.native.device.counts["launch"] == 0
    out = c.realize(*args, **kw) if args else c(**kw)
    counts = c.native.device.counts
    assert counts["launch"] >= 1
    assert counts["to_host"] == 1          # the output, once
    return out, counts


def test_every_example_has_a_cuda_schedule():
    for path in sorted(EX.glob("*.hl")):
        if path.stem == "halide_math":
            continue            # (a library)
        assert "cuda" in hdsl.load(path).ir.schedules, path.name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_cuda_schedule_matches_the_evaluator(name):
    inp, image, params = EXAMPLES[name]
    p = hdsl.load(EX / f"{name}.hl")
    img = load_image(IMAGES / image)[:48, :72]          # the evaluator is slow: a crop
    kw = {k: float(v) for k, v in params.items()}
    got, counts = run_emulated(p, **{inp: img}, **kw)
    assert np.array_equal(got, p(**{inp: img}, **kw))


def test_bilateral_grid_cuda_schedule():
    from .test_bilateral_grid import _image
    img = _image(40, 56)
    p = hdsl.load(EX / "bilateral_grid.hl")
    got, counts = run_emulated(p, img=img, r_sigma=0.1)
    assert np.array_equal(got, p(img=img, r_sigma=0.1))
    assert counts["launch"] == 4 and counts["to_device"] == 1        # blurz+histogram, blurx, blury, out


@pytest.mark.parametrize("size", ["bundled", "101x77"])
def test_interpolate_cuda_schedule(size):
    from .test_interpolate import inputs, numpy_interpolate
    rgba = inputs()[size]
    h, w, _ = rgba.shape
    got, counts = run_emulated(hdsl.load(EX / "interpolate.hl"), (w, h, 3), img=rgba)
    assert np.array_equal(got, numpy_interpolate(rgba))
    assert counts["to_device"] == 1         # every level stays on the device


def test_camera_pipe_cuda_schedule():
    from .test_camera_pipe import DEFAULTS, PATH, bundled, numpy_camera_pipe, out_size
    raw, m32, m70 = bundled()
    w, h = out_size(raw)
    got, counts = run_emulated(hdsl.load(PATH), (w, h, 3), raw=raw, matrix_3200=m32, matrix_7000=m70, **DEFAULTS)
    assert np.array_equal(got, numpy_camera_pipe(raw, m32, m70, w, h, **DEFAULTS))
    # raw, and the two tables the host computes (the colour matrix, the sharpening strength)
    assert counts["to_device"] == 3 and counts["launch"] == 2


@pytest.mark.parametrize("which", ["step", "smooth"])
def test_level_set_cuda_schedule(which):
    """As its CPU schedule (test_level_set.py): equal to the evaluator for the step phi, within
    the few ulp the C library's and NumPy's sin/cos differ by (amplified by the divergences)
    for the smooth one; and equal bit for bit to the CPU schedule, which calls the same sin/cos."""
    from .test_level_set import PARAMS, _phis
    img = load_image(IMAGES / "shapes.png")[30:78, 20:84]
    phi = _phis(*img.shape)[which]
    p = hdsl.load(EX / "level_set.hl")
    got, counts = run_emulated(p, img=img, phi=phi, **PARAMS)
    interp = p(img=img, phi=phi, **PARAMS)
    if which == "step":
        assert np.array_equal(got, interp)
    else:
        assert np.abs(got - interp).max() < 1e-4
    assert np.array_equal(got, p.compile("host")(img=img, phi=phi, **PARAMS))
    # img, phi, and the two the host computes: the weights and their sum; 4 kernels
    assert counts["to_device"] == 4 and counts["launch"] == 4
