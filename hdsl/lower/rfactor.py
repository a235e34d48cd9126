"""`f.update(i).rfactor(r.x, u)`: factor an associative reduction for parallelism.

For an update `f(P) = f(P) op e(P, r)` with op one of + * min max and a
left-hand side of pure vars only, rfactor creates an intermediate

    f.intm(P, u) = identity(op)
    f.intm(P, u) = f.intm(P, u) op e(P, r[x := u])     over the other dims of r

and rewrites the update to `f(P) = f(P) op f.intm(P, r.x)` over r.x alone.
The intermediate is computed at the root with its loop over u parallel.
Integer results are unchanged (wrapping + and * are associative and
commutative); float sums and products are reassociated, which the spec
permits for rfactor.
"""
from __future__ import annotations

from hdsl.diagnostics import HdslError
from hdsl.ir.expr import BinOp, Const, FuncCall, RVar, Var, substitute, walk
from hdsl.ir.func import Directive, Func, RDom, Update
from hdsl.lower.inline import Definitions
from hdsl.lower.loops import FuncSchedule, Level

IDENTITY = {"+": 0, "*": 1}


def apply_rfactor(funcs: list[Func], defs: dict[int, Definitions], scheds: dict[int, FuncSchedule]) -> list[Func]:
    out = list(funcs)
    for f in list(funcs):
        fs = scheds[id(f)]
        for stage, ds in list(fs.stages.items()):
            for d in list(ds):
                if d.name != "rfactor":
                    continue
                ds.remove(d)
                g = _factor(f, stage, d, defs, scheds)
                out.insert(out.index(f), g)
    return out


def _factor(f: Func, stage: int, d: Directive, defs, scheds) -> Func:
    u = defs[id(f)].updates[stage]
    rvar_name, new_var = d.args
    where = d.span
    if u.rdom is None or len(u.values) != 1:
        raise HdslError("rfactor needs an update over an rdom with one value", where)
    if not all(isinstance(a, Var) for a in u.args):
        raise HdslError("rfactor needs an update whose left-hand side is pure vars only", where,
                        "write the reduction as f(x, y) = f(x, y) + ... over the rdom")
    v = u.values[0]
    if not (isinstance(v, BinOp) and v.op in ("+", "*", "min", "max") and isinstance(v.a, FuncCall)
            and v.a.func is f and all(isinstance(a, Var) and a.name == b.name for a, b in zip(v.a.args, u.args))):
        raise HdslError("rfactor needs an associative update: f(...) = f(...) + e (or *, min, max)", where)
    if any(isinstance(n, FuncCall) and n.func is f for n in walk(v.b)):
        raise HdslError("rfactor: the reduced expression reads the Func itself", where)
    op, e, t = v.op, v.b, v.type
    rd = u.rdom
    x = [i for i in range(len(rd.bounds)) if RVar(rd, i).name == rvar_name]
    if not x:
        raise HdslError(f"'{rvar_name}' is not a dimension of this update's rdom", where)
    x = x[0]
    pure = [a.name for a in u.args]
    if new_var in pure:
        raise HdslError(f"'{new_var}' is already a pure var of '{f.name}'", where)
    g = Func(f"{f.name}.intm{stage}", args=pure + [new_var], implicit=True, span=f.span)
    if op in IDENTITY:
        init = IDENTITY[op]
    else:
        init = t.min_value() if op == "max" else t.max_value()
    g.values = [Const(t, float(init) if t.is_float() else init)]
    rest = [b for i, b in enumerate(rd.bounds) if i != x]
    new_rd = RDom(f"{rd.name}.rest", rest, None, rd.span) if rest else None
    remap = {}
    k = 0
    for i in range(len(rd.bounds)):
        if i != x:
            remap[i] = k
            k += 1

    def to_intm(expr):
        def visit(n):
            if isinstance(n, RVar) and n.rdom is rd:
                if n.index == x:
                    return Var(new_var)
                return RVar(new_rd, remap[n.index])
            return None
        return substitute(expr, visit)
    if rd.predicate is not None:
        if new_rd is None:
            raise HdslError("rfactor of a one-dimensional rdom with a 'where' condition is not supported", where)
        new_rd.predicate = to_intm(rd.predicate)
    gargs = [Var(a) for a in pure] + [Var(new_var)]
    gv = BinOp(op, FuncCall(g, tuple(gargs), 0, t), to_intm(e), t)
    g_update = Update(gargs, [gv], new_rd, u.span)
    g.updates = [g_update]
    # f's update now folds the intermediate over r.x alone
    x_rd = RDom(f"{rd.name}.{'xyzw'[x] if x < 4 else x}", [rd.bounds[x]], None, rd.span)
    call = FuncCall(g, tuple(Var(a) for a in pure) + (RVar(x_rd, 0),), 0, t)
    defs[id(f)].updates[stage] = Update(u.args, [BinOp(op, v.a, call, t)], x_rd, u.span)
    defs[id(g)] = Definitions(g, list(g.values), [g_update])
    scheds[id(g)] = FuncSchedule(Level("root"), Level("root"),
                                 {-1: [Directive("parallel", [new_var], where, -1)],
                                  0: [Directive("parallel", [new_var], where, 0)]})
    return g
