"""The wheel is the product (issue 14, item 1): built from the repository, installed (not
editable) into a fresh virtual environment, and run from a directory outside the checkout, hdsl
finds its grammar, its standard library (`use filters`) and its runtime's C source inside the
installed package; native code equals the reference evaluator on the command line and through the
Python API; caches go to the per-user cache directory, and nothing is written into the installed
package or anywhere else in the virtual environment.

The fresh environment gets hdsl's dependencies (NumPy, llvmlite, Lark, Pillow) from the test
environment through a directory of links to them, so the test needs no network and no download;
hdsl itself and any editable install of it are left out of that directory."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.install

PROGRAM = ROOT / "examples" / "unsharp.hl"          # `use boundary` and `use filters`
IMAGE = ROOT / "examples" / "images" / "gray8.png"
PLAYGROUND_BUNDLE = "hdsl/playground/static/editor.js"


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def _backend_at_hand() -> bool:
    """setuptools and its bdist_wheel command (its own since 70.1, the `wheel` package's before)."""
    spec = importlib.util.find_spec
    return spec("setuptools") is not None and (spec("wheel") is not None
                                               or spec("setuptools.command.bdist_wheel") is not None)


def _build_wheel(work: Path) -> Path:
    """The wheel built from a copy of what the repository tracks for the package (so neither
    the build's own files nor anything untracked in the checkout can leak into it)."""
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "hdsl", src / "hdsl", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist", src]
    if _backend_at_hand():
        cmd.insert(5, "--no-build-isolation")          # no download, and faster
    _run(cmd)
    (wheel,) = (work / "dist").glob("hdsl-*.whl")
    return wheel


def _dependency_links(work: Path) -> Path:
    """A directory of links to everything in the test environment's site-packages but hdsl:
    the fresh environment's dependencies, without hdsl's editable install."""
    site = Path(sysconfig.get_paths()["purelib"])
    deps = work / "deps"
    deps.mkdir()
    for entry in site.iterdir():
        n = entry.name.lower()
        if n.startswith(("hdsl", "__editable__", "_hdsl")) or n.endswith(".pth") or n == "__pycache__":
            continue
        (deps / entry.name).symlink_to(entry)
    return deps


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


API_SCRIPT = """
import sys, numpy as np, hdsl
from hdsl.runtime.images import load_image
p = hdsl.load("unsharp.hl")
img = load_image("gray8.png")
native = p.compile("host")(img=img)
reference = p(img=img)
np.save("api_native.npy", native)
np.save("api_reference.npy", reference)
print(hdsl.__file__)
print(native.shape, native.dtype)
"""

DASK_SCRIPT = """
import numpy as np, dask, dask.array as da, hdsl
from hdsl.runtime.images import load_image
img = load_image("gray8.png")
out = hdsl.load("unsharp.hl").on_dask(img=da.from_array(img, chunks=(50, 70)), tile=(64, 48))
with dask.config.set(scheduler="threads"):
    np.save("dask.npy", out.compute())
"""

def test_the_wheel_runs_a_stdlib_program_outside_the_checkout(tmp_path):
    work = tmp_path / "build"
    work.mkdir()
    wheel = _build_wheel(work)
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ["hdsl/grammar/hdsl.lark", "hdsl/grammar/hdsl_lalr.pickle", "hdsl/stdlib/filters.hl", "hdsl/runtime/thread_pool.c",
                   "hdsl/runtime/call.c",
                   "hdsl/playground/static/index.html", "hdsl/playground/static/playground.css",
                   "hdsl/examples/blur.hl", "hdsl/examples/camera_pipe.hl", "hdsl/examples/images/gray16.png",
                   "hdsl/examples/images/camera_matrix_3200.npy"]:
        assert needed in names, f"the wheel lacks {needed}"
    # the playground's editor bundle, built by `make playground-bundle` (which `make test` and
    # `make wheel` run); a developer's checkout without Node may lack it, CI may not
    if os.environ.get("CI") or (ROOT / PLAYGROUND_BUNDLE).is_file():
        assert PLAYGROUND_BUNDLE in names, f"the wheel lacks {PLAYGROUND_BUNDLE}"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "hdsl_test_deps.pth").write_text(str(_dependency_links(work)) + "\n")
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel])

    user = tmp_path / "user"              # a directory outside the checkout, with a home of its own
    user.mkdir()
    shutil.copy(PROGRAM, user / "unsharp.hl")
    shutil.copy(IMAGE, user / "gray8.png")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HDSL_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HOME=str(user / "home"), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               PYTHONDONTWRITEBYTECODE="1")
    before = _tree(venv)
    hdsl_cmd = venv / "bin" / "hdsl"

    version = _run([hdsl_cmd, "--version"], cwd=user, env=env).stdout.strip()
    assert version == f"hdsl {wheel.name.split('-')[1]}"

    _run([hdsl_cmd, "run", "unsharp.hl", "--input", "img=gray8.png", "--output", "native.npy",
          "--target", "host"], cwd=user, env=env)
    _run([hdsl_cmd, "run", "unsharp.hl", "--input", "img=gray8.png", "--output", "interp.npy",
          "--target", "interp"], cwd=user, env=env)
    native, interp = np.load(user / "native.npy"), np.load(user / "interp.npy")
    assert native.shape == np.asarray(Image.open(IMAGE)).shape and native.dtype == np.uint8
    assert np.array_equal(native, interp)

    # a batch in spawned local processes (they import hdsl from the wheel too), and on_dask
    (user / "photos").mkdir()
    for stem in ("a", "b"):
        shutil.copy(IMAGE, user / "photos" / f"{stem}.png")
    _run([hdsl_cmd, "run", "unsharp.hl", "--input", "img=photos/*.png", "--output", "batch/{stem}.npy",
          "--workers", "2"], cwd=user, env=env)
    for stem in ("a", "b"):
        assert np.array_equal(np.load(user / "batch" / f"{stem}.npy"), native)
    _run([py, "-c", DASK_SCRIPT], cwd=user, env=env)
    assert np.array_equal(np.load(user / "dask.npy"), native)

    # the parser from the wheel's prebuilt tables (tests/test_parser_tables.py), not rebuilt
    loaded = _run([py, "-c", "from hdsl.frontend.parse import _parser; print(_parser().source_path)"],
                  cwd=user, env=env).stdout.strip()
    assert loaded == "<deserialized>", loaded
    out = _run([py, "-c", API_SCRIPT], cwd=user, env=env).stdout.split("\n")
    assert Path(out[0]).resolve().is_relative_to(site.resolve()), f"imported hdsl from {out[0]}, not the wheel"
    assert np.array_equal(np.load(user / "api_native.npy"), np.load(user / "api_reference.npy"))
    assert np.array_equal(np.load(user / "api_native.npy"), native)

    if PLAYGROUND_BUNDLE in names:
        _serve_the_playground(venv / "bin" / "hdsl", user, env)

    assert _tree(venv) == before, "something was written into the virtual environment"
    cache = user / "home" / ".cache" / "hdsl"
    assert any(cache.glob("libhdsl_runtime_*.so")) and any(cache.glob("src-*.o")), \
        "the compile cache is not in the per-user cache directory"


def _serve_the_playground(hdsl_cmd: Path, cwd: Path, env: dict) -> None:
    """The installed `hdsl playground` serves its page and bundle from the package, offers the
    stdlib and the examples with their sample images (copies in the wheel: there is no
    checkout), and checks a program in its worker."""
    import json
    import socket
    import time
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(hdsl_cmd), "playground", "--port", str(port)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                meta = json.loads(urllib.request.urlopen(url + "/api/meta", timeout=10).read())
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
                time.sleep(0.2)
        assert "filters" in meta["stdlib"] and meta["starter"] == ["rings"]
        assert "blur" in meta["examples"] and "camera_pipe" in meta["examples"]
        assert "gray16.png" in {s["name"] for s in meta["images"]}
        assert b"pipeline blur" in urllib.request.urlopen(url + "/api/source/example/blur", timeout=10).read()
        assert b"pipeline rings" in urllib.request.urlopen(url + "/api/source/starter/rings", timeout=10).read()
        assert b"hdsl playground" in urllib.request.urlopen(url + "/", timeout=10).read()
        assert len(urllib.request.urlopen(url + "/static/editor.js", timeout=10).read()) > 100_000
        req = urllib.request.Request(url + "/api/check", json.dumps({"source": "pipeline p\nuse filters\n"
                                     "output o: u8[1]\nalgorithm { o(x) = u8(x) }\n"}).encode())
        assert json.loads(urllib.request.urlopen(req, timeout=60).read())["ok"] is True
    finally:
        proc.terminate()
        proc.wait(10)
