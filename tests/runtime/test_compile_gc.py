"""Parsing and compilation pause Python's cyclic garbage collector (hdsl.ir.expr.no_collection): each
automatic collection would walk the millions of IR nodes lowering makes. The collector
must be back as it was afterwards, whatever happens inside."""
from __future__ import annotations

import gc

import pytest

import hdsl
import hdsl.lower.lower as lower_mod
from hdsl.ir.expr import no_collection

SRC = """
pipeline p
input  a: f32[2]
output out: f32[2]
algorithm { out(x, y) = a(x, y) * 2.0f }
"""


def test_no_collection_restores_the_previous_state():
    assert gc.isenabled()
    with no_collection():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with no_collection():
            assert not gc.isenabled()
        assert not gc.isenabled()          # (not turned on by us)
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        with no_collection():
            raise ValueError("inside")
    assert gc.isenabled()


def _collector_states(monkeypatch, module, name: str) -> list:
    """module.name wrapped to record, at each call, whether the collector is on."""
    seen = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, spy)
    return seen


@pytest.mark.parametrize("aot", [False, True])
def test_lowering_runs_without_collections(tmp_path, monkeypatch, aot):
    seen = _collector_states(monkeypatch, lower_mod, "lower")
    p = hdsl.loads(SRC)
    if aot:
        from hdsl.aot import compile_to_files
        compile_to_files(p.ir, tmp_path / "out", emit=["h"])
    else:
        p.compile("host", use_cache=False)
    assert seen and not any(seen)
    assert gc.isenabled()


def test_parsing_runs_without_collections(monkeypatch):
    import hdsl.api as api
    seen = _collector_states(monkeypatch, api, "check_source")
    hdsl.loads(SRC)
    assert seen == [False] and gc.isenabled()


def test_a_compile_leaves_little_for_the_collector():
    """What a compile drops is freed by reference counting, not left in cycles for the collector:
    its first collection after the pause walked every object still alive (0.05-0.2 s on the
    local Laplacian, in each cold compile). Before: ~186k objects in cycles after compiling the
    local Laplacian (the llvmlite module's instructions and blocks; recursive closures of
    ir/expr.py's rewriters, which kept their memos); now ~22k."""
    from pathlib import Path
    p = hdsl.load(Path(__file__).resolve().parents[2] / "examples" / "local_laplacian.hl")
    gc.collect()
    gc.disable()
    try:
        p.compile("host", use_cache=False)
        found = gc.collect()          # (the unreachable objects in cycles the compile left)
    finally:
        gc.enable()
    assert found < 50_000, found


def test_a_released_module_is_freed_without_the_collector():
    """codegen.modules.release: a loop's phi and its block are freed as soon as the module is
    dropped (without it, the phi, its block and the function keep one another alive until a
    collection)."""
    import weakref

    from llvmlite import ir

    from hdsl.codegen.modules import release

    def loop_module():
        m = ir.Module()
        i32 = ir.IntType(32)
        f = ir.Function(m, ir.FunctionType(i32, [i32]), "count")
        entry, body, done = f.append_basic_block("entry"), f.append_basic_block("body"), f.append_basic_block("done")
        b = ir.IRBuilder(entry)
        b.branch(body)
        b.position_at_end(body)
        phi = b.phi(i32)
        nxt = b.add(phi, ir.Constant(i32, 1))
        phi.add_incoming(ir.Constant(i32, 0), entry)
        phi.add_incoming(nxt, body)
        b.cbranch(b.icmp_signed("<", nxt, f.args[0]), body, done)
        b.position_at_end(done)
        b.ret(nxt)
        return m, weakref.ref(phi), weakref.ref(body)

    gc.collect()
    gc.disable()
    try:
        m, phi, block = loop_module()
        text = str(m)
        del m
        assert phi() is not None and block() is not None     # (the cycles release breaks)
        m, phi, block = loop_module()
        assert str(m) == text
        release(m)
        assert all(not f.blocks for f in m.functions)
        del m
        assert phi() is None and block() is None
    finally:
        gc.enable()
