"""The C thread pool on its own (tests/runtime/pool_check.c): every iteration runs exactly
once for any extent, min and thread count; a thread blocked in one iteration does not hold
up the others (they take the rest of its share); a failing task's result comes back; a
parallel loop inside a task runs serially."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent
POOL = HERE.parents[1] / "hdsl" / "runtime" / "thread_pool.c"


@pytest.fixture(scope="module")
def pool_check(tmp_path_factory):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("a C compiler is needed to build the thread pool")
    exe = tmp_path_factory.mktemp("pool") / "pool_check"
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", str(exe),
                    str(HERE / "pool_check.c"), str(POOL)], check=True)
    return exe


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_pool(pool_check, threads):
    r = subprocess.run([str(pool_check)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HDSL_NUM_THREADS": str(threads)})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"threads {threads}"
    assert "each iteration once: ok" in lines and "failing task result: ok" in lines
    assert "nested loops: ok" in lines
    assert ("a blocked thread holds up only its own iteration: ok" in lines) == (threads > 1)
