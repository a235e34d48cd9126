"""Symbolic required regions of the Funcs a loss reads.

`required_regions(loss)` gives, for every Func the loss reaches, one
(lo, hi) pair of i32 expressions per dimension (both inclusive; None where
the analysis finds no bound): a box that holds every point at which the loss
reads the Func. The bounds are expressions in params, buffer extents and
rdom bounds, evaluated at run time, so the gradient can scatter over a
Func's region and clamp its gathers into it (Halide's Derivative.cpp runs
bounds inference on the forward pipeline for the same reasons).
"""
from __future__ import annotations

from hdsl.ir.expr import BinOp, BufferProp, Cast, Const, Expr, FuncCall, Param, RVar, Select, Var, walk
from hdsl.ir.func import Func, pure_positions, topo_order
from hdsl.ir.simplify import simplify
from hdsl.ir.types import I32

Bound = tuple[Expr | None, Expr | None]


def _op(op: str, a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None or b is None:
        return None
    return simplify(BinOp(op, a, b, I32))


def _either(op: str, a: Expr | None, b: Expr | None) -> Expr | None:
    """min/max of two bounds where a missing one is the identity (-inf for max, +inf for min)."""
    if a is None:
        return b
    if b is None:
        return a
    return _op(op, a, b)


def interval(e: Expr, env: dict) -> Bound:
    """(lo, hi) of an integer index expression; env maps Var names and RVars (by (rdom id, dim))."""
    if isinstance(e, Const) and e.type.is_integral() and not e.type.is_bool():
        c = Const(I32, int(e.value))
        return (c, c)
    if isinstance(e, Var):
        return env.get(e.name, (None, None))
    if isinstance(e, RVar):
        return env.get((id(e.rdom), e.index), (None, None))
    if isinstance(e, (Param, BufferProp)) and e.type.is_integral() and not e.type.is_bool():
        v = e if e.type == I32 else Cast(I32, e)
        return (v, v)
    if isinstance(e, Cast) and e.type == I32 and not e.value.type.is_float() and \
            (e.value.type == I32 or e.value.type.bits < 32):          # a lossless widening
        return interval(e.value, env)
    if isinstance(e, Cast) and e.type == I32 and e.value.type.is_float():
        # float -> int truncates toward zero, which is monotone
        lo, hi = float_interval(e.value, env)
        return (None if lo is None else Cast(I32, lo), None if hi is None else Cast(I32, hi))
    if isinstance(e, Select):
        (tl, th), (fl, fh) = interval(e.t, env), interval(e.f, env)
        return (_op("min", tl, fl), _op("max", th, fh))
    if not isinstance(e, BinOp) or e.type != I32:
        return (None, None)
    (al, ah), (bl, bh) = interval(e.a, env), interval(e.b, env)
    if e.op == "+":
        return (_op("+", al, bl), _op("+", ah, bh))
    if e.op == "-":
        return (_op("-", al, bh), _op("-", ah, bl))
    if e.op == "min":
        return (_op("min", al, bl), _either("min", ah, bh))
    if e.op == "max":
        return (_either("max", al, bl), _op("max", ah, bh))
    c = e.b if isinstance(e.b, Const) else e.a if isinstance(e.a, Const) and e.op == "*" else None
    if c is None:
        return (None, None)
    k = int(c.value)
    lo, hi = (al, ah) if c is e.b else (bl, bh)
    if e.op == "*":
        return (_op("*", lo, c), _op("*", hi, c)) if k >= 0 else (_op("*", hi, c), _op("*", lo, c))
    if e.op == "/" and k > 0 and c is e.b:           # Euclidean division is monotone for k > 0
        return (_op("/", lo, c), _op("/", hi, c))
    if e.op == "%" and k > 0 and c is e.b:
        return (Const(I32, 0), Const(I32, k - 1))
    return (None, None)


def float_interval(e: Expr, env: dict) -> Bound:
    """(lo, hi) of a float expression as float expressions (None where unknown): enough for a
    data-dependent coordinate such as i32(clamp(v, 0.0f, 1.0f) * (1.0f / sigma) + 0.5f)."""
    t = e.type
    if isinstance(e, (Const, Param)):
        return (e, e)
    if isinstance(e, Cast) and e.value.type.is_float():
        lo, hi = float_interval(e.value, env)
        return (None if lo is None else Cast(t, lo), None if hi is None else Cast(t, hi))
    if isinstance(e, Cast) and e.value.type == I32:
        lo, hi = interval(e.value, env)
        return (None if lo is None else Cast(t, lo), None if hi is None else Cast(t, hi))
    if not isinstance(e, BinOp) or not t.is_float():
        return (None, None)
    (al, ah), (bl, bh) = float_interval(e.a, env), float_interval(e.b, env)

    def f(op, a, b):
        return None if a is None or b is None else BinOp(op, a, b, t)

    if e.op == "+":
        return (f("+", al, bl), f("+", ah, bh))
    if e.op == "-":
        return (f("-", al, bh), f("-", ah, bl))
    if e.op == "min":
        return (f("min", al, bl), ah if bh is None else bh if ah is None else f("min", ah, bh))
    if e.op == "max":
        return (bl if al is None else al if bl is None else f("max", al, bl), f("max", ah, bh))
    if None in (al, ah, bl, bh):
        return (None, None)
    if e.op == "/" and bl is bh:
        if al is ah:
            p = f("/", al, bl)
            return (p, p)
        p, q = f("/", al, bl), f("/", ah, bl)
        return (f("min", p, q), f("max", p, q))
    if e.op == "*":
        if al is ah and bl is bh:
            p = f("*", al, bl)
            return (p, p)
        ps = [f("*", x, y) for x in (al, ah) for y in (bl, bh)]
        return (f("min", f("min", ps[0], ps[1]), f("min", ps[2], ps[3])),
                f("max", f("max", ps[0], ps[1]), f("max", ps[2], ps[3])))
    return (None, None)


def stage_env(f: Func, region: list[Bound], stage: int) -> dict:
    """Ranges of the vars of one definition of f: its pure vars over f's region, and the
    rvars of the update's rdom over the rdom's bounds."""
    env: dict = {}
    if stage < 0:
        names = list(enumerate(f.args))
    else:
        names = pure_positions(f, f.updates[stage])
    for i, name in names:
        env[name] = region[i]
    if stage >= 0 and f.updates[stage].rdom is not None:
        rd = f.updates[stage].rdom
        for d, (lo, ext) in enumerate(rd.bounds):
            lo = simplify(lo)
            env[(id(rd), d)] = (lo, _op("-", _op("+", lo, ext), Const(I32, 1)))
    return env


def required_regions(loss: Func) -> dict[int, list[Bound]]:
    """id(Func) -> its region as the loss reads it, for every Func the loss reaches."""
    regions: dict[int, list[Bound]] = {id(loss): [(None, None)] * loss.dims}
    for f in reversed(topo_order([loss])):
        region = regions.setdefault(id(f), [(None, None)] * f.dims)
        stages = [(-1, list(f.values or []))]
        stages += [(k, u.args + u.values) for k, u in enumerate(f.updates)]
        for stage, exprs in stages:
            env = stage_env(f, region, stage)
            for e in exprs:
                for n in walk(e):
                    if isinstance(n, FuncCall) and n.func is not f:
                        _widen(regions, n.func, [interval(a, env) for a in n.args])
    return regions


def _widen(regions: dict, g: Func, box: list[Bound]) -> None:
    old = regions.get(id(g))
    if old is None:
        regions[id(g)] = box
        return
    regions[id(g)] = [(None if ol is None or nl is None else _op("min", ol, nl),
                       None if oh is None or nh is None else _op("max", oh, nh))
                      for (ol, oh), (nl, nh) in zip(old, box)]

