"""`schedule auto` for `--target opengl` (its compute path): hdsl/schedule/auto_gpu.py's GPU
rules with OpenGL's limits (docs/opengl.md). Every example with a `schedule opengl` block, under the automatic
schedule on OpenGL (llvmpipe in CI), gives exactly the reference evaluator's values on a small
crop (sizes no multiple of the 16x16 work groups); a stage GLSL cannot compute (64-bit
integers) stays on the host; a shared-memory tile over the driver's limit becomes a kernel of
its own; `hdsl schedule FILE --target opengl` prints the schedule, which compiles as written."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import hdsl
from hdsl.runtime.images import load_image
from hdsl.schedule import auto_gpu
from hdsl.schedule.auto import auto_text, block_text
from hdsl.target import parse_target
from tests.gpu.programs import BLUR
from tests.opengl.test_examples import EX, IMAGES

# example -> (input, bundled image, params); camera_pipe and bilateral_grid below
EXAMPLES = {
    "blur": ("img", "gray16.png", {}),
    "harris": ("img", "rgb8.png", {}),
    "unsharp": ("img", "gray8.png", {"sigma": 1.5, "amount": 1.0}),
    "local_laplacian": ("img", "rgb16.png", {"alpha": 2.0}),
}
SLOW = {"local_laplacian"}       # (about 10 s on llvmpipe: 23 kernels compiled)


@pytest.mark.parametrize("name", [n if n not in SLOW else pytest.param(n, marks=pytest.mark.slow)
                                  for n in EXAMPLES])
def test_auto_opengl_schedule_of_each_example_matches_the_evaluator(gl, name):
    inp, image, params = EXAMPLES[name]
    p = hdsl.load(EX / f"{name}.hl")
    assert "opengl" in p.ir.schedules
    assert "gpu_tile(x, y, x_i, y_i, 16, 16)" in auto_text(p.ir, "opengl")
    img = np.ascontiguousarray(load_image(IMAGES / image)[:45, :70])
    got = p.compile("opengl", schedule="auto")(**{inp: img}, **params)
    np.testing.assert_array_equal(got, p.compile("interp")(**{inp: img}, **params))


def test_auto_opengl_schedule_of_bilateral_grid(gl):
    from tests.examples.test_bilateral_grid import _image
    img = _image(40, 56)
    p = hdsl.load(EX / "bilateral_grid.hl")
    # (the histogram's update over its pure x, y: each invocation its own cell's 8x8 reduction)
    assert "histogram.update(0).gpu_tile(x, y, x_i, y_i, 16, 16)" in auto_text(p.ir, "opengl")
    np.testing.assert_array_equal(p.compile("opengl", schedule="auto")(img=img, r_sigma=0.1),
                                  p.compile("interp")(img=img, r_sigma=0.1))


@pytest.mark.slow
def test_auto_opengl_schedule_of_camera_pipe(gl):
    """camera_pipe's tone curve computes with i64 (GLSL has none): it stays on the host, a
    table the kernels read; the rest are kernels. Compared with the evaluator on a crop."""
    p = hdsl.load(EX / "camera_pipe.hl")
    text = auto_text(p.ir, "opengl")
    assert "curve.compute_root()" in text.splitlines()
    raw = load_image(IMAGES / "bayer16.png")[:88, :128]
    h, w = raw.shape
    size = ((w - 32) // 32 * 32, (h - 24) // 32 * 32, 3)
    kw = dict(raw=raw, matrix_3200=np.load(IMAGES / "camera_matrix_3200.npy"),
              matrix_7000=np.load(IMAGES / "camera_matrix_7000.npy"))
    np.testing.assert_array_equal(p.compile("opengl", schedule="auto").realize(size, **kw), p.realize(size, **kw))


def test_a_stage_glsl_cannot_compute_stays_on_the_host(gl):
    """bx sums in i64: on cuda it is computed in out's blocks' shared memory; on opengl its
    kernel would be refused (no 64-bit integers in GLSL), so it is computed at the root on
    the host, and out, a kernel, reads it. The values are the evaluator's."""
    src = BLUR.replace("bx(x, y) = (c(x - 1, y) + c(x, y) + c(x + 1, y)) / 3",
                       "bx(x, y) = u16((i64(c(x - 1, y)) + i64(c(x, y)) + i64(c(x + 1, y))) / 3)")
    p = hdsl.loads(src)
    assert "bx.compute_at(out, x).gpu_threads(x, y)" in auto_text(p.ir, "cuda")
    lines = auto_text(p.ir, "opengl").splitlines()
    assert "bx.compute_root()" in lines and "out.gpu_tile(x, y, x_i, y_i, 16, 16)" in lines
    img = (np.arange(30 * 41) * 977 % 65521).astype(np.uint16).reshape(30, 41)
    np.testing.assert_array_equal(p.compile("opengl", schedule="auto")(img=img), p(img=img))


def test_a_shared_tile_over_the_drivers_limit_is_a_kernel_of_its_own(gl, monkeypatch):
    """blur_x per 16x16 block takes 16 x 18 u16 = 576 bytes of shared memory: under a limit
    of 512 bytes (pretended here: the rules plan for OpenGL 4.3's least, 32 KB) it is computed
    at the root as its own kernel instead, and the values stay the evaluator's. (Run as a
    block of its own name: compiled objects are cached by the schedule's name.)"""
    assert auto_gpu._block_limits(parse_target("opengl")) == (1024, 32 * 1024)
    p = hdsl.load(EX / "blur.hl")
    assert "blur_x.compute_at(out, x).gpu_threads(x, y)" in auto_text(p.ir, "opengl")
    monkeypatch.setattr(auto_gpu, "_block_limits", lambda t: (1024, 512))
    p = hdsl.load(EX / "blur.hl")
    text = auto_text(p.ir, "opengl")
    assert "blur_x.compute_root().gpu_tile(x, y, x_i, y_i, 16, 16)" in text and "compute_at" not in text
    p = hdsl.loads((EX / "blur.hl").read_text() + "\n" + block_text(text, "small_shared"), "blur.hl")
    img = load_image(IMAGES / "gray16.png")[:37, :50]
    np.testing.assert_array_equal(p.compile("opengl", schedule="small_shared")(img=img), p(img=img))


def test_hdsl_schedule_prints_the_opengl_schedule_which_compiles_as_written(gl, tmp_path):
    r = subprocess.run([sys.executable, "-m", "hdsl.cli", "schedule", str(EX / "harris.hl"), "--target", "opengl",
                        "--name", "mine"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "schedule mine {" in r.stdout and "    out.gpu_tile(x, y, x_i, y_i, 16, 16)\n" in r.stdout
    src = (EX / "harris.hl").read_text() + "\n" + r.stdout
    p = hdsl.loads(src, "harris.hl")
    img = np.ascontiguousarray(load_image(IMAGES / "rgb8.png")[:33, :40])
    np.testing.assert_array_equal(p.compile("opengl", schedule="mine")(img=img), p.compile("interp")(img=img))


SUM = """pipeline s
input  img: f32[2]
output out: f32[2]
algorithm {
    rdom r = [0..N]
    out(x, y) = 0.0f
    out(x, y) += img(x + r.x, y)
}
"""


@pytest.mark.parametrize("n, on_gpu", [(64, True), (4096, True), (4097, False), (100000, False)])
def test_an_update_with_a_large_reduction_per_point_runs_on_the_host(gl, n, on_gpu):
    """llvmpipe stops an invocation's loops after 65535 iterations (docs/opengl.md): an
    update whose reduction per point is over GL_LOOP_BUDGET (4096) points stays on the host
    on opengl (cuda tiles it); the pure stage is a kernel either way. Run where small."""
    p = hdsl.loads(SUM.replace("N", str(n)))
    update = "out.update(0).gpu_tile(x, y, x_i, y_i, 16, 16)"
    assert update in auto_text(p.ir, "cuda")
    text = auto_text(p.ir, "opengl")
    assert "out.gpu_tile(x, y, x_i, y_i, 16, 16)" in text and (update in text) == on_gpu
    if n <= 4097:
        img = np.random.default_rng(n).random((5, n + 19), dtype=np.float32)
        c = p.compile("opengl", schedule="auto")
        np.testing.assert_array_equal(c.realize((19, 5), img=img), p.realize((19, 5), img=img))
