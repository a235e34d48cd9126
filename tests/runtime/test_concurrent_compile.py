"""Compiling from several threads at once (issue 14, item 6): every compilation gives the code it
gives alone. Lowering hash-conses expressions in tables that a compilation clears when it starts
and ends; with one table for the whole process, a compilation on another thread pulled canonical
nodes from under a lowering ("codegen: unbound variable out.s0.y.min", or code built from two
nodes that should have been one). Python switches threads every 5 ms by default; the tests switch
every 10 us so that compilations interleave finely (before the fix, the first test failed on
2 to 10 of its 24 lowerings in every run)."""
from __future__ import annotations

import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.codegen.cpu import generate
from hdsl.lower.lower import lower
from hdsl.runtime.images import load_image

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
IMAGES = EXAMPLES / "images"
THREADS = 8


@pytest.fixture
def fine_thread_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def _variant(path: Path, i: int) -> str:
    """The example with its tile sizes changed: a different source (no cache can answer it),
    the same values."""
    text = path.read_text()
    return re.sub(r"tile\(x, y, xi, yi, (\d+), (\d+)\)",
                  lambda m: f"tile(x, y, xi, yi, {int(m[1]) // (1 + i % 4)}, {int(m[2]) // (1 + i // 2)})", text)


def _ir(p) -> str:
    return str(generate(p, lower(p, None, "host").stmt, "hdsl_p", False))


def test_lowering_on_many_threads_gives_the_code_it_gives_alone(fine_thread_switching):
    """Lowering and LLVM code generation of three examples on 8 threads at once, 24 times: the
    LLVM IR text is the one a lowering on its own thread gives (the oracle: the same compiler,
    run serially, whose output is deterministic)."""
    files = ["blur.hl", "unsharp.hl", "hist_equalize.hl"]
    programs = [hdsl.load(EXAMPLES / f).ir for f in files]
    alone = [_ir(p) for p in programs]
    assert alone == [_ir(p) for p in programs]          # the oracle is deterministic

    def job(i: int) -> str:
        try:
            return _ir(programs[i % len(programs)])
        except Exception as e:       # an internal error is a failure like wrong code
            return f"{type(e).__name__}: {e}"
    with ThreadPoolExecutor(THREADS) as ex:
        got = list(ex.map(job, range(24)))
    wrong = [f"{files[i % len(files)]}: {g[:120]}" for i, g in enumerate(got) if g != alone[i % len(files)]]
    assert not wrong, wrong


def test_pipelines_compiled_on_many_threads_match_the_evaluator(fine_thread_switching):
    """8 different pipelines (two examples, each with four tile sizes) compiled to native code
    on 8 threads at once (each parsed and checked on its thread too), without the cache; each
    one's output equals the reference evaluator's. (Compiles are dominated by LLVM, which runs
    one thread at a time, so lowerings overlap less here than in the test above: before the
    fix this one failed in about one run of eight; the test above fails every run.)"""
    cases = [("blur.hl", {"img": load_image(IMAGES / "gray16.png")[:40, :56]}),
             ("unsharp.hl", {"img": load_image(IMAGES / "gray8.png")[:40, :56]})]
    sources = [(f"{f}#{i}", _variant(EXAMPLES / f, i), inputs) for i in range(4) for f, inputs in cases]
    expected = {name: hdsl.loads(text, f"<{name}>")(**inputs) for name, text, inputs in sources}

    def job(case) -> str | None:
        name, text, inputs = case
        try:        # parsed, checked and compiled on the thread
            got = hdsl.loads(text, f"<{name}>").compile("host", use_cache=False)(**inputs)
        except Exception as e:
            return f"{name}: {type(e).__name__}: {e}"
        return None if np.array_equal(got, expected[name]) else f"{name}: values differ from the evaluator's"
    with ThreadPoolExecutor(THREADS) as ex:
        failures = [r for r in ex.map(job, sources) if r]
    assert not failures, failures
