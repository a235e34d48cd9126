"""Symbolic interval arithmetic over loop nests (bounds inference's engine).

`expr_bounds(e, scope)` returns (lo, hi) Exprs — or None for an unbounded
side — such that lo <= e <= hi whenever every var in `scope` lies in its
interval; vars not in `scope` are treated as single points. `box_of(stmt,
target)` is the box of `target` (a Func or an input buffer) read or written
anywhere in `stmt`, in terms of the vars defined outside `stmt`.
"""
from __future__ import annotations

from hdsl.ir.expr import (BinOp, BufferProp, Cast, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar,
                          Select, Unary, Var, walk)
from hdsl.ir.simplify import const_value, simplify
from hdsl.ir.stmt import Block, Evaluate, For, IfThenElse, LetStmt, Provide, Realize, Stmt
from hdsl.ir.types import I32

Bound = Expr | None


def _i(op, a, b):
    return simplify(BinOp(op, a, b, I32))


def _min(a: Bound, b: Bound) -> Bound:
    if a is None or b is None:
        return None
    return _i("min", a, b)


def _max(a: Bound, b: Bound) -> Bound:
    if a is None or b is None:
        return None
    return _i("max", a, b)


def expr_bounds(e: Expr, scope: dict) -> tuple[Bound, Bound]:
    t = e.type
    if isinstance(e, Const):
        if t.is_float() or t.is_bool():
            return (e, e) if not t.is_bool() else (Const(I32, int(e.value)), Const(I32, int(e.value)))
        return (Const(I32, int(e.value)), Const(I32, int(e.value))) if t.bits <= 32 else (None, None)
    if isinstance(e, (Var, RVar)):
        name = e.name if isinstance(e, Var) else e.name
        if isinstance(e, RVar):
            key = ("rvar", id(e.rdom), e.index)
            if key in scope:
                return scope[key]
            return (None, None)
        if name in scope:
            return scope[name]
        return (e, e)
    if isinstance(e, (Param, BufferProp)):
        if t == I32 or isinstance(e, BufferProp):
            return (e, e)
        if t.is_int() or t.is_uint():
            return (Cast(I32, e), Cast(I32, e)) if t.bits < 32 or (t.is_int() and t.bits == 32) else (None, None)
        return (e, e)
    if isinstance(e, Cast):
        lo, hi = expr_bounds(e.value, scope)
        src = e.value.type
        if t.is_float() or t.is_bool():
            return (None, None)
        if src.is_integral() and not src.is_bool() and _fits(src, t):
            return (lo, hi)
        return _type_bounds(t)
    if isinstance(e, Unary):
        if e.op == "-" and t == I32:
            lo, hi = expr_bounds(e.a, scope)
            return (None if hi is None else _i("-", Const(I32, 0), hi), None if lo is None else _i("-", Const(I32, 0), lo))
        return _type_bounds(t)
    if isinstance(e, Select):
        a = expr_bounds(e.t, scope)
        b = expr_bounds(e.f, scope)
        return (_min(a[0], b[0]), _max(a[1], b[1]))
    if isinstance(e, BinOp):
        return _binop(e, scope)
    if isinstance(e, Intrinsic) and e.name == "print":
        return expr_bounds(e.args[0], scope)
    return _type_bounds(t)


def _as_i32(e: Expr) -> Expr:
    if isinstance(e, Const):
        return Const(I32, int(e.value))
    return Cast(I32, e)


def _fits(src, t) -> bool:
    if t.is_int():
        return (src.is_int() and src.bits <= t.bits) or (src.is_uint() and src.bits < t.bits)
    return src.is_uint() and src.bits <= t.bits


def _type_bounds(t) -> tuple[Bound, Bound]:
    if (t.is_int() or t.is_uint()) and t.bits <= 16:
        return (Const(I32, int(t.min_value())), Const(I32, int(t.max_value())))
    return (None, None)


def _binop(e: BinOp, scope):
    op = e.op
    if e.type != I32:
        if e.type.is_bool():
            return (Const(I32, 0), Const(I32, 1))
        t = e.type
        if (t.is_int() or t.is_uint()) and t.bits <= 16 and op in ("+", "-", "*", "/", "%", "min", "max"):
            # narrow integers: the i32 rules, kept when the result provably stays in range
            lo, hi = _binop(BinOp(op, _as_i32(e.a), _as_i32(e.b), I32), scope)
            tlo, thi = _type_bounds(t)
            if const_value(lo) is not None and const_value(hi) is not None \
                    and const_value(lo) >= const_value(tlo) and const_value(hi) <= const_value(thi):
                return (lo, hi)
        return _type_bounds(t)
    a = expr_bounds(e.a, scope)
    b = expr_bounds(e.b, scope)
    if op == "+":
        return (None if a[0] is None or b[0] is None else _i("+", a[0], b[0]),
                None if a[1] is None or b[1] is None else _i("+", a[1], b[1]))
    if op == "-":
        return (None if a[0] is None or b[1] is None else _i("-", a[0], b[1]),
                None if a[1] is None or b[0] is None else _i("-", a[1], b[0]))
    if op == "min":
        lo = _min(a[0], b[0])
        hi = a[1] if b[1] is None else b[1] if a[1] is None else _i("min", a[1], b[1])
        return (lo, hi)
    if op == "max":
        hi = _max(a[1], b[1])
        lo = a[0] if b[0] is None else b[0] if a[0] is None else _i("max", a[0], b[0])
        return (lo, hi)
    kb = const_value(b[0]) if b[0] is not None and b[0] is b[1] or (
        b[0] is not None and b[1] is not None and const_value(b[0]) is not None
        and const_value(b[0]) == const_value(b[1])) else None
    if op == "*":
        if kb is not None:
            if kb >= 0:
                return (None if a[0] is None else _i("*", a[0], Const(I32, kb)),
                        None if a[1] is None else _i("*", a[1], Const(I32, kb)))
            return (None if a[1] is None else _i("*", a[1], Const(I32, kb)),
                    None if a[0] is None else _i("*", a[0], Const(I32, kb)))
        ka = const_value(a[0]) if a[0] is not None and a[1] is not None and const_value(a[0]) is not None \
            and const_value(a[0]) == const_value(a[1]) else None
        if ka is not None:
            return _binop(BinOp("*", e.b, e.a, I32), scope)
        if a[0] is not None and a[1] is not None and b[0] is not None and b[1] is not None:
            c = [_i("*", x, y) for x in a for y in b]
            lo, hi = c[0], c[0]
            for v in c[1:]:
                lo, hi = _i("min", lo, v), _i("max", hi, v)
            return (lo, hi)
        return (None, None)
    if op == "/":
        if kb is not None and kb > 0:
            return (None if a[0] is None else _i("/", a[0], Const(I32, kb)),
                    None if a[1] is None else _i("/", a[1], Const(I32, kb)))
        if kb is not None and kb < 0:
            return (None if a[1] is None else _i("/", a[1], Const(I32, kb)),
                    None if a[0] is None else _i("/", a[0], Const(I32, kb)))
        return (None, None)
    if op == "%":
        if kb is not None and kb != 0:
            return (Const(I32, 0), Const(I32, abs(kb) - 1))
        if b[1] is not None and b[0] is not None:
            return (Const(I32, 0), _i("max", _i("-", _i("max", b[1], _i("-", Const(I32, 0), b[0])), Const(I32, 1)),
                                      Const(I32, 0)))
        return (None, None)
    return (None, None)


class _Box:
    def __init__(self, dims):
        self.lo: list[Bound] = [None] * dims
        self.hi: list[Bound] = [None] * dims
        self.empty = True
        self.unbounded: set[int] = set()

    def add(self, bounds):
        for d, (lo, hi) in enumerate(bounds):
            if lo is None:
                self.unbounded.add(d)
            if hi is None:
                self.unbounded.add(d)
            if self.empty:
                self.lo[d], self.hi[d] = lo, hi
            else:
                self.lo[d] = _min(self.lo[d], lo)
                self.hi[d] = _max(self.hi[d], hi)
        self.empty = False


def box_of(stmt: Stmt, target, dims: int, scope: dict | None = None, reads=True, writes=True):
    """The (lo, hi) per dim of `target` touched in stmt; None if not touched."""
    box = _Box(dims)
    _walk_stmt(stmt, target, dict(scope or {}), box, reads, writes)
    if box.empty:
        return None
    return list(zip(box.lo, box.hi))


def _expr_calls(e: Expr, target, scope, box):
    for n in walk(e):
        if (isinstance(n, FuncCall) and n.func is target) or (isinstance(n, InputCall) and n.buffer is target):
            box.add([expr_bounds(a, scope) for a in n.args])


def _walk_stmt(s: Stmt, target, scope, box, reads, writes):
    if isinstance(s, For):
        lo, _ = expr_bounds(s.min, scope)
        # simplify min + extent - 1 first: loops are written [m, m + (M - m + 1)), and
        # bounding M directly is tighter than bounding m and the extent apart
        last = simplify(BinOp("-", BinOp("+", s.min, s.extent, I32), Const(I32, 1), I32))
        _, hi = expr_bounds(last, scope)
        inner = dict(scope)
        inner[s.var] = (lo, hi)
        _walk_stmt(s.body, target, inner, box, reads, writes)
    elif isinstance(s, LetStmt):
        if reads:
            _expr_calls(s.value, target, scope, box)
        inner = dict(scope)
        inner[s.name] = expr_bounds(s.value, scope)
        _walk_stmt(s.body, target, inner, box, reads, writes)
    elif isinstance(s, Block):
        for x in s.stmts:
            _walk_stmt(x, target, scope, box, reads, writes)
    elif isinstance(s, IfThenElse):
        if reads:
            _expr_calls(s.cond, target, scope, box)
        _walk_stmt(s.then, target, scope, box, reads, writes)
        if s.otherwise is not None:
            _walk_stmt(s.otherwise, target, scope, box, reads, writes)
    elif isinstance(s, Realize):
        _walk_stmt(s.body, target, scope, box, reads, writes)
    elif isinstance(s, Provide):
        if writes and s.func is target:
            box.add([expr_bounds(a, scope) for a in s.args])
        if reads:
            for e in list(s.args) + list(s.values):
                _expr_calls(e, target, scope, box)
    elif isinstance(s, Evaluate):
        if reads:
            _expr_calls(s.value, target, scope, box)
