"""Statement nodes: the loop nest that lowering builds and codegen consumes.

Semantics, one line each:
- For: run `body` for var = min .. min + extent - 1; `kind` is serial,
  parallel (iterations on the thread pool, in any order), vectorized or
  unrolled (a hint to codegen; the meaning is that of serial), gpu_block or
  gpu_thread (a GPU grid's blocks / a block's threads; the innermost block loop
  of a nest is dim x, the next outer y, then z; likewise threads).
- LetStmt: bind the i32/i64 scalar `name` to `value` inside `body`.
- Block: statements in order. IfThenElse: a guard.
- Realize: storage for Func `func` over `bounds` (min, extent per dim) in `body`;
  a folded dim keeps only `factor` slices, addressed modulo `factor`.
- Provide: write the values of `func` at `args` (before flattening).
- Allocate / Store / Load: flat buffers (after flattening), indices in elements;
  Allocate.memory is "heap" (codegen's choice of stack or heap), "stack",
  "gpu_shared" (one per GPU block) or "gpu_local" (one per GPU thread).
- GpuBarrier: every thread of a GPU block waits here (between the thread-loop nests
  of a block that share memory).
- LaunchKernel: run `kernel` (hdsl/ir/kernel.py) on `device` over `grid` blocks
  (x first); first each buffer arg is made current on the device (allocated there,
  copied in if the host's copy is newer), after it the buffers it writes are newer on
  the device (Halide's dirty bits, kept at run time in the buffer's device fields).
- DeviceSync: host code around launches (hdsl/lower/gpu.py device_copies): `op` is
  "to_host" (copy `buffer` back if the device's copy is newer: before host code uses it)
  or "host_written" (the host's copy is now the newer one).
- Assert: if `cond` is false, stop with error `code`; `info` are i64 values
  saved for the error message (which input, which dimension, what range).
- Evaluate: compute an expression for its effect (print).
"""
from __future__ import annotations

from dataclasses import dataclass

from hdsl.ir.expr import Expr
from hdsl.ir.types import Type


class Stmt:
    __slots__ = ()


# For.kind values
SERIAL, PARALLEL, VECTORIZED, UNROLLED = "serial", "parallel", "vectorized", "unrolled"
GPU_BLOCK, GPU_THREAD = "gpu_block", "gpu_thread"
GPU_KINDS = (GPU_BLOCK, GPU_THREAD)
# Allocate.memory values
MEMORY_KINDS = ("heap", "stack", "gpu_shared", "gpu_local")


@dataclass(frozen=True, slots=True, eq=False)
class For(Stmt):
    var: str
    min: Expr
    extent: Expr
    kind: str
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class LetStmt(Stmt):
    name: str
    value: Expr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class Block(Stmt):
    stmts: tuple


@dataclass(frozen=True, slots=True, eq=False)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Realize(Stmt):
    func: object
    bounds: tuple          # ((min, extent), ...)
    body: Stmt
    folds: tuple = ()      # ((dim, factor), ...): storage folded modulo factor in dim
                           # (an int, or a RuntimeFold found at run time)


@dataclass(frozen=True, slots=True, eq=False)
class RuntimeFold:
    """A fold factor of Realize.folds found at run time (loops.RUNTIME_FOLDS): the smallest
    power of two n >= window (an i32 expression of the sliding loop's var `var`) for every var
    in min .. min + extent - 1. The slice of coordinate a is (a - f.min.d) & (n - 1); the
    storage holds min(n, extent) slices along d (with n >= extent the slice is a - f.min.d)."""
    var: str
    min: object
    extent: object
    window: object


@dataclass(frozen=True, slots=True, eq=False)
class Provide(Stmt):
    func: object
    args: tuple
    values: tuple


@dataclass(frozen=True, slots=True, eq=False)
class Allocate(Stmt):
    name: str
    type: Type
    size: Expr
    body: Stmt
    memory: str = "heap"


@dataclass(frozen=True, slots=True, eq=False)
class GpuBarrier(Stmt):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class DeviceSync(Stmt):
    buffer: str
    op: str                 # "to_host" | "host_written"


@dataclass(frozen=True, slots=True, eq=False)
class LaunchKernel(Stmt):
    kernel: object          # hdsl.ir.kernel.Kernel
    device: str             # "cuda" | "opengl" | "host_emulate"
    grid: tuple             # block counts per dim, x first (host expressions)


@dataclass(frozen=True, slots=True, eq=False)
class Store(Stmt):
    buffer: str
    index: Expr
    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Assert(Stmt):
    cond: Expr
    code: int
    info: tuple = ()


@dataclass(frozen=True, slots=True, eq=False)
class Evaluate(Stmt):
    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Load(Expr):
    buffer: str
    index: Expr
    type: Type

    def children(self):
        return (self.index,)

    def with_children(self, c):
        return Load(self.buffer, c[0], self.type)

    def intern_key(self):
        return ("load", self.buffer, self.type)


@dataclass(frozen=True, slots=True, eq=False)
class Let(Expr):
    """An expression-level binding (used when inlining shares a subexpression)."""
    name: str
    value: Expr
    body: Expr
    type: Type

    def children(self):
        return (self.value, self.body)

    def with_children(self, c):
        return Let(self.name, c[0], c[1], self.type)

    def intern_key(self):
        return ("let", self.name, self.type)


def own_exprs(s: Stmt) -> list[Expr]:
    """The expressions a statement holds itself (not those of the statements inside it)."""
    if isinstance(s, For):
        return [s.min, s.extent]
    if isinstance(s, LetStmt):
        return [s.value]
    if isinstance(s, IfThenElse):
        return [s.cond]
    if isinstance(s, Provide):
        return list(s.args) + list(s.values)
    if isinstance(s, Realize):
        return [e for b in s.bounds for e in b]
    if isinstance(s, Store):
        return [s.index, s.value]
    if isinstance(s, Allocate):
        return [s.size]
    if isinstance(s, Assert):
        return [s.cond, *s.info]
    if isinstance(s, Evaluate):
        return [s.value]
    if isinstance(s, LaunchKernel):
        return list(s.grid) + list(s.kernel.threads) + [s.kernel.shared_bytes]
    return []


def children(s: Stmt) -> list[Stmt]:
    """The statements directly inside s."""
    if isinstance(s, Block):
        return list(s.stmts)
    if isinstance(s, (LetStmt, Realize, For, Allocate)):
        return [s.body]
    if isinstance(s, IfThenElse):
        return [s.then] + ([s.otherwise] if s.otherwise is not None else [])
    return []


def with_children(s: Stmt, kids: list[Stmt]) -> Stmt:
    """s with the statements directly inside it (as `children` lists them) replaced."""
    if isinstance(s, Block):
        return Block(tuple(kids))
    if isinstance(s, For):
        return For(s.var, s.min, s.extent, s.kind, kids[0])
    if isinstance(s, LetStmt):
        return LetStmt(s.name, s.value, kids[0])
    if isinstance(s, Allocate):
        return Allocate(s.name, s.type, s.size, kids[0], s.memory)
    if isinstance(s, Realize):
        return Realize(s.func, s.bounds, kids[0], s.folds)
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, kids[0], kids[1] if len(kids) > 1 else None)
    return s


def map_exprs(s: Stmt, fn) -> Stmt:
    """s with fn applied to every expression in it (fn sees each expression of each statement;
    share a memo inside fn for DAGs). An `if` whose condition becomes a constant is folded."""
    if isinstance(s, For):
        return For(s.var, fn(s.min), fn(s.extent), s.kind, map_exprs(s.body, fn))
    if isinstance(s, LetStmt):
        return LetStmt(s.name, fn(s.value), map_exprs(s.body, fn))
    if isinstance(s, Block):
        return Block(tuple(map_exprs(x, fn) for x in s.stmts))
    if isinstance(s, IfThenElse):
        from hdsl.ir.expr import Const
        cond = fn(s.cond)
        then = map_exprs(s.then, fn)
        other = map_exprs(s.otherwise, fn) if s.otherwise is not None else None
        if isinstance(cond, Const):
            return then if cond.value else (other if other is not None else Block(()))
        return IfThenElse(cond, then, other)
    if isinstance(s, Store):
        return Store(s.buffer, fn(s.index), fn(s.value))
    if isinstance(s, Allocate):
        return Allocate(s.name, s.type, fn(s.size), map_exprs(s.body, fn), s.memory)
    if isinstance(s, Assert):
        return Assert(fn(s.cond), s.code, tuple(fn(i) for i in s.info))
    if isinstance(s, Evaluate):
        return Evaluate(fn(s.value))
    if isinstance(s, LaunchKernel):
        # (a kernel's args keep their host names: the same fn applies inside it)
        k = s.kernel.with_body(map_exprs(s.kernel.body, fn), tuple(fn(t) for t in s.kernel.threads),
                               fn(s.kernel.shared_bytes))
        return LaunchKernel(k, s.device, tuple(fn(g) for g in s.grid))
    return s


def block(*stmts) -> Stmt:
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Block):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return Block(tuple(flat))
