"""`f.tile_iir(v, n)`: the tiling transform of Chaurasia et al. 2015 for f's filters along v.

A first-order-or-higher recursive filter along v is a serial chain over the
whole range. Cut the range into tiles of n points; then (for a causal filter
y[p] = b0 * g[p] + a1 * y[p-1] + … + ak * y[p-k] over positions p = 0 .. P-1):

- intra:  every tile filtered on its own, as if the k values before it were 0
          (`f.intra<s>(i, t, …)`, i the position in tile t): all tiles at once;
- weights: W(m, j), the filter's response at offset m of a tile to a unit
          value j places before the tile and zeros elsewhere (`f.weights<s>`);
- tails:  the true last k values of each tile, a short serial chain over the
          tiles, T(t)[j] = intra(n - j, t) + Σ_l W(n - j, l) · T(t - 1)[l]
          (`f.tail<s>`, a tuple of k values);
- final:  y[t·n + i] = intra(i, t) + Σ_l W(i, l) · T(t - 1)[l]
          (`f.tiled<s>`), and outside [lo, hi) the values before the filter.

An anticausal filter is the same with positions counted downward from hi - 1.
Algebraically the result is the serial filter's; floating-point sums are
associated differently (integer results are exact: wrapping arithmetic is a
ring). Each filter stage of f along v becomes these Funcs, computed at the
root with their outer loops parallel; the updates before and after stay as
they were, on Funcs of their own (`f.part<s>`), and f keeps the last ones
with their schedules. Filters along other dims are untouched.
"""
from __future__ import annotations

from hdsl.diagnostics import HdslError
from hdsl.ir.expr import BinOp, Const, Expr, FuncCall, RVar, Select, Var, substitute, walk
from hdsl.ir.func import Directive, Func, RDom, Update
from hdsl.ir.types import BOOL, I32
from hdsl.lower.inline import Definitions
from hdsl.lower.loops import FuncSchedule, Level


def apply_tile_iir(funcs: list[Func], defs: dict[int, Definitions], scheds: dict[int, FuncSchedule]) -> list[Func]:
    out = list(funcs)
    for f in list(funcs):
        fs = scheds.get(id(f))
        if fs is None:
            continue
        tiles = [d for d in fs.stages.get(-1, []) if d.name == "tile_iir"]
        if not tiles:
            continue
        for d in tiles:
            fs.stages[-1].remove(d)
        sizes = {}
        for d in tiles:
            v, n = d.args
            sizes[f.args.index(v)] = (n, d.span)
        new = _rewrite(f, sizes, defs, scheds)
        at = out.index(f)
        out[at:at] = new
        # The new Funcs are computed at the root, so what they read must be computed there
        # too; and a producer computed or stored inside f that f itself no longer reads (its
        # reads moved to the new Funcs) cannot stay there. Both move to the root (always valid).
        def reads(defn, g):
            exprs = list(defn.values) + [e for u in defn.updates for e in list(u.args) + list(u.values)]
            return any(isinstance(n, FuncCall) and n.func is g for e in exprs for n in walk(e))
        for g in out:
            gs = scheds.get(id(g))
            if gs is None or g is f or g in new:
                continue
            inside_f = (gs.compute.kind == "at" and gs.compute.func is f) or (gs.store.kind == "at" and gs.store.func is f)
            placed = gs.compute.kind == "at" or gs.store.kind == "at"
            if (inside_f and not reads(defs[id(f)], g)) or (placed and any(reads(defs[id(h)], g) for h in new)):
                gs.compute = gs.store = Level("root")
    return out


def _I(v: int) -> Const:
    return Const(I32, v)


def _b(op, a, b, t=I32) -> Expr:
    return BinOp(op, a, b, BOOL if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||") else t)


def _retarget(e: Expr, old: Func, new: Func) -> Expr:
    return substitute(e, lambda n: FuncCall(new, n.args, n.index, n.type)
                      if isinstance(n, FuncCall) and n.func is old else None)


def _mentions_vars(e: Expr) -> bool:
    return any(isinstance(n, (Var, RVar)) for n in walk(e))


def _rewrite(f: Func, sizes: dict, defs, scheds) -> list[Func]:
    d0 = defs[id(f)]
    fs = scheds[id(f)]
    created: list[Func] = []
    values, updates, moved = list(d0.values), [], []      # the current segment of f
    stage_map = {}                                         # old update index -> new index in f
    seg = 0
    for k, u in enumerate(d0.updates):
        if u.iir is None or u.iir[0] not in sizes:
            stage_map[k] = len(updates)
            updates.append(u)
            moved.append(fs.stages.get(k, []))
            continue
        n, span = sizes[u.iir[0]]
        # the segment so far becomes a Func of its own: what this filter reads
        g = Func(f"{f.name}.part{seg}", args=list(f.args), implicit=True, span=f.span)
        g.values = [_retarget(v, f, g) for v in values]
        g_updates = [Update([_retarget(a, f, g) for a in x.args], [_retarget(v, f, g) for v in x.values],
                            x.rdom, x.span, x.iir) for x in updates]
        g.updates = g_updates
        defs[id(g)] = Definitions(g, g.values, g_updates)
        scheds[id(g)] = FuncSchedule(Level("root"), Level("root"),
                                     {i: [Directive(x.name, x.args, x.span, i) for x in ds]
                                      for i, ds in enumerate(moved) if ds})
        created.append(g)
        created += _tile_filter(f, g, u, n, span, seg, defs, scheds)
        h = created[-1]
        values = [FuncCall(h, tuple(Var(a) for a in f.args), 0, h.values[0].type)]
        updates, moved = [], []
        stage_map = {}
        seg += 1
    defs[id(f)] = Definitions(f, values, updates)
    # f keeps the schedules of its remaining updates, renumbered
    stages = {-1: fs.stages.get(-1, [])}
    for old, new in stage_map.items():
        if old in fs.stages:
            stages[new] = [Directive(x.name, x.args, x.span, new) for x in fs.stages[old]]
    fs.stages = stages
    return created


def _tile_filter(f: Func, g: Func, u: Update, n: int, span, seg: int, defs, scheds) -> list[Func]:
    d, sign, lo, hi, b0, feedback = u.iir
    t = g.values[0].type
    k = len(feedback)
    for c in [b0] + feedback:
        if _mentions_vars(c):        # (the front end allows only coordinate-free coefficients)
            raise HdslError(f"tile_iir needs coefficients that are the same everywhere; a coefficient of "
                            f"'{f.name}''s filter depends on coordinates", span,
                            "use constants or params as coefficients, or remove tile_iir")
    if k == 0:
        raise HdslError("tile_iir needs a filter with feedback coefficients", span)
    zero, one = Const(t, 0), Const(t, 1)
    vname = f.args[d]
    others = [a for i, a in enumerate(f.args) if i != d]
    ov = [Var(a) for a in others]
    count = _b("-", hi, lo)                                    # points in the range
    tiles = _b("/", _b("+", count, _I(n - 1)), _I(n))

    def src(p):                                                # position -> coordinate along v
        return _b("+", lo, p) if sign == "+" else _b("-", _b("-", hi, _I(1)), p)

    def g_at(coord):
        args = []
        oi = iter(ov)
        for i in range(len(f.args)):
            args.append(coord if i == d else next(oi))
        return FuncCall(g, tuple(args), 0, t)

    def par_outer(func, stage, names):
        return [Directive("parallel", [names[-1]], span, stage)] if names else []

    # W(m, j): the response at offset m to a unit value j places before the tile
    w = Func(f"{f.name}.weights{seg}", args=["m", "j"], implicit=True, span=f.span)
    m, j = Var("m"), Var("j")
    w.values = [Select(_b("==", m, _b("-", _I(0), j)), one, zero, t)]
    rw = RDom(f"{w.name}.r", [(_I(0), _I(n))], None, span)
    rm = RVar(rw, 0)
    total: Expr = zero
    for l, a in enumerate(feedback, start=1):
        total = _b("+", total, _b("*", a, FuncCall(w, (_b("-", rm, _I(l)), j), 0, t), t), t)
    w.updates = [Update([rm, j], [total], rw, span)]
    defs[id(w)] = Definitions(w, w.values, w.updates)
    scheds[id(w)] = FuncSchedule(Level("root"), Level("root"), {})

    # intra(i, t, others): each tile filtered alone
    iname, tname = f"{vname}_in", f"{vname}_tile"
    intra = Func(f"{f.name}.intra{seg}", args=[iname, tname] + others, implicit=True, span=f.span)
    iv, tv = Var(iname), Var(tname)
    p = _b("+", _b("*", tv, _I(n)), iv)
    pc = _b("max", _b("min", p, _b("-", count, _I(1))), _I(0))
    intra.values = [Select(_b("<", p, count), g_at(src(pc)), zero, t)]
    ri_d = RDom(f"{intra.name}.r", [(_I(0), _I(n))], None, span)
    ri = RVar(ri_d, 0)

    def intra_at(i, tt):
        return FuncCall(intra, (i, tt) + tuple(ov), 0, t)
    total = _b("*", b0, intra_at(ri, tv), t)
    for l, a in enumerate(feedback, start=1):
        prev = Select(_b(">=", _b("-", ri, _I(l)), _I(0)), intra_at(_b("max", _b("-", ri, _I(l)), _I(0)), tv), zero, t)
        total = _b("+", total, _b("*", a, prev, t), t)
    intra.updates = [Update([ri, tv] + ov, [total], ri_d, span)]
    defs[id(intra)] = Definitions(intra, intra.values, intra.updates)
    scheds[id(intra)] = FuncSchedule(Level("root"), Level("root"),
                                     {-1: par_outer(intra, -1, [iname, tname] + others),
                                      0: par_outer(intra, 0, [tname] + others)})

    # tail(t, others): the true last k values of tile t, a serial chain over the tiles
    tail = Func(f"{f.name}.tail{seg}", args=[tname] + others, implicit=True, span=f.span)
    tail.values = [zero] * k
    rt_d = RDom(f"{tail.name}.r", [(_I(0), tiles)], None, span)
    rt = RVar(rt_d, 0)

    def tail_prev(tt, l):
        return Select(_b(">", tt, _I(0)), FuncCall(tail, (_b("max", _b("-", tt, _I(1)), _I(0)),) + tuple(ov), l - 1, t),
                      zero, t)
    vals = []
    for jj in range(1, k + 1):
        pos = _I(n - jj)
        e = intra_at(pos, rt)
        for l in range(1, k + 1):
            e = _b("+", e, _b("*", FuncCall(w, (pos, _I(l)), 0, t), tail_prev(rt, l), t), t)
        vals.append(e)
    tail.updates = [Update([rt] + ov, vals, rt_d, span)]
    defs[id(tail)] = Definitions(tail, tail.values, tail.updates)
    scheds[id(tail)] = FuncSchedule(Level("root"), Level("root"),
                                    {-1: par_outer(tail, -1, [tname] + others), 0: par_outer(tail, 0, others)})

    # tiled(v, others): intra plus the carried tails, and g outside the range
    h = Func(f"{f.name}.tiled{seg}", args=list(f.args), implicit=True, span=f.span)
    vv = Var(vname)
    pos = _b("-", vv, lo) if sign == "+" else _b("-", _b("-", hi, _I(1)), vv)
    posc = _b("max", _b("min", pos, _b("-", count, _I(1))), _I(0))
    tt, ii = _b("/", posc, _I(n)), _b("%", posc, _I(n))
    y = intra_at(ii, tt)
    for l in range(1, k + 1):
        y = _b("+", y, _b("*", FuncCall(w, (ii, _I(l)), 0, t), tail_prev(tt, l), t), t)
    inside = _b("&&", _b("<=", lo, vv), _b("<", vv, hi))
    h.values = [Select(inside, y, g_at(vv), t)]
    defs[id(h)] = Definitions(h, h.values, [])
    scheds[id(h)] = FuncSchedule(Level("root"), Level("root"), {-1: par_outer(h, -1, list(f.args))})
    return [w, intra, tail, h]
