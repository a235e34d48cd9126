"""Interval analysis: the range of values an expression can take.

`interval(e, env)` gives (lo, hi) with ±inf for unbounded, given the ranges
of the vars, reduction vars and run-time scalars in `env`. It is what bounds
inference is made of: the region of a producer that a consumer needs is the
interval of each call argument over the consumer's region. Results are
conservative: the true range always lies inside.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hdsl.ir.expr import (BinOp, BufferProp, Cast, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar,
                          Select, Unary, Var)
from hdsl.ir.types import Type

INF = math.inf
Interval = tuple[float, float]


@dataclass
class BoundsEnv:
    vars: dict[str, Interval] = field(default_factory=dict)
    rvars: dict[tuple[int, int], Interval] = field(default_factory=dict)
    scalar: Callable[[Expr], object] | None = None       # value of a Param / BufferProp, if known


def type_range(t: Type) -> Interval:
    if t.is_float():
        return (-INF, INF)
    return (int(t.min_value()), int(t.max_value()))


def _fit(t: Type, lo, hi) -> Interval:
    """Integer results outside the type's range may have wrapped: widen to the type's range."""
    if t.is_float():
        return (lo, hi)
    tlo, thi = type_range(t)
    if lo < tlo or hi > thi:
        return (tlo, thi)
    return (lo, hi)


def _mul(a, b):
    if a == 0 or b == 0:
        return 0
    return a * b


def _floordiv(a, b):
    if math.isinf(a) or math.isinf(b):
        q = a / b
        return q if not math.isnan(q) else 0
    return a // b


def interval(e: Expr, env: BoundsEnv, cache: dict | None = None) -> Interval:
    if cache is None:
        cache = {}
    key = id(e)
    if key in cache:
        return cache[key]
    r = _interval(e, env, cache)
    cache[key] = r
    return r


def _interval(e: Expr, env: BoundsEnv, cache) -> Interval:
    t = e.type
    if isinstance(e, Const):
        v = e.value
        v = int(v) if not t.is_float() else float(v)
        return (v, v)
    if isinstance(e, Var):
        return env.vars.get(e.name, (-INF, INF))
    if isinstance(e, RVar):
        return env.rvars.get((id(e.rdom), e.index), (-INF, INF))
    if isinstance(e, (Param, BufferProp)):
        if env.scalar is not None:
            v = env.scalar(e)
            if v is not None:
                v = float(v) if t.is_float() else int(v)
                return (v, v)
        return type_range(t)
    if isinstance(e, Cast):
        lo, hi = interval(e.value, env, cache)
        src = e.value.type
        if t.is_float():
            return _to_float_outward(t, lo, hi)
        if t.is_bool():
            return (0, 1)
        if src.is_float():
            if math.isinf(lo) or math.isinf(hi) or math.isnan(lo) or math.isnan(hi):
                return type_range(t)
            lo, hi = math.trunc(lo), math.trunc(hi)
        tlo, thi = type_range(t)
        if e.saturate:
            return (max(tlo, min(thi, lo)), max(tlo, min(thi, hi)))
        return _fit(t, lo, hi)
    if isinstance(e, Unary):
        if e.op == "!":
            return (0, 1)
        lo, hi = interval(e.a, env, cache)
        if e.op == "-":
            return _fit(t, -hi, -lo)
        if e.op == "~" and not t.is_float():
            if t.is_uint():
                m = type_range(t)[1]
                return _fit(t, m - hi, m - lo)
            return _fit(t, -hi - 1, -lo - 1)
        return type_range(t)
    if isinstance(e, Select):
        a = interval(e.t, env, cache)
        b = interval(e.f, env, cache)
        return (min(a[0], b[0]), max(a[1], b[1]))
    if isinstance(e, BinOp):
        return _binop(e, env, cache)
    if isinstance(e, Intrinsic):
        if e.name in ("abs", "absd"):
            if e.name == "abs":
                lo, hi = interval(e.args[0], env, cache)
                m = max(abs(lo), abs(hi))
                low = 0 if lo <= 0 <= hi else min(abs(lo), abs(hi))
                return _fit(t, low, m)
            a = interval(e.args[0], env, cache)
            b = interval(e.args[1], env, cache)
            return _fit(t, 0, max(abs(a[1] - b[0]), abs(b[1] - a[0])))
        if e.name in ("floor", "ceil", "round", "trunc"):
            lo, hi = interval(e.args[0], env, cache)
            f = {"floor": math.floor, "ceil": math.ceil, "round": round, "trunc": math.trunc}[e.name]
            if math.isinf(lo) or math.isinf(hi) or math.isnan(lo) or math.isnan(hi):
                return (lo, hi)
            return (float(f(lo)), float(f(hi)))
        if e.name == "print":
            return interval(e.args[0], env, cache)
        if e.name in ("is_nan", "is_inf", "is_finite"):
            return (0, 1)
        if e.name == "lerp":
            a = interval(e.args[0], env, cache)
            b = interval(e.args[1], env, cache)
            return (min(a[0], b[0]), max(a[1], b[1]))
        return type_range(t)
    if isinstance(e, (FuncCall, InputCall)):
        return type_range(t)
    return type_range(t)


def _binop(e: BinOp, env, cache) -> Interval:
    t, op = e.type, e.op
    if t.is_bool():
        return (0, 1)
    a = interval(e.a, env, cache)
    b = interval(e.b, env, cache)
    if t.is_float():
        r = _float_binop(op, a, b)
        return (float(np.asarray(r[0], dtype=t.dtype)), float(np.asarray(r[1], dtype=t.dtype))) \
            if not any(map(math.isnan, r)) else (-INF, INF)
    if op == "+":
        return _fit(t, a[0] + b[0], a[1] + b[1])
    if op == "-":
        return _fit(t, a[0] - b[1], a[1] - b[0])
    if op == "*":
        c = [_mul(x, y) for x in a for y in b]
        return _fit(t, min(c), max(c))
    if op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if op == "/":
        if b[0] > 0 or b[1] < 0:
            # Euclidean: a / b = floor(a / b) for b > 0, -floor(a / -b) for b < 0
            if b[0] > 0:
                c = [_floordiv(x, y) for x in a for y in b]
            else:
                c = [-_floordiv(x, -y) for x in a for y in b]
            return _fit(t, min(c), max(c))
        m = max(abs(a[0]), abs(a[1]))
        return _fit(t, -m, m)
    if op == "%":
        m = max(abs(b[0]), abs(b[1]))
        if b[0] > 0 and a[0] >= 0 and a[1] < b[0]:
            return a
        if math.isinf(m):
            return (0, type_range(t)[1])
        return (0, max(0, m - 1))
    if op == "<<" and b[0] == b[1] and 0 <= b[0] < t.bits:
        return _fit(t, a[0] * 2 ** int(b[0]), a[1] * 2 ** int(b[0]))
    if op == ">>" and b[0] == b[1] and 0 <= b[0] < t.bits:
        return (_floordiv(a[0], 2 ** int(b[0])), _floordiv(a[1], 2 ** int(b[0])))
    if op == "&" and (b[0] >= 0 or a[0] >= 0):
        hi = min(x for x in (a[1] if a[0] >= 0 else INF, b[1] if b[0] >= 0 else INF))
        return (0, hi)
    if op in ("&", "|", "^"):
        r = _bitwise(op, a, b)
        if r is not None:
            return _fit(t, *r)
    return type_range(t)


def _bitwise(op, a, b):
    """Bounds of a & b, a | b, a ^ b: two's-complement values of k + 1 bits stay
    within k + 1 bits; non-negative ones within k bits (and a | b >= max(a, b))."""
    if any(math.isinf(v) for v in a + b):
        return None
    a, b = (int(a[0]), int(a[1])), (int(b[0]), int(b[1]))
    if a[0] >= 0 and b[0] >= 0:
        top = (1 << max(a[1], b[1]).bit_length()) - 1
        return (max(a[0], b[0]) if op == "|" else 0, top)
    k = 0
    for lo, hi in (a, b):
        if lo < 0:
            k = max(k, (-lo - 1).bit_length())
        k = max(k, max(hi, 0).bit_length())
    return (-(1 << k), (1 << k) - 1)


def _to_float_outward(t: Type, lo, hi) -> Interval:
    """An interval converted to float type t: round each end outward, so that
    values which round up (or down) on conversion stay inside."""
    out = []
    for v, toward in ((lo, -INF), (hi, INF)):
        if math.isinf(v) or math.isnan(v):
            out.append(v)
            continue
        with np.errstate(over="ignore"):
            f = np.asarray(v).astype(t.dtype)
        if (toward < 0 and float(f) > v) or (toward > 0 and float(f) < v):
            f = np.nextafter(f, np.asarray(toward, dtype=t.dtype))
        out.append(float(f))
    return (out[0], out[1])


def _float_binop(op, a, b):
    def corners(f):
        out = []
        for x in a:
            for y in b:
                try:
                    out.append(f(x, y))
                except (ZeroDivisionError, OverflowError):
                    return (-INF, INF)
        if any(math.isnan(v) for v in out):
            # (0 * inf, inf / inf: the value may be NaN, which only an unbounded interval
            # admits - a conversion to an integer then spans its type, as i32(NaN) may)
            return (-INF, INF)
        return (min(out), max(out))
    if op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        return corners(lambda x, y: x * y)
    if op == "/":
        if b[0] > 0 or b[1] < 0:
            return corners(lambda x, y: x / y)
        return (-INF, INF)
    if op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if op == "%":
        m = max(abs(b[0]), abs(b[1]))
        return (-m, m)
    return (-INF, INF)


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


def _conjuncts(e: Expr):
    if isinstance(e, BinOp) and e.op == "&&":
        yield from _conjuncts(e.a)
        yield from _conjuncts(e.b)
    else:
        yield e


def _rvar_plus_const(e: Expr):
    """(key, offset) when e is r.k, r.k + c, r.k - c or c + r.k (c a constant); else None."""
    if isinstance(e, RVar):
        return (id(e.rdom), e.index), 0
    if isinstance(e, BinOp) and e.op in ("+", "-") and e.type.is_int():
        for v, c, sign in ((e.a, e.b, 1 if e.op == "+" else -1), (e.b, e.a, 1)):
            if isinstance(v, RVar) and isinstance(c, Const) and not (e.op == "-" and v is e.b):
                return (id(v.rdom), v.index), sign * int(c.value)
    return None


def _uses_rvar(e: Expr, key) -> bool:
    from hdsl.ir.expr import walk
    return any(isinstance(n, RVar) and (id(n.rdom), n.index) == key for n in walk(e))


def narrow_by_predicate(pred: Expr, env: BoundsEnv) -> None:
    """Tighten env.rvars using the conjuncts of an rdom's `where` condition that
    compare a reduction variable (plus a constant) with an expression of known
    range, as Halide's bounds inference does for the if-condition a predicate
    becomes: a point outside the tightened box fails the predicate. An empty
    interval (lo > hi) means no point passes."""
    terms = [t for t in _conjuncts(pred) if isinstance(t, BinOp) and t.op in _FLIP]
    for _ in range(2):              # conditions between rvars feed each other
        for t in terms:
            for side, other, op in ((t.a, t.b, t.op), (t.b, t.a, _FLIP[t.op])):
                found = _rvar_plus_const(side)
                if found is None:
                    continue
                key, off = found
                if key not in env.rvars or _uses_rvar(other, key) or other.type.is_float():
                    continue
                lo_o, hi_o = interval(other, env, {})
                lo, hi = env.rvars[key]
                # r + off  op  other
                if op in ("<", "<=", "==") and not math.isinf(hi_o):
                    hi = min(hi, int(hi_o) - off - (1 if op == "<" else 0))
                if op in (">", ">=", "==") and not math.isinf(lo_o):
                    lo = max(lo, int(lo_o) - off + (1 if op == ">" else 0))
                env.rvars[key] = (lo, hi)
