"""`schedule auto` for the CUDA targets (hdsl/schedule/auto_gpu.py): every example's automatic
GPU schedule, run by the host-emulation device, gives exactly the reference's values (the
evaluator's, or for the slow-to-evaluate apps the NumPy implementations their own tests
check bit for bit); and the rules' shape: root stages are gpu_tile'd 16x16 kernels, a small
stencil goes into its consumer's blocks' shared memory, one that does not fit a block is a
kernel of its own instead."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.runtime.images import load_image
from hdsl.schedule.auto import auto_text
from tests.examples.test_examples import EX, EXAMPLES, IMAGES
from tests.gpu.programs import BLUR
from tests.targets import GPU_TARGET

FAST = ["blur", "harris", "hist_equalize", "unsharp"]


def auto(p):
    c = p.compile(GPU_TARGET, schedule="auto")
    return c, c.native.device


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(EXAMPLES)])
def test_auto_gpu_schedule_of_each_example_matches_the_evaluator(name):
    inp, image, params = EXAMPLES[name]
    p = hdsl.load(EX / f"{name}.hl")
    img = load_image(IMAGES / image)[:48, :72]
    kw = {k: float(v) for k, v in params.items()}
    c, dev = auto(p)
    got = c(**{inp: img}, **kw)
    assert np.array_equal(got, p(**{inp: img}, **kw))
    assert dev.counts["launch"] >= 1       # (host stages between kernels: a histogram's scatter)


def test_auto_gpu_schedule_of_bilateral_grid():
    from tests.examples.test_bilateral_grid import _image
    img = _image(40, 56)
    p = hdsl.load(EX / "bilateral_grid.hl")
    c, dev = auto(p)
    assert np.array_equal(c(img=img, r_sigma=0.1), p(img=img, r_sigma=0.1))
    # the histogram's update over its pure x, y (each thread its own cell's reduction)
    assert "histogram.update(0).gpu_tile(x, y, x_i, y_i, 16, 16)" in auto_text(p.ir, GPU_TARGET)


def test_auto_gpu_schedules_of_the_autodiff_and_level_set_examples():
    rng = np.random.default_rng(1)
    img, target = rng.random((21, 37), dtype=np.float32), rng.random((21, 37), dtype=np.float32)
    w = rng.random((5, 5), dtype=np.float32)
    p = hdsl.load(EX / "fit_filter.hl")
    c, _ = auto(p)
    assert np.array_equal(c(img=img, w=w, target=target), p(img=img, w=w, target=target))
    kw = dict(grid=rng.standard_normal((3, 4, 5, 12)).astype(np.float32),
              guide=rng.uniform(0.02, 0.98, (21, 37)).astype(np.float32),
              img=rng.random((21, 37, 3), dtype=np.float32),
              dout=rng.standard_normal((21, 37, 3)).astype(np.float32))
    p = hdsl.load(EX / "bilateral_slice.hl")
    c, _ = auto(p)
    assert np.array_equal(c.realize((37, 21, 3), **kw), p.realize((37, 21, 3), **kw))
    from tests.examples.test_level_set import PARAMS, _phis
    img = load_image(IMAGES / "shapes.png")[30:78, 20:84]
    phi = _phis(*img.shape)["step"]
    p = hdsl.load(EX / "level_set.hl")
    c, _ = auto(p)
    assert np.array_equal(c(img=img, phi=phi, **PARAMS), p(img=img, phi=phi, **PARAMS))


@pytest.mark.slow
def test_auto_gpu_schedules_of_camera_pipe_and_interpolate():
    from tests.examples.test_camera_pipe import DEFAULTS, PATH, bundled, numpy_camera_pipe, out_size
    raw, m32, m70 = bundled()
    w, h = out_size(raw)
    c, _ = auto(hdsl.load(PATH))
    got = c.realize((w, h, 3), raw=raw, matrix_3200=m32, matrix_7000=m70, **DEFAULTS)
    assert np.array_equal(got, numpy_camera_pipe(raw, m32, m70, w, h, **DEFAULTS))
    from tests.examples.test_interpolate import inputs, numpy_interpolate
    rgba = inputs()["101x77"]
    h, w, _ = rgba.shape
    c, _ = auto(hdsl.load(EX / "interpolate.hl"))
    assert np.array_equal(c.realize((w, h, 3), img=rgba), numpy_interpolate(rgba))


def test_a_small_stencil_goes_into_its_consumers_shared_memory():
    """blur: the output a kernel of 16x16 blocks, blur_x computed per block in shared memory
    by the block's threads (16 x 18 u16 = 576 bytes), one launch."""
    p = hdsl.load(EX / "blur.hl")
    text = auto_text(p.ir, GPU_TARGET)
    assert "out.gpu_tile(x, y, x_i, y_i, 16, 16)" in text
    assert "blur_x.compute_at(out, x).gpu_threads(x, y)" in text
    c, dev = auto(p)
    img = load_image(IMAGES / "gray16.png")[:40, :50]
    c(img=img)
    (_, grid, threads, shared), = dev.launches
    assert threads == (16, 18, 1) and shared == 16 * 18 * 2 and grid == (4, 3, 1)


def test_a_stencil_too_wide_for_a_block_is_a_kernel_of_its_own():
    """bx read 100 pixels either side: per 16x16 block it would take 216 x 16 threads, more
    than a block's 1024, so the rules compute it at the root as its own kernel (16x16 tiles);
    the result is the evaluator's."""
    src = BLUR.replace("out(x, y) = (bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) / 3",
                       "out(x, y) = (bx(x - 100, y) + bx(x, y) + bx(x + 100, y)) / 3")
    p = hdsl.loads(src)
    text = auto_text(p.ir, GPU_TARGET)
    assert "bx.compute_root().gpu_tile(x, y, x_i, y_i, 16, 16)" in text and "compute_at" not in text
    img = (np.arange(30 * 41) % 4099).astype(np.uint16).reshape(30, 41)
    c, dev = auto(p)
    assert np.array_equal(c(img=img), p(img=img))
    assert dev.counts["launch"] == 2


def test_the_cpu_targets_keep_the_cpu_rules():
    # (opengl's automatic schedule: tests/opengl/test_auto_opengl.py)
    p = hdsl.load(EX / "blur.hl")
    assert "gpu_" not in auto_text(p.ir, "host")


@pytest.mark.parametrize("name", ["blur", "harris", "bilateral_grid"])
def test_auto_gpu_schedule_assembles_with_ptxas(name):
    """The automatic schedule compiled for `cuda` (sm_75): PTX that ptxas assembles for sm_75,
    sm_80 and sm_90, one entry per launch."""
    from hdsl.lower.gpu import kernels_of
    from hdsl.lower.lower import lower
    from hdsl.runtime.cuda import device_code
    from hdsl.target import parse_target
    from tests.cuda.ptxas_check import assembled
    target = parse_target("cuda")
    low = lower(hdsl.load(EX / f"{name}.hl").ir, "auto", target)
    kernels = {k.kernel.name for k in kernels_of(low.stmt)}
    ptx = assembled(device_code(low.stmt, target).ptx)
    assert ptx.count(".entry ") == len(kernels) > 0
