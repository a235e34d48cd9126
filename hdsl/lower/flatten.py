"""Storage flattening: multi-dimensional Realize/Provide/calls → flat buffers.

Each Func realization becomes one Allocate per tuple value, dim 0 densest
(or in `reorder_storage` order); an access is Σ (arg_d - min_d) * stride_d
in 32-bit arithmetic, as in Halide: every buffer holds fewer than 2^31
elements (checked at run time: inputs and outputs on entry, allocations
before they are made; error ERR_BUFFER_TOO_LARGE), so an in-bounds offset and
each of its partial sums fit in i32, and vector gathers take 32-bit offsets.
Inputs and outputs are addressed through the mins and strides of the buffers
the caller passed (vars `<name>.min.<d>`, `<name>.stride.<d>`), and buffer
properties become those vars.
A folded dim d holds slice `arg_d mod n` (a constant fold), or `(arg_d - min_d) & mask`
with the run-time mask `<name>.fold.mask` = n - 1 (a RuntimeFold: n the smallest power of
two that holds every window of the sliding loop, found by a loop over its iterations before
the allocation; the storage holds min(n, extent_d) slices).
"""
from __future__ import annotations

from hdsl.ir.expr import BinOp, BufferProp, Cast, Const, Expr, FuncCall, InputCall, Var, substitute
from hdsl.ir.simplify import simplify
from hdsl.ir.stmt import (Allocate, Assert, Block, Evaluate, For, IfThenElse, LetStmt, Load, Provide, Realize,
                          RuntimeFold, Stmt, Store)
from hdsl.ir.types import I32, I64


def buffer_name(f, k: int) -> str:
    return f.name if len(f.values) == 1 else f"{f.name}.{k}"


def _index(name: str, args, folds=(), unit: int | None = 0) -> Expr:
    """The flat offset of `args`; dim `unit` has stride 1, known at compile time (the densest
    dim of an allocation, and x of every input and output: their callers must pass x with
    stride 1, as Halide requires by default), so a vector along it is a dense load."""
    total = None
    fold = dict(folds)
    for d, a in enumerate(args):
        if d in fold and isinstance(fold[d], RuntimeFold):
            # (a - min) & (n - 1): a - min mod n for a power of two n, or a - min where n is
            # at least the extent
            rel = BinOp("&", simplify(BinOp("-", a, Var(f"{name}.min.{d}", I32), I32)), Var(f"{name}.fold.mask", I32), I32)
        elif d in fold:
            # a folded dim: slice a mod factor (Euclidean, so never negative)
            rel = BinOp("%", a, Const(I32, fold[d]), I32)
        else:
            rel = simplify(BinOp("-", a, Var(f"{name}.min.{d}", I32), I32))
        term = rel if d == unit else BinOp("*", rel, Var(f"{name}.stride.{d}", I32), I32)
        total = term if total is None else BinOp("+", total, term, I32)
    # (simplified here, once: an access reached through a store's index and the same access in
    # its value would otherwise keep two spellings of one offset, and codegen, which shares a
    # load only between identical expressions, would load and convert the element twice)
    return simplify(total) if total is not None else Const(I32, 0)


class _Flattener:
    def __init__(self, storage_orders: dict[int, list[int]]):
        self.orders = storage_orders
        self.folds: dict[int, tuple] = {}
        self.unit: dict[int, int] = {}      # id(Func) -> its stride-1 storage dim (outputs: 0)
        # substitute's memo, shared by every expression of the loop nest (the stores of a
        # pyramid share most of their value DAGs: the local Laplacian's 637 expressions
        # visit 28k nodes one by one); valid while no Func's folds or stride-1 dim change
        self.memo: dict = {}

    def _visit(self, n):
        if isinstance(n, FuncCall):
            name = n.func.name
            return Load(buffer_name(n.func, n.index),
                        _index(name, n.args, self.folds.get(id(n.func), ()), self.unit.get(id(n.func), 0)), n.type)
        if isinstance(n, InputCall):
            return Load(n.buffer.name, _index(n.buffer.name, n.args), n.type)
        if isinstance(n, BufferProp):
            return Var(f"{n.buffer.name}.{n.what}.{n.dim}", I32)
        return None

    def expr(self, e: Expr) -> Expr:
        return substitute(e, self._visit, self.memo)

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, For):
            return For(s.var, self.expr(s.min), self.expr(s.extent), s.kind, self.stmt(s.body))
        if isinstance(s, LetStmt):
            return LetStmt(s.name, self.expr(s.value), self.stmt(s.body))
        if isinstance(s, Block):
            return Block(tuple(self.stmt(x) for x in s.stmts))
        if isinstance(s, IfThenElse):
            return IfThenElse(self.expr(s.cond), self.stmt(s.then),
                              self.stmt(s.otherwise) if s.otherwise is not None else None)
        if isinstance(s, Provide):
            f = s.func
            idx = _index(f.name, [self.expr(a) for a in s.args], self.folds.get(id(f), ()), self.unit.get(id(f), 0))
            values = [self.expr(v) for v in s.values]
            if len(values) == 1:
                return Store(buffer_name(f, 0), idx, values[0])
            # a tuple is written at once: every value is computed before any is stored
            names = [f"{f.name}.value.{k}" for k in range(len(values))]
            body: Stmt = Block(tuple(Store(buffer_name(f, k), idx, Var(n, v.type))
                                     for k, (n, v) in enumerate(zip(names, values))))
            for n, v in reversed(list(zip(names, values))):
                body = LetStmt(n, v, body)
            return body
        if isinstance(s, Realize):
            f = s.func
            order = self.orders.get(id(f), list(range(f.dims)))
            unit = order[0] if order else None
            if self.folds.get(id(f), ()) != s.folds or self.unit.get(id(f), 0) != unit:
                self.memo = {}         # (accesses to f flattened before are addressed otherwise)
            self.folds[id(f)] = s.folds
            self.unit[id(f)] = unit
            body = self.stmt(s.body)
            size: Expr = Const(I64, 1)
            strides = {}
            fold = dict(s.folds)
            for d in order:
                # (an i32 stride is exact whenever the size is: the allocation checks the size)
                strides[d] = Cast(I32, size)
                ext = Cast(I64, Var(f"{f.name}.extent.{d}", I32))
                if d in fold and isinstance(fold[d], RuntimeFold):
                    ext = Cast(I64, BinOp("min", BinOp("+", Var(f"{f.name}.fold.mask", I32), Const(I32, 1), I32),
                                          Var(f"{f.name}.extent.{d}", I32), I32))
                elif d in fold:
                    ext = Const(I64, fold[d])
                size = BinOp("*", size, ext, I64)
            for k in reversed(range(len(f.values))):
                body = Allocate(buffer_name(f, k), f.values[k].type, Var(f"{f.name}.size", I64), body)
            body = LetStmt(f"{f.name}.size", simplify(size), body)
            for d in reversed(range(f.dims)):
                body = LetStmt(f"{f.name}.stride.{d}", simplify(strides[d]), body)
            for d in reversed(range(f.dims)):
                lo, ext = s.bounds[d]
                body = LetStmt(f"{f.name}.min.{d}", self.expr(lo),
                               LetStmt(f"{f.name}.extent.{d}", self.expr(ext), body))
            for d, k in s.folds:
                if isinstance(k, RuntimeFold):
                    body = self.runtime_fold(f.name, k, body)
            return body
        if isinstance(s, Assert):
            return Assert(self.expr(s.cond), s.code, tuple(self.expr(i) for i in s.info))
        if isinstance(s, Evaluate):
            return Evaluate(self.expr(s.value))
        return s


    def runtime_fold(self, name: str, k: RuntimeFold, body: Stmt) -> Stmt:
        """body after `let <name>.fold.mask = n - 1`, n the smallest power of two at least every
        window k.window of k's loop (at least 1): the largest found by a loop over the sliding
        loop's iterations into a one-element buffer, then its bits below the highest smeared."""
        tmp, var = f"{name}.fold.window", f"{name}.fold.{k.var}"
        window = self.expr(substitute(k.window, lambda n: Var(var, I32) if isinstance(n, Var) and n.name == k.var
                                      else None))
        most = Load(tmp, Const(I32, 0), I32)
        # (largest - 1 with every bit below its highest set: n - 1)
        bits = [f"{name}.fold.bits.{i}" for i in range(5)] + [f"{name}.fold.mask"]
        for i in reversed(range(5)):
            body = LetStmt(bits[i + 1], BinOp("|", Var(bits[i], I32), BinOp(">>", Var(bits[i], I32),
                                                                           Const(I32, 1 << i), I32), I32), body)
        body = LetStmt(bits[0], BinOp("-", most, Const(I32, 1), I32), body)
        return Allocate(tmp, I32, Const(I64, 1), Block((
            Store(tmp, Const(I32, 0), Const(I32, 1)),
            For(var, self.expr(k.min), self.expr(k.extent), "serial",
                Store(tmp, Const(I32, 0), BinOp("max", most, window, I32))),
            body)))


def flatten(stmt: Stmt, storage_orders: dict[int, list[int]]) -> Stmt:
    return _Flattener(storage_orders).stmt(stmt)
