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


def test_bilateral_grid_cuda_schedule_is_halides():
    """Halide's GPU schedule (apps/bilateral_grid/bilateral_grid_generator.cpp, lines 92-119):
    blurz's 8x8 blocks with the histogram in shared memory (2 x 4-byte channels per grid cell;
    at r_sigma = 0.1 the grid's z is 0 .. 11, the bins 0 .. 10 and the interpolation's
    zj + 1, and the histogram's -2 .. 13, the z blur's taps: 16 levels); blurx and blury in
    3-D 32x8x1 tiles, z the grid's third dim (12 blocks); below r_sigma ~ 0.008 the histogram
    needs more than sm_75's 64 KB and the host says so at its compute_at before launching."""
    from .test_bilateral_grid import _image
    img = _image(40, 56)
    c = hdsl.load(EX / "bilateral_grid.hl").compile(GPU_TARGET)
    c(img=img, r_sigma=0.1)
    (k0, g0, t0, s0), (k1, g1, t1, s1), (k2, g2, t2, _), _ = c.native.device.launches
    assert k0.startswith("kernel_blurz") and t0 == (8, 8, 1) and s0 == 8 * 8 * 16 * 2 * 4
    assert k1.startswith("kernel_blurx") and t1 == (32, 8, 1) and s1 == 0 and g1[2] == 12
    assert k2.startswith("kernel_blury") and t2 == (32, 8, 1) and g2[2] == 12
    with pytest.raises(hdsl.HdslError) as e:
        c(img=img, r_sigma=0.005)        # z -2 .. 203: 206 x 64 cells x 8 bytes = 105472
    d = e.value.diagnostics[0]
    assert "'histogram' in GPU shared memory needs 105472 bytes per block" in d.message
    assert d.span is not None and "histogram.reorder(c, z, x, y).compute_at(blurz, x)" in \
        (EX / "bilateral_grid.hl").read_text().splitlines()[d.span.line - 1]


@pytest.mark.parametrize("size", ["bundled", "101x77", "203x50"])
def test_interpolate_cuda_schedule(size):
    from .test_interpolate import inputs, numpy_interpolate
    rgba = inputs()[size]
    h, w, _ = rgba.shape
    c = hdsl.load(EX / "interpolate.hl").compile(GPU_TARGET)
    got = c.realize((w, h, 3), img=rgba)
    assert np.array_equal(got, numpy_interpolate(rgba))
    assert c.native.device.counts["to_device"] == 1         # every level stays on the device
    # the output's kernel: levels 1 and 2 per 32x32 tile in shared memory; its block is the
    # largest of their thread loops over the grid (taken on the host: hdsl's bounds cannot
    # cancel the tiles' clamped extents): 16x16 threads at every image size, and a few KB of
    # shared memory (a bound over the whole image, as before, was 33x25 threads and 64160
    # bytes for the 128x96 image, and grew with it)
    (_, _, threads, shared), = [launch for launch in c.native.device.launches if launch[0].startswith("kernel_out")]
    assert threads == (16, 16, 1) and 4096 < shared < 8192


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
    for the smooth one; and under cuda-emulate equal bit for bit to the CPU schedule, which
    calls the same sin/cos. On a GPU, sin/cos are libdevice's, which differ from the C
    library's in the last bits (docs/gpu.md; seen on an H200): there the smooth phi is held
    to the evaluator's bound only."""
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
    if which == "step" or GPU_TARGET == "cuda-emulate":
        assert np.array_equal(got, p.compile("host")(img=img, phi=phi, **PARAMS))
    # img, phi, and the two the host computes: the weights and their sum; 4 kernels
    assert counts["to_device"] == 4 and counts["launch"] == 4


def test_the_autodiff_examples_cuda_schedules():
    """fit_filter's and bilateral_slice's forward pipelines (several inputs each, so not in
    EXAMPLES) under their `schedule cuda`: one kernel each, equal to the evaluator."""
    rng = np.random.default_rng(1)
    img, target = rng.random((21, 37), dtype=np.float32), rng.random((21, 37), dtype=np.float32)
    w = rng.random((5, 5), dtype=np.float32)
    p = hdsl.load(EX / "fit_filter.hl")
    got, counts = run_emulated(p, img=img, w=w, target=target)
    assert np.array_equal(got, p(img=img, w=w, target=target)) and counts["launch"] == 1
    # the API's layout (y, x, ...): grid(gx, gy, gz, c) with 12 coefficients per cell
    kw = dict(grid=rng.standard_normal((3, 4, 5, 12)).astype(np.float32),
              guide=rng.uniform(0.02, 0.98, (21, 37)).astype(np.float32),
              img=rng.random((21, 37, 3), dtype=np.float32),
              dout=rng.standard_normal((21, 37, 3)).astype(np.float32))
    p = hdsl.load(EX / "bilateral_slice.hl")
    got, counts = run_emulated(p, (37, 21, 3), **kw)
    assert np.array_equal(got, p.realize((37, 21, 3), **kw)) and counts["launch"] == 1
