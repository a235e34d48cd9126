"""Whole-graph transformations that keep a pipeline's meaning."""
from __future__ import annotations

from hdsl.ir.expr import Expr, FuncCall, RVar, Var, substitute
from hdsl.ir.func import Func, Pipeline, RDom, Update, topo_order


def inline_funcs(p: Pipeline, names: set[str]) -> Pipeline:
    """A copy of `p` in which the pure Funcs named in `names` are substituted into
    their callers (the user's Func objects are left untouched)."""
    order = topo_order(p.outputs)
    new: dict[int, Func] = {}
    bodies: dict[int, list[Expr]] = {}

    def rewrite(e: Expr, rdoms: dict) -> Expr:
        def visit(n):
            if isinstance(n, FuncCall):
                if id(n.func) in bodies:
                    g = n.func
                    binding = dict(zip(g.args, n.args))
                    return substitute(bodies[id(g)][n.index],
                                      lambda m: binding.get(m.name) if isinstance(m, Var) else None)
                if id(n.func) in new:
                    return FuncCall(new[id(n.func)], n.args, n.index, n.type)
            if isinstance(n, RVar) and id(n.rdom) in rdoms:
                return RVar(rdoms[id(n.rdom)], n.index)
            return None
        return substitute(e, visit)

    for f in order:              # producers first: their rewritten bodies are ready for consumers
        if f.name in names and not f.updates and f not in p.outputs:
            bodies[id(f)] = [rewrite(v, {}) for v in f.values]
            continue
        g = Func(f.name, list(f.args), None, [], f.span, dict(f.locals), f.implicit)
        new[id(f)] = g
        g.values = [rewrite(v, {}) for v in f.values]
        for u in f.updates:
            rdoms = {}
            rd = u.rdom
            if rd is not None:
                nr = RDom(rd.name, [(rewrite(lo, {}), rewrite(ext, {})) for lo, ext in rd.bounds], None, rd.span)
                rdoms[id(rd)] = nr
                if rd.predicate is not None:
                    nr.predicate = rewrite(rd.predicate, rdoms)
                rd = nr
            # self-references point at the copy
            g.updates.append(Update([rewrite(a, rdoms) for a in u.args], [rewrite(v, rdoms) for v in u.values],
                                    rd, u.span))
    return Pipeline(p.name, p.inputs, p.params, [new[id(f)] for f in p.outputs], p.output_types, p.schedules,
                    p.filename)
