"""A large module is compiled in parts, by forked processes at once, and linked by the JIT
(or by ld ahead of time): same values as the reference evaluator, each function defined in
exactly one part, failures in a child reported, and the cache holding every part."""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess

import numpy as np
import pytest

import hdsl
from hdsl.codegen.modules import split_module
from hdsl.diagnostics import HdslError, InternalError
from hdsl.runtime import jit

N_STAGES = 24


def chain_source(n: int = N_STAGES) -> str:
    """n root stages, each parallel and vectorized: one task function per stage, each with its
    own constant (a task linked to the wrong stage changes the result)."""
    lines = ["pipeline chain", "input img: i32[2]", "output out: i32[2]", "algorithm {", "    g0(x, y) = img(clamp(x, 0, img.width - 1), y)"]
    lines += [f"    g{i}(x, y) = g{i - 1}(x, y) * {i % 3 + 2} + g{i - 1}(x + 1, y) - {i * 7}" for i in range(1, n)]
    lines += [f"    out(x, y) = g{n - 1}(x, y)", "}", "schedule s {"]
    lines += [f"    g{i}.compute_root().parallel(y).vectorize(x, 4)" for i in range(1, n)]
    return "\n".join(lines + ["}"]) + "\n"


IMG = np.random.RandomState(3).randint(-50, 50, (7, 40)).astype(np.int32)
SIZE = (40, 7)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HDSL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def program():
    p = hdsl.loads(chain_source(), "<chain>")
    return p, p.realize(SIZE, img=IMG)


def _spy_forks(monkeypatch):
    forks = []
    real = os.fork

    def fork():
        pid = real()
        if pid:
            forks.append(pid)
        return pid
    monkeypatch.setattr(os, "fork", fork)
    return forks


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_parts_give_the_evaluators_values(program, cache, monkeypatch, jobs):
    p, expected = program
    monkeypatch.setenv("HDSL_COMPILE_JOBS", str(jobs))
    forks = _spy_forks(monkeypatch)
    c = p.compile("host", schedule="s", use_cache=False)
    fn = c.native.primary.fn
    assert fn.n_objects == jobs
    assert len(forks) == jobs - 1          # this process compiles one part, children the others
    assert np.array_equal(c.realize(SIZE, img=IMG), expected)


def test_each_function_is_defined_in_exactly_one_part(program):
    from llvmlite import binding as llvm
    p, _ = program
    module = p.compile("host", schedule="s", use_cache=False).native.primary.module
    defined = {f.name for f in module.functions if f.blocks}
    assert len(defined) == N_STAGES            # the entry and one task per stage
    whole = str(module)
    parts = split_module(module, 3)
    assert len(parts) == 3
    assert str(module) == whole                # the module is left as it was
    seen = []
    for text in parts:
        m = llvm.parse_assembly(text)
        m.verify()
        mine = {f.name for f in m.functions if not f.is_declaration}
        declared = {f.name for f in m.functions if f.is_declaration}
        assert mine and defined - mine <= declared
        seen += mine
    assert sorted(seen) == sorted(defined)
    # a small module stays whole
    small = hdsl.loads(chain_source(3), "<small>").compile("host", schedule="s", use_cache=False).native.primary
    assert split_module(small.module, 3) == [str(small.module)]
    assert small.fn.n_objects == 1


def _texts(program):
    p, _ = program
    return split_module(p.compile("host", schedule="s", use_cache=False).native.primary.module, 2)


def test_an_error_in_a_child_is_reported(program, cache):
    good = _texts(program)[0]
    tm = jit.target_machine("host", "static")
    # the longest text is compiled here, the broken one by the child
    with pytest.raises(InternalError, match=r"(?s)LLVM failed: .*expected type"):
        jit.emit_objects([good, "define i32 @broken( {"], tm, 2)


def test_a_child_killed_by_a_signal_is_reported(program, cache, monkeypatch):
    texts = _texts(program)
    parent = os.getpid()
    real = jit._emit

    def emit(ts, tm):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(ts, tm)
    monkeypatch.setattr(jit, "_emit", emit)
    with pytest.raises(InternalError, match="died of signal 9"):
        jit.emit_objects(texts, jit.target_machine("host", "static"), 2)


def test_without_fork_every_part_is_compiled_here(program, cache, monkeypatch):
    p, expected = program

    def no_fork():
        raise OSError("no processes left")
    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.setenv("HDSL_COMPILE_JOBS", "2")
    c = p.compile("host", schedule="s", use_cache=False)
    assert c.native.primary.fn.n_objects == 2
    assert np.array_equal(c.realize(SIZE, img=IMG), expected)


def test_the_cache_keeps_every_part(program, cache, monkeypatch):
    p, expected = program
    monkeypatch.setenv("HDSL_COMPILE_JOBS", "2")
    first = hdsl.loads(chain_source(), "<chain>").compile("host", schedule="s")
    assert not first.native.timings["cached"]
    again = hdsl.loads(chain_source(), "<chain>").compile("host", schedule="s")
    assert again.native.timings["cached"] and again.native.primary.fn.n_objects == 2
    assert np.array_equal(again.realize(SIZE, img=IMG), expected)
    # damaged cache files (cut short, or objects from an older hdsl) are compiled afresh: the
    # source-keyed file is lowered again, then the IR-keyed one through LLVM again
    files = sorted(cache.glob("*.o"))
    assert len(files) == 2
    for path in files:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    cut = hdsl.loads(chain_source(), "<chain>").compile("host", schedule="s")
    assert cut.native.timings["lower"] > 0 and not cut.native.timings["cached"]
    assert np.array_equal(cut.realize(SIZE, img=IMG), expected)


def test_packed_objects_round_trip():
    objs = [b"\x7fELF one", b"", b"two" * 100]
    data = jit.pack_objects(objs)
    assert jit.unpack_objects(data) == objs
    assert jit.unpack_objects(data[:-1]) is None
    assert jit.unpack_objects(data + b"x") is None
    assert jit.unpack_objects(b"\x7fELF\x02\x01\x01" + bytes(100)) is None


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_job_count_is_a_user_error(program, monkeypatch, value):
    p, _ = program
    monkeypatch.setenv("HDSL_COMPILE_JOBS", value)
    with pytest.raises(HdslError, match="HDSL_COMPILE_JOBS must be a positive whole number"):
        p.compile("host", schedule="s", use_cache=False)


def test_ahead_of_time_parts_are_linked_and_kept_local(program, tmp_path, monkeypatch):
    from hdsl.aot import compile_to_files
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to test ahead-of-time compilation")
    p, expected = program
    monkeypatch.setenv("HDSL_COMPILE_JOBS", "3")
    counts = []
    real = jit.emit_objects

    def spy(texts, tm, jobs=1):
        counts.append(len(texts))
        return real(texts, tm, jobs)
    monkeypatch.setattr(jit, "emit_objects", spy)
    files = compile_to_files(p.ir, tmp_path, schedule="s", emit=("o", "so"))
    assert counts == [3]
    nm = subprocess.run(["nm", str(files["o"])], capture_output=True, text=True, check=True).stdout
    tasks = [line.split() for line in nm.splitlines() if re.search(r"\.par\d+$", line)]
    assert len(tasks) == N_STAGES - 1 and all(kind == "t" for _, kind, _ in tasks)   # defined, local
    lib = ctypes.CDLL(str(files["so"]))
    lib.chain.argtypes = [ctypes.POINTER(jit.BufferStruct), ctypes.POINTER(jit.BufferStruct)]
    out = np.zeros((SIZE[1], SIZE[0]), np.int32)
    bin_, bout = jit.make_buffer(IMG.T), jit.make_buffer(out.T)
    assert lib.chain(ctypes.byref(bin_), ctypes.byref(bout)) == 0
    assert np.array_equal(out, expected)


def test_an_application_that_ignores_sigchld(program, cache, monkeypatch):
    """With SIGCHLD ignored the kernel reaps the children itself (waitpid finds none)."""
    p, expected = program
    monkeypatch.setenv("HDSL_COMPILE_JOBS", "2")
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        c = p.compile("host", schedule="s", use_cache=False)
    finally:
        signal.signal(signal.SIGCHLD, old)
    assert c.native.primary.fn.n_objects == 2
    assert np.array_equal(c.realize(SIZE, img=IMG), expected)
