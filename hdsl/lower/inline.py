"""Inline the Funcs a schedule computes inline.

`inline_definitions(funcs, inlined)` returns, for every Func that is not
inlined, its definitions with every call to an inlined Func replaced by that
Func's value (its pure vars substituted by the call's arguments), recursively.
The user's Func objects are left untouched.
"""
from __future__ import annotations

from dataclasses import dataclass

from hdsl.ir.expr import Expr, FuncCall, Var, substitute
from hdsl.ir.func import Func, Update


@dataclass
class Definitions:
    func: Func
    values: list[Expr]
    updates: list[Update]


def _inliner(inlined: set[int]):
    memo: dict[int, list[Expr]] = {}

    def expand(e: Expr) -> Expr:
        def visit(n):
            if isinstance(n, FuncCall) and id(n.func) in inlined:
                g = n.func
                if id(g) not in memo:
                    memo[id(g)] = [expand(v) for v in g.values]
                body = memo[id(g)][n.index]
                binding = dict(zip(g.args, n.args))
                return substitute(body, lambda m: binding.get(m.name) if isinstance(m, Var) else None)
            return None
        return substitute(e, visit)
    return expand


def inline_definitions(funcs: list[Func], inlined: set[int]) -> dict[int, Definitions]:
    expand = _inliner(inlined)
    out = {}
    for f in funcs:
        if id(f) in inlined:
            continue
        values = [expand(v) for v in f.values]
        updates = []
        for u in f.updates:
            rdom = u.rdom
            if rdom is not None and rdom.predicate is not None:
                from hdsl.ir.func import RDom
                rdom = RDom(rdom.name, rdom.bounds, expand(rdom.predicate), rdom.span)
                rdom_map = (u.rdom, rdom)
            else:
                rdom_map = None
            args = [expand(a) for a in u.args]
            vals = [expand(v) for v in u.values]
            if rdom_map is not None:
                args = [_retarget(a, *rdom_map) for a in args]
                vals = [_retarget(v, *rdom_map) for v in vals]
                rdom.predicate = _retarget(rdom.predicate, *rdom_map)
            iir = None
            if u.iir is not None:
                d, sign, lo, hi, b0, feedback = u.iir
                iir = (d, sign, expand(lo), expand(hi), expand(b0), [expand(a) for a in feedback])
            updates.append(Update(args, vals, rdom, u.span, iir))
        out[id(f)] = Definitions(f, values, updates)
    return out


def _retarget(e: Expr, old, new) -> Expr:
    from hdsl.ir.expr import RVar
    return substitute(e, lambda n: RVar(new, n.index) if isinstance(n, RVar) and n.rdom is old else None)
