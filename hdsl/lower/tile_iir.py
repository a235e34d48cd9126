"""`f.tile_iir(v, n)`: the tiling transform of Chaurasia et al. 2015 for f's filters along v.

A first-order-or-higher recursive filter along v is a serial chain over the
whole range. Cut the range into tiles of n points; then (for a causal filter
y[p] = b0 * g[p] + a1 * y[p-1] + … + ak * y[p-k] over positions p = 0 .. P-1):

- intra:  every tile filtered on its own, as if the k values before it were 0
          (`f.intra<s>(i, t, …)`, i the position in tile t): all tiles at once;
- weights: W(m, j), the filter's response at offset m of a tile to a unit
          value j places before the tile and zeros elsewhere (`f.weights<s>`);
- tails:  the true k values before the end of each tile, a short serial chain over
          the tiles, T(t)[j] = intra(n - j, t) + Σ_l W(n - j, l) · T(t - 1)[l] for
          j <= n; a tile shorter than the order (n < k) has only n values of its own,
          and the others are the tile before's: T(t)[j] = T(t - 1)[j - n] for j > n
          (`f.tail<s>`, a tuple of k values; j counted from 1 here);
- final:  y[t·n + i] = intra(i, t) + Σ_l W(i, l) · T(t - 1)[l]
          (`f.tiled<s>`), and outside [lo, hi) the values before the filter.

A filter along the innermost storage dim (x) runs its tiles with rows in the vector lanes:
intra and final read each tile's rows through a staged copy (`f.intra<s>.rows`,
`f.final<s>.rows`, computed with them), so that the input streams in with dense loads
and the transposition into lanes happens in the cache.

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
from hdsl.ir.expr import BinOp, Cast, Const, Expr, FuncCall, RVar, Select, Var, substitute, walk
from hdsl.ir.func import Directive, Func, RDom, Update
from hdsl.ir.types import BOOL, F64, I32
from hdsl.lower.inline import Definitions
from hdsl.lower.loops import FuncSchedule, Level


def apply_tile_iir(funcs: list[Func], defs: dict[int, Definitions], scheds: dict[int, FuncSchedule],
                   sched=None, outputs=()) -> list[Func]:
    out = list(funcs)
    # stages named in the schedule (`rf.final2.vectorize(...)`): stand-ins made by the
    # recorder (stage_funcs), by their Func's id and name
    named = {}
    for g in (sched.funcs.values() if sched is not None else []):
        of = getattr(g, "tile_stage_of", None)
        if of is not None:
            named.setdefault(id(of[0]), {})[g.name] = g
    for f in list(funcs):
        fs = scheds.get(id(f))
        if fs is None:
            continue
        tiles = [d for d in fs.stages.get(-1, []) if d.name == "tile_iir"]
        if not tiles:
            continue
        for d in tiles:
            fs.stages[-1].remove(d)
        joint = [d for d in tiles if len(d.args) == 4]
        written = {id(d) for d in fs.stages.get(-1, [])}
        if joint:
            # two dims tiled together (lower/tile_iir2d.py)
            from hdsl.lower.tile_iir2d import rewrite_2d
            if len(tiles) > 1:
                other = next(d for d in tiles if d is not joint[0])
                raise HdslError(f"'{f.name}' is tiled twice: tile_iir({', '.join(map(str, joint[0].args))}) "
                                "already tiles its filters", other.span,
                                f"keep one: {f.name}.tile_iir(x, y, nx, ny) tiles both dims together")
            new, final = rewrite_2d(f, joint[0], defs, scheds)
            if sched is not None and named.get(id(f)):
                # stages the schedule names (rf.final_y.…) take its directives
                _user_schedules(f, new, named[id(f)], sched, scheds, {})
        else:
            sizes = {}
            for d in tiles:
                v, n = d.args
                sizes[f.args.index(v)] = (n, d.span)
            new = _rewrite(f, sizes, defs, scheds, named.get(id(f), {}), sched)
        if any(f is o for o in outputs):
            # An output that is its last filter's result takes that stage's splits. They are
            # guarded in every form of the code: the shifted form (made when other splits of
            # the pipeline's outputs shift inwards) runs on outputs at least as wide as the
            # splits written in the schedule (shift_requirements), which these are not.
            for d in fs.stages.get(-1, []):
                if d.name == "split" and id(d) not in written and d.tail is None:
                    d.tail = "guard_with_if"
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


# a pure segment read by a filter is inlined into its stages (read twice, by intra and final)
# when it reads at most this many values; else it is computed once, at the root
INLINE_READS = 2


def _reads(e: Expr) -> int:
    from hdsl.ir.expr import InputCall
    return sum(isinstance(n, (FuncCall, InputCall)) for n in walk(e))


def stage_funcs(f: Func, k: int) -> list[Func]:
    """Stand-ins of the stages tile_iir makes of filter update(k) of f (the same names, args
    and reduction domains), for a schedule to name before lowering builds the real ones."""
    t = f.values[0].type
    u = f.updates[k]
    made = _tile_filter(f, lambda coords: Const(t, 0), u, 1, u.span, k, {}, {})
    for g in made:
        g.tile_stage_of = (f, k)
    return made


def _user_schedules(f: Func, created: list[Func], named: dict, sched, scheds, merged: dict) -> None:
    """Directives the schedule gives a stage (through its stand-in) replace that stage's
    defaults, stage by stage; compute_at/store_at levels name the real Funcs."""
    real = {g.name: g for g in created}
    real.update(merged)
    placed, reshaped = set(), set()
    for g in created:
        p = named.get(g.name)
        if p is None or not sched.for_func(p):
            continue
        gs = scheds[id(g)]
        given: dict[int, list[Directive]] = {}
        for d in sched.for_func(p):
            if d.name in ("compute_root", "compute_at", "store_root", "store_at", "compute_inline"):
                placed.add(id(g))
            if d.name == "compute_root":
                gs.compute = gs.store = Level("root")
            elif d.name in ("compute_at", "store_at"):
                target = d.args[0]
                target = real.get(target.name, target) if stand_in_of(target) is not None else target
                lv = Level("at", target, d.args[1], d.span)
                if d.name == "compute_at":
                    gs.compute = gs.store = lv
                else:
                    gs.store = lv
            elif d.name == "store_root":
                gs.store = Level("root")
            elif d.name == "compute_inline":
                raise HdslError(f"'{g.name}', a stage of tile_iir, is computed at the root or inside "
                                "another stage; it cannot be inlined", d.span,
                                "remove compute_inline(), or use compute_at(...)")
            elif d.name == "bound":
                gs.bounds[d.args[0]] = (d.args[1], d.args[2])
            else:
                given.setdefault(d.stage, []).append(d)
        gs.stages.update(given)
        if -1 in given:
            reshaped.add(id(g))
    # a default compute_at names a loop of the default schedule of its consumer: when that
    # schedule was replaced and the stage was not placed, it goes to the root
    for g in created:
        gs = scheds[id(g)]
        if id(g) not in placed and gs.compute.kind == "at" and id(gs.compute.func) in reshaped:
            gs.compute = gs.store = Level("root")
    for gs in scheds.values():                 # Funcs the schedule placed inside a stage
        for lv in (gs.compute, gs.store):
            if lv.kind == "at" and stand_in_of(lv.func) is not None and lv.func.name in real:
                lv.func = real[lv.func.name]


def _user_named(stages, named: dict, sched) -> bool:
    return sched is not None and any(g.name in named and sched.for_func(named[g.name]) for g in stages)


def _fuse(f: Func, prev: list, made: list, defs, scheds) -> None:
    """Filter `made` reads the tiles of filter `prev` (its final stage) through its inlined
    result: prev's final is computed inside made's tiled result, and a copy of it inside
    made's last stage, where made's intra reads it."""
    final_prev = prev[4]
    intra, h = made[1], made[5]
    for g in (intra, made[4]):
        # their input, prev's final, is computed in the cache, in the tile: no staged rows
        rows = getattr(g, "rows", None)
        if rows is not None:
            g.values = list(rows.values)       # (rows are read at their own args: the same Vars)
            defs[id(g)] = Definitions(g, g.values, defs[id(g)].updates)
            del defs[id(rows)], scheds[id(rows)], g.rows
            # what it reads is lane-major too (prev's final): copied along the lanes, dense
            # on both sides, not along i (a gather and a scatter per vector)
            # (a schedule given to the stage replaces this: _user_schedules)
            scheds[id(g)].stages[-1] = [Directive("vectorize", [g.args[0], lanes_for(g.values[0].type)], g.span, -1)]
    clone = Func(f"{final_prev.name}.for_last", args=list(final_prev.args), implicit=True, span=final_prev.span)
    clone.values = [_retarget(v, final_prev, clone) for v in final_prev.values]
    clone.updates = [Update([_retarget(a, final_prev, clone) for a in x.args],
                            [_retarget(v, final_prev, clone) for v in x.values], x.rdom, x.span, x.iir)
                     for x in final_prev.updates]
    rows_prev = getattr(final_prev, "rows", None)
    if rows_prev is not None:
        rows = Func(f"{clone.name}.rows", args=list(rows_prev.args), implicit=True, span=rows_prev.span)
        rows.values = list(rows_prev.values)
        defs[id(rows)] = Definitions(rows, rows.values, [])
        clone.values = [_retarget(v, rows_prev, rows) for v in clone.values]
        clone.rows = rows
    defs[id(clone)] = Definitions(clone, clone.values, clone.updates)
    fs_prev = scheds[id(final_prev)]
    at_last = scheds[id(intra)].compute
    scheds[id(clone)] = FuncSchedule(Level("at", at_last.func, at_last.var), Level("at", at_last.func, at_last.var),
                                     {i: list(ds) for i, ds in fs_prev.stages.items()})
    _place_rows(clone, scheds, final_prev.span)
    d_intra = defs[id(intra)]
    intra.values = [_retarget(v, final_prev, clone) for v in intra.values]
    intra.updates = [Update([_retarget(a, final_prev, clone) for a in x.args],
                            [_retarget(v, final_prev, clone) for v in x.values], x.rdom, x.span, x.iir)
                     for x in d_intra.updates]
    defs[id(intra)] = Definitions(intra, intra.values, intra.updates)
    at_h = scheds[id(made[4])].compute           # made's final: inside h's tiles
    fs_prev.compute = Level("at", h, at_h.var)
    fs_prev.store = Level("at", h, at_h.var)
    _place_rows(final_prev, scheds, final_prev.span)
    intra.cascade_clone = clone


def stand_in_of(g):
    return getattr(g, "tile_stage_of", None)


def _rewrite(f: Func, sizes: dict, defs, scheds, named: dict | None = None, sched=None) -> list[Func]:
    d0 = defs[id(f)]
    fs = scheds[id(f)]
    created: list[Func] = []
    values, updates, moved = list(d0.values), [], []      # the current segment of f
    stage_map = {}                                         # old update index -> new index in f
    named = named or {}
    prev = None                  # (dim, stages) of the last tiled filter, while nothing follows it
    for k, u in enumerate(d0.updates):
        if u.iir is None or u.iir[0] not in sizes:
            prev = None
            stage_map[k] = len(updates)
            updates.append(u)
            moved.append(fs.stages.get(k, []))
            continue
        n, span = sizes[u.iir[0]]
        fused = None
        if not updates and prev is not None and prev[0] == u.iir[0] and not _user_named(prev[1][4:], named, sched):
            # a cascade: this filter follows a tiled filter along the same dim. Its tiles read
            # that filter's tiles, recomputed in the cache (prev's final stage, computed inside
            # this filter's tile loops) instead of its result written out and read back twice
            fused = prev[1]
            h_prev = created.pop()
            del defs[id(h_prev)], scheds[id(h_prev)]
            values = list(h_prev.values)
        if fused is None and (updates or _reads(values[0]) > INLINE_READS):
            # the segment so far becomes a Func of its own: what this filter reads
            g = Func(f"{f.name}.part{k}", args=list(f.args), implicit=True, span=f.span)
            g.values = [_retarget(v, f, g) for v in values]
            g_updates = [Update([_retarget(a, f, g) for a in x.args], [_retarget(v, f, g) for v in x.values],
                                x.rdom, x.span, x.iir) for x in updates]
            g.updates = g_updates
            defs[id(g)] = Definitions(g, g.values, g_updates)
            st = {i: [Directive(x.name, x.args, x.span, i) for x in ds] for i, ds in enumerate(moved) if ds}
            # its pure definition: vectorized along the innermost dim, rows in parallel
            st[-1] = [Directive("vectorize", [f.args[0], lanes_for(g.values[0].type)], span, -1)] + (
                [Directive("parallel", [f.args[-1]], span, -1)] if len(f.args) > 1 else [])
            scheds[id(g)] = FuncSchedule(Level("root"), Level("root"), st)
            created.append(g)

            def source(coords, g=g):
                return FuncCall(g, tuple(coords), 0, g.values[0].type)
        else:
            # a pure segment that reads little (the initial values, or the previous filter's
            # result) is read where the filter reads it: no buffer of its own
            def source(coords, e=values[0]):
                env = dict(zip(f.args, coords))
                return substitute(e, lambda x: env.get(x.name) if isinstance(x, Var) else None)
        made = _tile_filter(f, source, u, n, span, k, defs, scheds)
        if fused is not None:
            _fuse(f, fused, made, defs, scheds)
            clone = made[1].cascade_clone
            created[created.index(fused[4]):created.index(fused[4])] = _with_rows([clone])
        created += _with_rows(made)
        prev = (u.iir[0], made)
        h = created[-1]
        values = [FuncCall(h, tuple(Var(a) for a in f.args), 0, h.values[0].type)]
        updates, moved = [], []
        stage_map = {}
    stages = {-1: fs.stages.get(-1, [])}
    merged = {}
    last_h = created[-1] if created else None
    if created and not updates and not stages[-1] and not (
            last_h.name in named and sched is not None and sched.for_func(named[last_h.name])):
        # f ends with a tiled filter and its pure stage is not scheduled: f itself is the
        # last filter's result, with its default schedule (no copy of the whole Func)
        h = created.pop()
        values, stages[-1] = list(h.values), scheds.pop(id(h)).stages[-1]
        del defs[id(h)]
        merged[h.name] = f
        for g in created:
            gs = scheds[id(g)]
            for lv in (gs.compute, gs.store):
                if lv.func is h:
                    lv.func = f
    if sched is not None and named:
        _user_schedules(f, created, named, sched, scheds, merged)
        for g in created:                      # staged rows follow their scan wherever it went
            _place_rows(g, scheds, g.span)
    defs[id(f)] = Definitions(f, values, updates)
    # f keeps the schedules of its remaining updates, renumbered
    for old, new in stage_map.items():
        if old in fs.stages:
            stages[new] = [Directive(x.name, x.args, x.span, new) for x in fs.stages[old]]
    fs.stages = stages
    return created


def lanes_for(t) -> int:
    """Vector lanes of the tiled stages: 64 bytes' worth (two AVX2 registers of f32, so two
    independent chains hide the latency of the recursion's multiply-adds)."""
    return max(1, 64 // max(1, t.bits // 8))


def _tile_filter(f: Func, source, u: Update, n: int, span, k_up: int, defs, scheds) -> list[Func]:
    """The stages of filter update(k_up) of f (named f.<stage><k_up>), reading the values
    before the filter through source(coords). Tiles are aligned at lo whatever the
    direction; positions p = tau * n + i count in the filter's order (tile tau, index i)."""
    d, sign, lo, hi, b0, feedback = u.iir
    t = source([Var(a) for a in f.args]).type
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
    span_n = _b("*", tiles, _I(n))                             # the tiles' points, padding included

    def src(p):                                                # filter-order position -> coordinate
        return _b("+", lo, p) if sign == "+" else _b("-", _b("+", lo, _b("-", span_n, _I(1))), p)

    def g_at(coord):
        args, oi = [], iter(ov)
        for i in range(len(f.args)):
            args.append(coord if i == d else next(oi))
        return source(args)

    def value_at(p):                                           # the input at p, 0 in the padding
        c = src(p)
        inside = _b("&&", _b("<=", lo, c), _b("<", c, hi))
        return Select(inside, g_at(_b("max", _b("min", c, _b("-", hi, _I(1))), lo)), zero, t)

    iname, tname = f"{vname}_in", f"{vname}_tile"
    lane = others[0] if others else tname                      # the vectorized dim of the tile stages
    L = lanes_for(t)
    # lanes per block: along the innermost storage dim (a filter along another dim), whole
    # cache lines of many columns per row, so each tile's rows stream in; otherwise one vector
    B = L * 16 if others and d != 0 else L
    across = d == 0            # the filter runs along the innermost storage dim

    def tile_args(i, tt):                                      # (lane first: contiguous vectors)
        if others:
            return (ov[0], i, tt) + tuple(ov[1:])
        return (tt, i)
    tile_names = [others[0], iname, tname] + others[1:] if others else [tname, iname]
    iv, tv = Var(iname), Var(tname)

    # The weights and the chain over the tiles are f64 for narrower floats: with poles near 1
    # (a recursive Gaussian of large sigma) W's entries are large and the carried values
    # nearly equal, and their sums in f32 cancelled to errors of order 10 (sigma 64, measured)
    wt = F64 if t.is_float() and t.bits < 64 else t
    zw, ow = Const(wt, 0), Const(wt, 1)

    def wide(e):
        return e if wt == t else Cast(wt, e)

    # W(m, j): the response at offset m to a unit value j places before the tile
    w = Func(f"{f.name}.weights{k_up}", args=["m", "j"], implicit=True, span=f.span)
    m, j = Var("m"), Var("j")
    w.values = [Select(_b("==", m, _b("-", _I(0), j)), ow, zw, wt)]
    rw = RDom(f"{w.name}.r", [(_I(0), _I(n))], None, span)
    rm = RVar(rw, 0)
    total: Expr = zw
    for l, a in enumerate(feedback, start=1):
        total = _b("+", total, _b("*", wide(a), FuncCall(w, (_b("-", rm, _I(l)), j), 0, wt), wt), wt)
    w.updates = [Update([rm, j], [total], rw, span)]
    defs[id(w)] = Definitions(w, w.values, w.updates)
    scheds[id(w)] = FuncSchedule(Level("root"), Level("root"), {})

    def scan(name, before):
        """A tile-local recursion over i in every tile (values before the tile: before(l, ri))."""
        s = Func(name, args=list(tile_names), implicit=True, span=f.span)
        s.values = [value_at(_b("+", _b("*", tv, _I(n)), iv))]
        if across and others:
            # the tile's rows copied first, as they lie in memory (dense loads and stores, many
            # misses in flight), then transposed into the lanes from the cache: transposing
            # straight from memory (a scatter per vector) left one miss in flight at a time
            rows = Func(f"{name}.rows", args=[iname, lane, tname] + others[1:], implicit=True, span=f.span)
            rows.values = list(s.values)
            defs[id(rows)] = Definitions(rows, rows.values, [])
            s.values = [FuncCall(rows, (iv, ov[0], tv) + tuple(ov[1:]), 0, t)]
            s.rows = rows
        rd = RDom(f"{name}.r", [(_I(0), _I(n))], None, span)
        ri = RVar(rd, 0)
        total = _b("*", b0, FuncCall(s, tile_args(ri, tv), 0, t), t)
        for l, a in enumerate(feedback, start=1):
            prev = Select(_b(">=", ri, _I(l)), FuncCall(s, tile_args(_b("max", _b("-", ri, _I(l)), _I(0)), tv), 0, t),
                          before(l, ri), t)
            total = _b("+", total, _b("*", a, prev, t), t)
        s.updates = [Update(list(tile_args(ri, tv)), [total], rd, span)]
        defs[id(s)] = Definitions(s, s.values, s.updates)
        # the recursion runs over i with the lanes innermost (vectorized, contiguous here);
        # a filter along the innermost storage dim reads its input along i (contiguous there)
        # and transposes into the tile's lanes in cache
        # (across: i split by the vector width with its chunks outside the lanes, so each
        # chunk is a block of rows -> lanes that the code generator transposes in registers,
        # CodeGenCPU.transpose_for)
        io, ii = f"{iname}.io", f"{iname}.ii"
        stages = {-1: [Directive("split", [iname, io, ii, L], span, -1), Directive("reorder", [ii, lane, io], span, -1),
                       Directive("vectorize", [ii], span, -1)]
                  if across else [Directive("vectorize", [lane, L], span, -1)],
                  0: [Directive("reorder", [lane, ri.name], span, 0), Directive("vectorize", [lane, L], span, 0)]}
        return s, stages

    # intra(lane, i, tau, ...): every tile filtered on its own, from zero
    intra, intra_st = scan(f"{f.name}.intra{k_up}", lambda l, ri: zero)

    # last(tau, others): intra's last min(n, k) values of each tile (intra computed per block
    # of lanes); a tile shorter than the order has only n of its own
    kn = min(k, n)
    last = Func(f"{f.name}.last{k_up}", args=others + [tname], implicit=True, span=f.span)
    last.values = [FuncCall(intra, tile_args(_I(n - jj), tv), 0, t) for jj in range(1, kn + 1)]
    defs[id(last)] = Definitions(last, last.values, [])
    lo_, lv = f"{lane}.lo", f"{lane}.lv"
    if others:
        last_st = [Directive("split", [lane, lo_, lv, B], span, -1),
                   Directive("reorder", [lv, tname, lo_], span, -1),
                   Directive("vectorize", [lv, L], span, -1), Directive("parallel", [lo_], span, -1)]
        at = tname
    else:
        last_st = [Directive("split", [lane, lo_, lv, L], span, -1),
                   Directive("vectorize", [lv], span, -1), Directive("parallel", [lo_], span, -1)]
        at = lo_
    scheds[id(last)] = FuncSchedule(Level("root"), Level("root"), {-1: last_st})
    scheds[id(intra)] = FuncSchedule(Level("at", last, at), Level("at", last, at), intra_st)
    _place_rows(intra, scheds, span)

    # tail(tau, others): the true last k values of tile tau, a serial chain over the tiles
    tail = Func(f"{f.name}.tail{k_up}", args=others + [tname], implicit=True, span=f.span)
    tail.values = [zw] * k
    rt_d = RDom(f"{tail.name}.r", [(_I(0), tiles)], None, span)
    rt = RVar(rt_d, 0)

    def tail_prev(tt, idx, narrow=True):                       # T(tau - 1)[idx], 0 before the first tile
        e = Select(_b(">", tt, _I(0)), FuncCall(tail, tuple(ov) + (_b("max", _b("-", tt, _I(1)), _I(0)),), idx, wt),
                   zw, wt)
        return Cast(t, e) if narrow and wt != t else e
    vals = []
    for jj in range(1, k + 1):
        if jj > n:
            # the value jj places before the end of a tile shorter than the order (n < k) lies
            # jj - n places before the tile: entry jj - n - 1 of the tile before's tail
            vals.append(tail_prev(rt, jj - n - 1, False))
            continue
        e = wide(FuncCall(last, tuple(ov) + (rt,), jj - 1, t))
        for l in range(1, k + 1):
            e = _b("+", e, _b("*", FuncCall(w, (_I(n - jj), _I(l)), 0, wt), tail_prev(rt, l - 1, False), wt), wt)
        vals.append(e)
    tail.updates = [Update(ov + [rt], vals, rt_d, span)]
    defs[id(tail)] = Definitions(tail, tail.values, tail.updates)
    tail_st = {}
    if others:
        tail_st = {-1: [Directive("vectorize", [others[0], L], span, -1)],
                   0: [Directive("split", [others[0], lo_, lv, L], span, 0),
                       Directive("reorder", [lv, rt.name, lo_], span, 0),
                       Directive("vectorize", [lv], span, 0), Directive("parallel", [lo_], span, 0)]}
    scheds[id(tail)] = FuncSchedule(Level("root"), Level("root"), tail_st)

    # final(lane, i, tau, ...): each tile's recursion again, from the true values before it
    def carried(l, ri):
        # the value l - ri places before the tile: T(tau - 1)[l - ri - 1], for ri < l
        c = tail_prev(tv, l - 1)
        for idx in range(l - 2, -1, -1):
            c = Select(_b("==", ri, _I(l - 1 - idx)), tail_prev(tv, idx), c, t)
        return c
    final, final_st = scan(f"{f.name}.final{k_up}", carried)

    # tiled(v, others): the filtered values on [lo, hi), g's outside
    h = Func(f"{f.name}.tiled{k_up}", args=list(f.args), implicit=True, span=f.span)
    vv = Var(vname)
    pos = _b("-", vv, lo) if sign == "+" else _b("-", _b("+", lo, _b("-", span_n, _I(1))), vv)
    posc = _b("max", _b("min", pos, _b("-", span_n, _I(1))), _I(0))
    y = FuncCall(final, tile_args(_b("%", posc, _I(n)), _b("/", posc, _I(n))), 0, t)
    inside = _b("&&", _b("<=", lo, vv), _b("<", vv, hi))
    h.values = [Select(inside, y, g_at(vv), t)]
    defs[id(h)] = Definitions(h, h.values, [])
    vo, vi = f"{vname}.to", f"{vname}.ti"
    if others:
        if across:
            # L rows (unrolled) of L points (the lanes) at a time: a block of the tile's lanes
            # transposed back into rows in registers (CodeGenCPU.transpose_for)
            vio, vii = f"{vname}.tio", f"{vname}.tii"
            h_st = [Directive("split", [vname, vo, vi, n], span, -1),
                    Directive("split", [vi, vio, vii, L], span, -1),
                    Directive("split", [lane, lo_, lv, B], span, -1),
                    Directive("reorder", [vii, lv, vio, vo, lo_], span, -1),
                    Directive("vectorize", [vii], span, -1), Directive("unroll", [lv], span, -1),
                    Directive("parallel", [lo_], span, -1)]
        else:
            h_st = [Directive("split", [vname, vo, vi, n], span, -1),
                    Directive("split", [lane, lo_, lv, B], span, -1),
                    Directive("reorder", [lv, vi, vo, lo_], span, -1),
                    Directive("vectorize", [lv, L], span, -1), Directive("parallel", [lo_], span, -1)]
    else:
        h_st = [Directive("split", [vname, vo, vi, n * L], span, -1),
                Directive("vectorize", [vi, L], span, -1), Directive("parallel", [vo], span, -1)]
    scheds[id(h)] = FuncSchedule(Level("root"), Level("root"), {-1: h_st})
    scheds[id(final)] = FuncSchedule(Level("at", h, vo), Level("at", h, vo), final_st)
    _place_rows(final, scheds, span)
    return [w, intra, last, tail, final, h]


def _place_rows(s: Func, scheds, span) -> None:
    """s's staged rows (if any) are computed where s is, vectorized along the rows."""
    rows = getattr(s, "rows", None)
    if rows is not None:
        lv = scheds[id(s)].compute
        scheds[id(rows)] = FuncSchedule(Level(lv.kind, lv.func, lv.var), Level(lv.kind, lv.func, lv.var),
                                        {-1: [Directive("vectorize", [rows.args[0], lanes_for(rows.values[0].type)],
                                                        span, -1)]})


def _with_rows(made: list) -> list:
    """The stages of one filter with the staged rows of its scans just before them."""
    out = []
    for g in made:
        rows = getattr(g, "rows", None)
        if rows is not None:
            out.append(rows)
        out.append(g)
    return out
