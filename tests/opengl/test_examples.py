"""Every example's `schedule opengl` run on OpenGL (llvmpipe in CI) equals the reference
evaluator exactly (blur, unsharp, harris, camera_pipe on the fragment path; bilateral_grid,
local_laplacian on the compute path), on the
bundled images and, for the first three, on a crop whose sizes are no multiple of the work
group; `hdsl run --target opengl` writes the same image."""
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

# example -> (input, bundled image, params)
EXAMPLES = {
    "blur": ("img", "gray16.png", {}),
    "unsharp": ("img", "gray8.png", {"sigma": 1.5, "amount": 1.0}),
    "harris": ("img", "rgb8.png", {}),
}


@pytest.mark.parametrize("crop", [None, (181, 237)])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_opengl_schedule_equals_the_evaluator(gl, name, crop):
    inp, image, params = EXAMPLES[name]
    p = hdsl.load(EX / f"{name}.hl")
    assert "opengl" in p.ir.schedules
    # (these three run on the fragment path: every stage of theirs on the GPU is glsl(...))
    assert any(d.name == "glsl" for ds in p.ir.schedules["opengl"].directives.values() for d in ds)
    img = load_image(IMAGES / image)
    if crop:
        img = np.ascontiguousarray(img[:crop[0], :crop[1]])
    got = p.compile("opengl")(**{inp: img}, **params)
    want = p.compile("interp")(**{inp: img}, **params)
    assert got.shape == want.shape == img.shape[:2]
    np.testing.assert_array_equal(got, want)


def test_bilateral_grid(gl):
    p = hdsl.load(EX / "bilateral_grid.hl")
    img = np.load(IMAGES / "gray_f32.npy")
    for r_sigma in (0.1, 0.25):
        got = p.compile("opengl")(img=img, r_sigma=r_sigma)
        np.testing.assert_array_equal(got, p.compile("interp")(img=img, r_sigma=r_sigma))


def test_camera_pipe(gl):
    """At the app's output size (the mosaic less 32 x 24, down to multiples of 32)."""
    p = hdsl.load(EX / "camera_pipe.hl")
    raw = load_image(IMAGES / "bayer16.png")
    h, w = raw.shape
    size = ((w - 32) // 32 * 32, (h - 24) // 32 * 32, 3)
    kw = dict(raw=raw, matrix_3200=np.load(IMAGES / "camera_matrix_3200.npy"),
              matrix_7000=np.load(IMAGES / "camera_matrix_7000.npy"))
    np.testing.assert_array_equal(p.compile("opengl").realize(size, **kw), p.realize(size, **kw))
    # (on the fragment path: five stages rendered, the Bayer planes as one texel's 4 channels)
    from hdsl.aot import compiled_form
    listing = compiled_form(p.ir, "glsl", target="opengl")
    assert "0 OpenGL compute shader(s) and 5 fragment shader(s)" in listing.splitlines()[0]


def test_local_laplacian(gl):
    p = hdsl.load(EX / "local_laplacian.hl")
    img = load_image(IMAGES / "rgb16.png")
    got = p.compile("opengl")(img=img, alpha=2.0)
    np.testing.assert_array_equal(got, p.compile("interp")(img=img, alpha=2.0))


def test_run_from_the_command_line(gl, tmp_path):
    out = tmp_path / "blur.png"
    r = subprocess.run([sys.executable, "-m", "hdsl.cli", "run", str(EX / "blur.hl"), "--target", "opengl",
                        "--input", f"img={IMAGES / 'gray16.png'}", "--output", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    want = hdsl.load(EX / "blur.hl").compile("interp")(img=load_image(IMAGES / "gray16.png"))
    np.testing.assert_array_equal(load_image(out), want)


def test_compile_emits_the_shaders(tmp_path):
    """`hdsl compile --target opengl` writes blur.glsl (by default) with its two stages'
    OpenGL ES 3.0 fragment shaders (blur_x, then out reading blur_x's texture)."""
    r = subprocess.run([sys.executable, "-m", "hdsl.cli", "compile", str(EX / "blur.hl"), "--target", "opengl",
                        "-o", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "blur.glsl")
    text = (tmp_path / "blur.glsl").read_text()
    assert text.count("#version 300 es") == 2 and "#version 430" not in text
    assert "uniform highp usampler2D blur_x;" in text      # (u16: an R16UI texture)
    assert "invariant layout(location = 0) out highp uvec4 hdsl_color;" in text


def test_compile_emits_compute_shaders_with_shared_memory():
    """A compute-path schedule's listing: blur's former one-kernel schedule (16x16 work groups
    of blur's tile, 18 rows of blur_x in shared memory between barriers)."""
    from hdsl.aot import compiled_form
    text = (EX / "blur.hl").read_text()
    i = text.index("schedule opengl")
    text = text[:i] + """schedule opengl {
    out.gpu_tile(x, y, xi, yi, 16, 16)
    blur_x.compute_at(out, x).gpu_threads(x, y)
}
"""
    listing = compiled_form(hdsl.loads(text, "blur.hl").ir, "glsl", target="opengl")
    assert listing.count("#version 430") == 1
    assert "layout(local_size_x = 16, local_size_y = 18, local_size_z = 1) in;" in listing
    assert "shared uint hdsl_shared[" in listing and "barrier();" in listing
