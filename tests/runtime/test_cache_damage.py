"""A damaged compile cache never crashes a run, and a cache that cannot be used costs only the
cache (issue 14, item 6). Before the fix a runtime library cut short killed the process
(SIGBUS: the loader maps pages past the end of the file), an empty or garbage one was an internal
error, an object with valid framing and damaged ELF bytes made LLVM abort the process, and
HOME=/dev/null or HDSL_CACHE_DIR naming a file was an internal error.

Each case runs `hdsl run` in a subprocess (a crash is then a failed test, not a dead test
worker) on a copy of a cache filled by a first run, and checks: exit status 0, no internal
error, the output equal to the reference evaluator's, and the damaged file rebuilt whole."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.runtime import jit
from hdsl.runtime.images import load_image

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "examples" / "blur.hl"
IMAGE = ROOT / "examples" / "images" / "gray16.png"
CLI = "import sys; from hdsl.cli import main; sys.exit(main())"


def run_hdsl(out: Path, env_changes: dict, wrap: tuple = ()) -> subprocess.CompletedProcess:
    """`hdsl run examples/blur.hl` writing `out`, with the environment changed as given (None
    removes a variable), run under the command `wrap` if given."""
    env = dict(os.environ)
    env.pop("XDG_CACHE_HOME", None)
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return subprocess.run([*wrap, sys.executable, "-c", CLI, "run", str(PROGRAM), "--input", f"img={IMAGE}",
                           "--output", str(out)], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def expected():
    return hdsl.load(PROGRAM)(img=load_image(IMAGE))


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory, expected):
    """A cache after one run: the runtime library, the object keyed by the LLVM IR and the one
    keyed by the sources."""
    d = tmp_path_factory.mktemp("filled")
    r = run_hdsl(d / "out.npy", {"HDSL_CACHE_DIR": d / "cache"})
    assert r.returncode == 0, r.stderr
    cache = d / "cache"
    assert len(list(cache.glob("libhdsl_runtime_*.so"))) == 1
    assert len(list(cache.glob("src-*.o"))) == 1 and len(list(cache.glob("*.o"))) == 2
    return cache


def _damaged_copy(filled: Path, tmp_path: Path, pattern: str, damage) -> tuple[Path, list[Path]]:
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    files = sorted(cache.glob(pattern))
    assert files
    for f in files:
        f.write_bytes(damage(f.read_bytes()))
    return cache, files


def _check_run(tmp_path: Path, expected, env: dict, wrap: tuple = ()) -> subprocess.CompletedProcess:
    out = tmp_path / "out.npy"
    r = run_hdsl(out, env, wrap)
    assert r.returncode == 0, f"exit status {r.returncode}\n{r.stderr}"
    assert "internal" not in r.stderr.lower() and "C compiler" not in r.stderr
    assert np.array_equal(np.load(out), expected)
    return r


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _garbage(data: bytes) -> bytes:
    return np.random.RandomState(1).bytes(len(data))


def _damage_elf(data: bytes) -> bytes:
    """The same length and framing, the first object's ELF header (after its identification
    bytes: type, machine, entry, header offsets and sizes) overwritten."""
    at = data.index(b"\x7fELF") + 16
    return data[:at] + b"\xff" * 48 + data[at + 48:]


RUNTIME_DAMAGE = {"cut short": _truncate, "empty": lambda data: b"", "garbage": _garbage}


@pytest.mark.parametrize("damage", list(RUNTIME_DAMAGE), ids=list(RUNTIME_DAMAGE))
def test_a_damaged_runtime_library_is_rebuilt(damage, filled_cache, tmp_path, expected):
    cache, (lib,) = _damaged_copy(filled_cache, tmp_path, "libhdsl_runtime_*.so", RUNTIME_DAMAGE[damage])
    _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": cache})
    assert jit.unseal(lib.read_bytes()) is not None, "the damaged library was not replaced"


OBJECT_DAMAGE = {"ELF bytes": _damage_elf, "cut short": _truncate, "empty": lambda data: b""}


@pytest.mark.parametrize("damage", list(OBJECT_DAMAGE), ids=list(OBJECT_DAMAGE))
def test_damaged_cached_objects_are_compiled_afresh(damage, filled_cache, tmp_path, expected):
    """Both objects (keyed by the sources and by the LLVM IR) damaged alike."""
    cache, objects = _damaged_copy(filled_cache, tmp_path, "*.o", OBJECT_DAMAGE[damage])
    _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": cache})
    for o in objects:
        assert jit.read_cached_objects(o) is not None, f"{o.name} was not replaced"


def test_a_cache_file_that_cannot_be_written_costs_only_the_cache(filled_cache, tmp_path, expected):
    """Each object's place taken by a directory: it cannot be read or replaced (as on a full
    disk, a write fails after the directory was found usable): one warning, a right result, and no
    temporary file left behind."""
    cache = tmp_path / "cache"
    shutil.copytree(filled_cache, cache)
    for o in cache.glob("*.o"):
        o.unlink()
        o.mkdir()
    r = _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": cache})
    _warnings(r.stderr)
    assert all(o.is_dir() for o in cache.glob("*.o")) and not list(cache.glob("*.tmp"))


def _warnings(stderr: str) -> list[str]:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr           # one warning line, nothing else
    assert lines[0].startswith("warning: hdsl's compile cache at ") and "without it" in lines[0]
    return lines


def test_home_dev_null_runs_without_a_cache_with_one_warning(tmp_path, expected):
    r = _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": None, "HOME": "/dev/null"})
    assert "/dev/null/.cache/hdsl" in _warnings(r.stderr)[0]


def test_cache_dir_naming_a_file_runs_without_a_cache_with_one_warning(tmp_path, expected):
    f = tmp_path / "a_file"
    f.write_text("not a directory")
    r = _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": f})
    assert "(not a directory)" in _warnings(r.stderr)[0]
    assert f.read_text() == "not a directory"


def test_an_uncreatable_cache_dir_runs_without_a_cache_with_one_warning(tmp_path, expected):
    f = tmp_path / "a_file"
    f.write_text("")
    r = _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": f / "sub" / "cache"})
    _warnings(r.stderr)


def test_xdg_cache_home_is_the_default_location(tmp_path, expected):
    _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": None, "XDG_CACHE_HOME": tmp_path / "xdg",
                                    "HOME": tmp_path / "home"})
    assert any((tmp_path / "xdg" / "hdsl").glob("src-*.o"))
    assert not (tmp_path / "home").exists()


def _read_only_mount(directory: Path) -> tuple:
    """A command prefix that runs a command with `directory` a read-only file system, in a mount
    namespace of its own (root writes through permission bits, not through a read-only mount);
    skips the test where that cannot be had."""
    wrap = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs -o ro,size=64k tmpfs "$0" && exec "$@"', str(directory))
    try:
        probe = subprocess.run([*wrap, "sh", "-c", 'touch "$0/x"', str(directory)],
                               capture_output=True, text=True, timeout=30)
    except OSError:
        probe = None
    if probe is None or "Read-only file system" not in probe.stderr:
        pytest.skip("running as root, and no read-only mount can be made here")
    return wrap


def test_a_read_only_cache_dir_runs_without_a_cache_with_one_warning(tmp_path, expected):
    cache = tmp_path / "cache"
    cache.mkdir()
    wrap = ()
    if os.geteuid() == 0:
        wrap = _read_only_mount(cache)
    else:
        cache.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        r = _check_run(tmp_path, expected, {"HDSL_CACHE_DIR": cache}, wrap)
    finally:
        cache.chmod(stat.S_IRWXU)
    _warnings(r.stderr)
    assert list(cache.iterdir()) == []


def test_a_sealed_file_is_checked():
    """The seal: a checksum over the whole payload (any byte changed, or cut short, fails)."""
    data = b"\x7fELF" + bytes(range(256)) * 4
    sealed = jit.seal(data)
    assert jit.unseal(sealed) == data
    assert jit.unseal(sealed[:-1]) is None and jit.unseal(sealed[1:]) is None
    for i in (0, 100, len(data) - 1, len(data) + 5):
        flipped = bytearray(sealed)
        flipped[i] ^= 1
        assert jit.unseal(bytes(flipped)) is None
    assert jit.unseal(data) is None and jit.unseal(b"") is None
