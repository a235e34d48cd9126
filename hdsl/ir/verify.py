"""A checker for lowered loop nests, run between passes in tests and with --debug.

It asserts what codegen relies on: every variable is bound (by an enclosing
For or LetStmt, or as a buffer's or param's symbol), both operands of a
binary operator have one type, conditions are bool, a vectorized or unrolled
loop has a constant extent, and stores and loads name a buffer in scope.
"""
from __future__ import annotations

from hdsl.diagnostics import InternalError
from hdsl.ir.expr import BinOp, Const, Expr, FuncCall, InputCall, Param, Select, Var, walk
from hdsl.ir.func import Pipeline
from hdsl.ir.stmt import (GPU_KINDS, MEMORY_KINDS, Allocate, Assert, Block, DeviceSync, Evaluate, For, GpuBarrier, IfThenElse,
                          LaunchKernel, LetStmt, Load, Provide, Realize, Stmt, Store)

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", *GPU_KINDS)


def entry_symbols(p: Pipeline) -> set[str]:
    names = {prm.name for prm in p.params}
    for name, dims in [(b.name, b.dims) for b in p.inputs] + [(f.name, f.dims) for f in p.outputs]:
        names.add(name)
        for d in range(dims):
            names |= {f"{name}.min.{d}", f"{name}.extent.{d}", f"{name}.stride.{d}"}
    return names


def verify(stmt: Stmt, p: Pipeline, flat: bool) -> None:
    _Verifier(flat).stmt(stmt, frozenset(entry_symbols(p)))


class _Verifier:
    def __init__(self, flat: bool):
        self.flat = flat

    def fail(self, msg: str):
        raise InternalError(f"IR verifier: {msg}")

    def expr(self, e: Expr, scope):
        for n in walk(e):
            if isinstance(n, Var) and n.name not in scope:
                self.fail(f"unbound variable {n.name}")
            if isinstance(n, Param) and n.name not in scope:
                self.fail(f"unknown param {n.name}")
            if isinstance(n, BinOp) and n.a.type != n.b.type and n.op not in ("<<", ">>"):
                self.fail(f"operands of {n.op} have types {n.a.type} and {n.b.type}")
            if isinstance(n, Select) and (not n.cond.type.is_bool() or n.t.type != n.f.type):
                self.fail("ill-typed select")
            if isinstance(n, Load) and n.buffer not in scope:
                self.fail(f"load from unknown buffer {n.buffer}")
            if self.flat and isinstance(n, (FuncCall, InputCall)):
                self.fail("a call survived flattening")

    def stmt(self, s: Stmt, scope):
        if isinstance(s, Block):
            for x in s.stmts:
                self.stmt(x, scope)
        elif isinstance(s, LetStmt):
            self.expr(s.value, scope)
            self.stmt(s.body, scope | {s.name})
        elif isinstance(s, For):
            self.expr(s.min, scope)
            self.expr(s.extent, scope)
            if s.kind not in FOR_KINDS:
                self.fail(f"loop {s.var} of unknown kind {s.kind}")
            if s.kind in ("vectorized", "unrolled") and not isinstance(s.extent, Const):
                self.fail(f"{s.kind} loop {s.var} has a non-constant extent")
            self.stmt(s.body, scope | {s.var})
        elif isinstance(s, IfThenElse):
            self.expr(s.cond, scope)
            if not s.cond.type.is_bool():
                self.fail("if condition is not bool")
            self.stmt(s.then, scope)
            if s.otherwise is not None:
                self.stmt(s.otherwise, scope)
        elif isinstance(s, Realize):
            for lo, ext in s.bounds:
                self.expr(lo, scope)
                self.expr(ext, scope)
            self.stmt(s.body, scope)
        elif isinstance(s, Provide):
            for e in list(s.args) + list(s.values):
                self.expr(e, scope)
        elif isinstance(s, Allocate):
            self.expr(s.size, scope)
            if s.memory not in MEMORY_KINDS:
                self.fail(f"allocation {s.name} in unknown memory {s.memory}")
            self.stmt(s.body, scope | {s.name})
        elif isinstance(s, LaunchKernel):
            self.kernel(s, scope)
        elif isinstance(s, Store):
            if s.buffer not in scope:
                self.fail(f"store to unknown buffer {s.buffer}")
            self.expr(s.index, scope)
            self.expr(s.value, scope)
        elif isinstance(s, Assert):
            self.expr(s.cond, scope)
        elif isinstance(s, Evaluate):
            self.expr(s.value, scope)
        elif isinstance(s, GpuBarrier):
            pass
        elif isinstance(s, DeviceSync):
            if s.buffer not in scope or s.op not in ("to_host", "host_written"):
                self.fail(f"device_sync {s.buffer} {s.op}")

    def kernel(self, s: LaunchKernel, scope):
        """A launch: its grid in host scope; the kernel's body sees its args only, its
        threads and shared bytes its scalar args only; its outer loops are GPU block loops."""
        k = s.kernel
        for g in s.grid:
            self.expr(g, scope)
        missing = [a.name for a in k.args if a.name not in scope]
        if missing:
            self.fail(f"kernel {k.name} takes {', '.join(missing)}, unknown where it is launched")
        scalars = frozenset(a.name for a in k.args if a.kind == "scalar")
        for t in (*k.threads, k.shared_bytes):
            self.expr(t, scalars)
        if not (isinstance(k.body, For) and k.body.kind == "gpu_block"):
            self.fail(f"kernel {k.name}'s body is not a GPU block loop")
        self.stmt(k.body, frozenset(a.name for a in k.args))
