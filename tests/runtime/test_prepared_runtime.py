"""The C runtime's build starts before lowering (jit.prepare_runtime), so that the C compiler
runs while a first compile with an empty cache lowers its pipeline; the library it makes is the
one loaded, and a failed build is reported as before, when the runtime is needed.

Each case runs in a fresh process (the runtime is loaded once per process) with an empty cache."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import hdsl
    from hdsl.diagnostics import HdslError
    from hdsl.runtime import jit
    mode = sys.argv[1]
    if mode == "fails-in-lowering":
        jit.prepare_runtime()
        assert jit._runtime_pending is not None
        # (the compile fails before anything is linked: the build is never waited for)
        sys.exit(0)
    jit.prepare_runtime()
    pending = jit._runtime_pending
    if mode == "prepared":
        assert pending is not None, "no build was started ahead"
        def no_second_build(*a, **k):
            raise AssertionError("the runtime was built again, not taken from the prepared build")
        jit._build_runtime = no_second_build
    src = "pipeline p\\ninput img: u16[2]\\noutput out: u16[2]\\nalgorithm { out(x, y) = img(x, y) * 3 + 1 }\\n"
    p = hdsl.loads(src)
    img = (np.arange(40 * 30) % 1000).reshape(30, 40).astype(np.uint16)
    try:
        got = p.compile("host")(img=img)
    except HdslError as e:
        print("ERROR", e)
        sys.exit(3)
    want = p.compile("interp")(img=img)
    assert np.array_equal(np.asarray(got), np.asarray(want)) and int(np.asarray(got)[5, 7]) == int(img[5, 7]) * 3 + 1
    print("OK", sorted(f.name.split("_")[1] for f in jit.cache_dir().glob("libhdsl_runtime_*.so")))
""")


def _run(tmp_path, mode: str, cc: str | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ, HDSL_CACHE_DIR=str(tmp_path / "cache"), HDSL_COMPILE_JOBS="1", TMPDIR=str(tmp_path / "tmp"))
    if cc is not None:
        env["CC"] = cc
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_the_prepared_build_is_the_library_loaded(tmp_path):
    r = _run(tmp_path, "prepared")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "OK ['runtime']", r.stdout     # built once, kept in the cache
    assert not list((tmp_path / "tmp").glob("hdsl-runtime-*"))


def test_a_failed_prepared_build_is_reported_when_the_runtime_is_needed(tmp_path):
    # `false` starts and fails (the prepared build fails); a missing compiler cannot start (the
    # build ahead is not made, and the build when needed reports it)
    for cc in ("false", str(tmp_path / "no-such-cc")):
        r = _run(tmp_path, "failing", cc=cc)
        assert r.returncode == 3, r.stdout + r.stderr
        assert r.stdout.startswith(f"ERROR error: cannot build hdsl's thread-pool runtime with '{cc}'"), r.stdout
        assert "Traceback" not in r.stderr


def test_a_build_never_needed_leaves_nothing_behind_at_exit(tmp_path):
    r = _run(tmp_path, "fails-in-lowering")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not list((tmp_path / "tmp").iterdir()), "the build left files behind"
    assert not list((tmp_path / "cache").glob("libhdsl_runtime_*.so"))
