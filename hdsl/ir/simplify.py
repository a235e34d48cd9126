"""A small simplifier for the index arithmetic lowering produces.

It folds constants (with the evaluator's semantics, so folding never changes
a value), removes identities (x + 0, x * 1, min(x, x)), merges constant
offsets ((x + 2) + 3 → x + 5) and decides min/max of expressions that differ
by a constant. Integer index arithmetic (i32) is assumed not to overflow, as
in Halide; float expressions are only constant-folded.
"""
from __future__ import annotations

import numpy as np

from hdsl.ir.expr import (BinOp, Cast, Const, Expr, Select, Var, intern, is_canonical, rebuild,
                          simplified_cache)
from hdsl.ir.types import I32


def const_value(e: Expr):
    if isinstance(e, Const) and not e.type.is_float():
        return int(e.value)
    return None


def _offset(e: Expr):
    """e as (base, constant) with e == base + constant; base None for a constant."""
    c = const_value(e)
    if c is not None:
        return None, c
    if isinstance(e, BinOp) and e.type == I32 and e.op in ("+", "-"):
        k = const_value(e.b)
        if k is not None:
            base, c = _offset(e.a)
            return base, c + (k if e.op == "+" else -k)
    return e, 0


def _same(a: Expr, b: Expr) -> bool:
    if a is b:
        return True
    if type(a) is not type(b) or a.type != b.type:
        return False
    if isinstance(a, Var):
        return a.name == b.name
    if isinstance(a, Const):
        return a.value == b.value
    if isinstance(a, BinOp):
        return a.op == b.op and _same(a.a, b.a) and _same(a.b, b.b)
    if isinstance(a, Cast):
        return a.saturate == b.saturate and _same(a.value, b.value)
    return False


def _plus(base: Expr | None, c: int) -> Expr:
    c = _wrap32(c)
    if base is None:
        return Const(I32, c)
    if c == 0:
        return base
    if c > 0 or c == -(1 << 31):
        return BinOp("+", base, Const(I32, _wrap32(c)), I32)
    return BinOp("-", base, Const(I32, -c), I32)


def _wrap32(c: int) -> int:
    """i32 arithmetic wraps (the evaluator's and the generated code's semantics): a folded
    constant outside i32 is brought back into range the same way."""
    return ((int(c) + (1 << 31)) % (1 << 32)) - (1 << 31)


def simplify(e: Expr, memo: dict | None = None) -> Expr:
    """The simplified, interned form of `e` (shared subexpressions simplified once)."""
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    cache = simplified_cache() if is_canonical(e) else None
    if cache is not None:
        done = cache.get(id(e))
        if done is not None:
            return done
    out = intern(_simplify_node(e, memo))
    memo[id(e)] = (e, out)
    if cache is not None:
        cache[id(e)] = out
    return out


def _simplify_node(e: Expr, memo: dict) -> Expr:
    kids = [simplify(c, memo) for c in e.children()]
    if kids:
        e = rebuild(e, kids)
    if isinstance(e, BinOp):
        return _binop(e)
    if isinstance(e, Select):
        c = e.cond
        if isinstance(c, Const):
            return e.t if c.value else e.f
        if _same(e.t, e.f):
            return e.t
    if isinstance(e, Cast) and isinstance(e.value, Const) and not e.saturate:
        from hdsl.interp.scalar import cast_values
        v = cast_values(e.type, np.asarray(e.value.value, dtype=e.value.type.dtype), e.value.type)
        return Const(e.type, v.item())
    if isinstance(e, Cast) and e.value.type == e.type:
        return e.value
    return e


def _key(e: Expr):
    """Like terms are the same (interned) object."""
    return id(intern(e))


def _linear(e: Expr, scale: int, terms: dict, order: list) -> int:
    """Add scale * e into terms {key: [expr, coeff]}; return the constant part."""
    if isinstance(e, BinOp) and e.type == I32:
        if e.op == "+":
            return _linear(e.a, scale, terms, order) + _linear(e.b, scale, terms, order)
        if e.op == "-":
            return _linear(e.a, scale, terms, order) + _linear(e.b, -scale, terms, order)
        if e.op == "*":
            kb, ka = const_value(e.b), const_value(e.a)
            if kb is not None:
                return _linear(e.a, scale * kb, terms, order)
            if ka is not None:
                return _linear(e.b, scale * ka, terms, order)
    c = const_value(e)
    if c is not None and e.type == I32:
        return scale * c
    k = _key(e)
    if k not in terms:
        terms[k] = [e, 0]
        order.append(k)
    terms[k][1] += scale
    return 0


def _rebuild_linear(terms: dict, order: list, const: int) -> Expr:
    const = _wrap32(const)
    pos, neg = [], []
    for k in order:
        e, c = terms[k]
        if c == 0:
            continue
        mag = abs(c)
        term = e if mag == 1 else BinOp("*", e, Const(I32, mag), I32)
        (pos if c > 0 else neg).append(term)
    if not pos and not neg:
        return Const(I32, _wrap32(const))
    out = pos[0] if pos else Const(I32, 0)
    for t in pos[1:]:
        out = BinOp("+", out, t, I32)
    for t in neg:
        out = BinOp("-", out, t, I32)
    if const > 0 or const == -(1 << 31):
        out = BinOp("+", out, Const(I32, const), I32)
    elif const < 0:
        out = BinOp("-", out, Const(I32, -const), I32)
    return out


def _binop(e: BinOp) -> Expr:
    a, b, op, t = e.a, e.b, e.op, e.type
    if t == I32 and op in ("+", "-"):
        terms: dict = {}
        order: list = []
        const = _linear(e, 1, terms, order)
        return _rebuild_linear(terms, order, const)
    if isinstance(a, Const) and isinstance(b, Const):
        from hdsl.interp.scalar import binop_values
        v = binop_values(op, np.asarray(a.value, dtype=a.type.dtype), np.asarray(b.value, dtype=b.type.dtype), a.type)
        return Const(t, np.asarray(v).item())
    if t != I32 and not (t.is_bool() and a.type == I32):
        return e
    if op in ("+", "-"):
        ba, ca = _offset(a)
        bb, cb = _offset(b)
        if op == "+":
            if bb is None:
                return _plus(ba, ca + cb)
            if ba is None:
                return _plus(bb, ca + cb)
        else:
            if bb is None:
                return _plus(ba, ca - cb)
            if ba is not None and _same(ba, bb):
                return Const(I32, _wrap32(ca - cb))
        if op == "+" and (ca or cb):
            return _plus(BinOp("+", ba, bb, I32), ca + cb)
        if op == "-" and (ca or cb) and ba is not None:
            return _plus(BinOp("-", ba, bb, I32), ca - cb)
        return e
    if op == "*":
        ka, kb = const_value(a), const_value(b)
        if kb == 1:
            return a
        if ka == 1:
            return b
        if kb == 0 or ka == 0:
            return Const(I32, 0)
        return e
    if op == "/":
        if const_value(b) == 1:
            return a
        return e
    if op in ("min", "max"):
        if _same(a, b):
            return a
        other = "max" if op == "min" else "min"
        for x, y in ((a, b), (b, a)):
            # absorption: min(x, max(x, y)) = max(x, min(x, y)) = x (the lower bound of a
            # shifted-inwards split's start, max(min(0, e - n), 0), is 0)
            if isinstance(y, BinOp) and y.op == other and (_same(y.a, x) or _same(y.b, x)):
                return x
        ba, ca = _offset(a)
        bb, cb = _offset(b)
        if (ba is None and bb is None) or (ba is not None and bb is not None and _same(ba, bb)):
            pick = (ca <= cb) if op == "min" else (ca >= cb)
            return a if pick else b
        return e
    if op in ("<", "<=", ">", ">=", "==", "!="):
        ba, ca = _offset(a)
        bb, cb = _offset(b)
        if (ba is None and bb is None) or (ba is not None and bb is not None and _same(ba, bb)):
            from hdsl.ir.types import BOOL
            r = {"<": ca < cb, "<=": ca <= cb, ">": ca > cb, ">=": ca >= cb, "==": ca == cb, "!=": ca != cb}[op]
            return Const(BOOL, r)
    return e
