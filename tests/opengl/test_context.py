"""Setting up OpenGL: the headless EGL context, and the one-sentence failure without one."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "blur.hl"
IMAGE = ROOT / "examples" / "images" / "gray16.png"


def _python(code: str, **env):
    full = {**os.environ, **env}
    full.pop("PYOPENGL_PLATFORM", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


def test_context_is_opengl_4_3_or_newer(gl):
    assert gl.gl_version >= (4, 3)
    assert gl.max_group_invocations >= 128          # OpenGL 4.3's guaranteed minimum is 1024; llvmpipe's is


def test_importing_hdsl_never_imports_opengl():
    """PyOpenGL picks its platform on first import: hdsl must leave that to the first real use."""
    r = _python("import sys, hdsl, hdsl.api, hdsl.cli, hdsl.runtime.opengl\n"
                "print('OpenGL' in sys.modules, 'PYOPENGL_PLATFORM' in __import__('os').environ)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_a_user_platform_is_left_alone():
    """A user who imported PyOpenGL first (its default platform, GLX here, with no window) keeps it:
    hdsl does not switch the platform under them, and says what to do instead."""
    r = _python("import OpenGL.GL, os\n"
                "from hdsl.runtime import opengl\n"
                "try:\n    opengl.context()\nexcept opengl.OpenGLUnavailable as e:\n    print(e.diagnostics[0].message)\n"
                "print('PYOPENGL_PLATFORM' in os.environ)")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "False"
    assert "no OpenGL context is current" in lines[0] and "PYOPENGL_PLATFORM unset" in lines[0]


def test_run_without_opengl_exits_1_with_one_sentence(tmp_path):
    """EGL pointed at no driver (glvnd's vendor list names a file that does not exist): the
    CLI exits 1 with one error line and the hint, no traceback."""
    env = {**os.environ, "__EGL_VENDOR_LIBRARY_FILENAMES": str(tmp_path / "none.json"),
           "HDSL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYOPENGL_PLATFORM", None)
    r = subprocess.run([sys.executable, "-m", "hdsl.cli", "run", str(EXAMPLE), "--target", "opengl",
                        "--input", f"img={IMAGE}", "--output", str(tmp_path / "o.png")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: target 'opengl' needs OpenGL 4.3 or newer, and none is usable here: ")
    assert lines[1].startswith("hint: install PyOpenGL")
    assert len(lines) == 2 and "Traceback" not in r.stderr
    assert not (tmp_path / "o.png").exists()
