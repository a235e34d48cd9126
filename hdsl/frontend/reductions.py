"""Inline reductions: sum, product, maximum, minimum, argmax, argmin.

As in Halide, each becomes an anonymous Func over the free pure vars of its
argument, initialised to the reduction's identity and updated over the one
rdom the argument uses (with that rdom's `where` predicate)."""
from __future__ import annotations

from hdsl.frontend.values import ExprVal, TupleVal
from hdsl.ir import ops
from hdsl.ir.expr import BinOp, Const, FuncCall, RVar, Select, Var, walk
from hdsl.ir.func import Update
from hdsl.ir.types import BOOL, I32


def inline_reduction(el, name, e, n, ctx):
    rdoms, free = [], []
    for node in walk(e):
        if isinstance(node, RVar) and node.rdom not in rdoms:
            rdoms.append(node.rdom)
        if isinstance(node, Var) and node.name not in free:
            free.append(node.name)
    if not rdoms:
        el.error(f"{name}(...) reduces over an rdom, but this expression uses none", n.args[0].span,
                 f"declare one with 'rdom r = [0..8]' and use r.x inside {name}(...)")
    if len(rdoms) > 1:
        el.error(f"{name}(...) uses {len(rdoms)} rdoms ({', '.join(r.name for r in rdoms)}); it reduces over one",
                 n.args[0].span, "merge them into one multi-dimensional rdom")
    if e.type.is_error():
        return ExprVal(ops.poison())
    # a pure var in the rdom's `where` condition is a dimension of the reduction too
    if rdoms[0].predicate is not None:
        for node in walk(rdoms[0].predicate):
            if isinstance(node, Var) and node.name not in free:
                if ctx.pure_vars is not None and node.name not in ctx.pure_vars:
                    el.error(f"the 'where' condition of rdom '{rdoms[0].name}' uses '{node.name}', which is not "
                             "a pure var here", n.span, f"use {name}(...) inside a Func with pure var '{node.name}'")
                free.append(node.name)
    order = list(ctx.pure_vars or [])
    free.sort(key=lambda v: order.index(v) if v in order else len(order))
    rd = rdoms[0]
    t = e.type
    f = el.new_func(name, n.span, implicit=True)
    f.args = list(free)
    args = tuple(Var(v) for v in free)
    if name in ("sum", "product", "maximum", "minimum"):
        if t.is_bool() and name in ("sum", "product"):
            el.error(f"{name} of bool values", n.args[0].span, "cast to an integer type first, e.g. u8(c)")
        init = {"sum": 0, "product": 1, "maximum": t.min_value(), "minimum": t.max_value()}[name]
        f.values = [Const(t, float(init) if t.is_float() else init)]
        cur = FuncCall(f, args, 0, t)
        op = {"sum": "+", "product": "*", "maximum": "max", "minimum": "min"}[name]
        f.updates.append(Update(list(args), [BinOp(op, cur, e, t)], rd, n.span))
        return ExprVal(FuncCall(f, args, 0, t))
    k = len(rd.bounds)
    init = t.min_value() if name == "argmax" else t.max_value()
    f.values = [Const(I32, 0)] * k + [Const(t, float(init) if t.is_float() else init)]
    cur = FuncCall(f, args, k, t)
    # strict comparison: the first position in rdom order wins ties, as in Halide
    better = BinOp(">" if name == "argmax" else "<", e, cur, BOOL)
    values = [Select(better, RVar(rd, i), FuncCall(f, args, i, I32), I32) for i in range(k)]
    values.append(Select(better, e, cur, t))
    f.updates.append(Update(list(args), values, rd, n.span))
    return TupleVal([FuncCall(f, args, i, v.type) for i, v in enumerate(f.values)])
