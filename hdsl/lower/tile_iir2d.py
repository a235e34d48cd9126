"""`f.tile_iir(a, b, na, nb)`: f's filters along two dims tiled together (Nehab et al. 2011,
"GPU-efficient recursive filtering and summed-area tables"; Chaurasia et al. 2015).

f's updates are filters only: a run F1 .. Fm along dim a, then a run G1 .. Gq along dim b
(each `.iir`, causal or anticausal, of any order; one range per dim). The box
[lo_a, hi_a) x [lo_b, hi_b) is cut into tiles of na x nb, aligned at lo (the last ones
padded with zeros, which every filter's input is masked to). Inside a tile, each filter's
result is linear in its input there and in the k values its recursion reads just before
the tile (its tail: the true result in the neighbouring tile, in the filter's direction).

- `f.intra_<a>`, `f.intra_<b>` (per tile, inside `f.edges`): the chain of each run inside
  every tile from zero tails; `f.edges` keeps every filter's k edge lines of each tile
  (the last k in its direction). The input is read once here.
- `f.resp<s'>_<l>_<s>`: K(c, t), the response at in-tile coordinate c of filters s' .. s
  of one run (run from zero inside tile t: t is an argument because the last tile's
  padding is masked) to a unit value at place l of filter s''s tail.
- `f.tails<s>` along a: T_s(u, ta, tb) = edge_s + sum over s' <= s, l of
  K(edge, l) T_s'(u, the tile before)[l], a serial chain over the tiles in s's direction
  (k values per line and tile: small).
- `f.corr<s'>_<l>_<t>`: the a filters' correction inside a tile is K(c) T_s'[l], separable,
  so what the b filters make of it is K(c) times the b chain run over the column of tails
  T_s'[l] (the size of the tails).
- `f.tails<m + t>` along b: the b edges, plus the a corrections through the b filters,
  plus the b filters' own tails, serial over the tiles along b.
- `f.final_<a>`, `f.final_<b>` (per tile of f): the chains again, from the true tails
  (written into slots beside the tile before each filter). The input is read a second
  time and f written once. f is computed exactly on the box: a pipeline that needs it
  beyond fails at run time with an error naming the directive (runtime/native.py).

Storage: each run's chain keeps the other dim innermost, so its recursion runs with the
lanes across it on dense vectors; the copies between the two (and from the input) are
loops the code generator transposes in 16 x 16 register blocks. Float sums are associated
differently than in the serial filter (the weights and tails are f64 for f32 data, as in
the 1-D form); integer results are exact (wrapping arithmetic is a ring).
"""
from __future__ import annotations

import re

from hdsl.diagnostics import HdslError
from hdsl.ir.expr import Cast, Const, Expr, FuncCall, RVar, Select, Var, substitute
from hdsl.ir.func import Directive, Func, RDom, Update
from hdsl.ir.types import F64
from hdsl.lower.inline import Definitions
from hdsl.lower.loops import FuncSchedule, Level
from hdsl.lower.tile_iir import INLINE_READS, _I, _b, _mentions_vars, _reads, _retarget, lanes_for


def _filters(f: Func, defs, d) -> tuple[int, int, list, list]:
    """Check f's shape for the 2-D form; returns (a, b, the a filters, the b filters)."""
    v1, v2, n1, n2 = d.args
    hint = f"tile each dim on its own: {f.name}.tile_iir({v1}, {n1}).tile_iir({v2}, {n2})"
    if v1 == v2:
        raise HdslError(f"tile_iir({v1}, {v2}, ...) names one dim twice", d.span,
                        f"name two dims of '{f.name}': {f.name}.tile_iir(x, y, 64, 64)")
    ups = defs[id(f)].updates
    i1, i2 = f.args.index(v1), f.args.index(v2)
    bad = [k for k, u in enumerate(ups) if u.iir is None or u.iir[0] not in (i1, i2)]
    if bad:
        k = bad[0]
        what = "is not a recursive filter (.iir)" if ups[k].iir is None else \
            f"is a filter along '{f.args[ups[k].iir[0]]}'"
        raise HdslError(f"tile_iir({v1}, {v2}, ...) tiles a Func whose updates are all filters along "
                        f"'{v1}' and '{v2}'; update({k}) of '{f.name}' {what}", d.span, hint)
    dims = [u.iir[0] for u in ups]
    if len(set(dims)) < 2:
        only = f.args[dims[0]] if dims else None
        raise HdslError(f"'{f.name}' has no filter along '{v2 if only == v1 else v1}' to tile with its "
                        f"filters along '{only}'" if dims else f"'{f.name}' has no recursive filter (.iir)",
                        d.span, f"tile one dim: {f.name}.tile_iir({only}, n)" if dims else None)
    m = next(i for i, x in enumerate(dims) if x != dims[0])
    if any(x != dims[m] for x in dims[m:]):
        k = next(i for i in range(m, len(dims)) if dims[i] != dims[m])
        raise HdslError(f"tile_iir({v1}, {v2}, ...) needs the filters along one dim first, then those along "
                        f"the other; update({k}) of '{f.name}' goes back to '{f.args[dims[k]]}'", d.span, hint)
    for run in (ups[:m], ups[m:]):
        for u in run[1:]:
            if repr(u.iir[2:4]) != repr(run[0].iir[2:4]):
                raise HdslError(f"tile_iir({v1}, {v2}, ...) needs one range for the filters along "
                                f"'{f.args[u.iir[0]]}'; two of '{f.name}''s differ", d.span, hint)
        for u in run:
            if any(_mentions_vars(c) for c in [u.iir[4]] + list(u.iir[5])):
                raise HdslError(f"tile_iir needs coefficients that are the same everywhere; a coefficient of "
                                f"'{f.name}''s filter depends on coordinates", d.span,
                                "use constants or params as coefficients, or remove tile_iir")
            if not u.iir[5]:
                raise HdslError("tile_iir needs a filter with feedback coefficients", d.span)
    return dims[0], dims[-1], ups[:m], ups[m:]


def rewrite_2d(f: Func, d: Directive, defs, scheds) -> list[Func]:
    """The Funcs of f's joint tiling (computed before f); f becomes their result."""
    a, b, fa, fb = _filters(f, defs, d)
    span = d.span
    v1, v2, n1, n2 = d.args
    n = {f.args.index(v1): n1, f.args.index(v2): n2}
    d0 = defs[id(f)]
    fs = scheds[id(f)]
    t = d0.values[0].type
    wt = F64 if t.is_float() and t.bits < 64 else t
    created: list[Func] = []
    L = lanes_for(t)

    def new(name, args, values, updates=(), compute=None, stages=None):
        g = Func(f"{f.name}.{name}", args=list(args), implicit=True, span=f.span)
        g.values, g.updates = list(values), list(updates)
        defs[id(g)] = Definitions(g, g.values, g.updates)
        lv = compute or Level("root")
        scheds[id(g)] = FuncSchedule(lv, lv, stages or {})
        created.append(g)
        return g

    # what the filters read: f's pure definition, inlined where it reads little
    if _reads(d0.values[0]) > INLINE_READS:
        part = new("part", f.args, list(d0.values),
                   stages={-1: [Directive("vectorize", [f.args[0], L], span, -1)]})

        def source(coords):
            return FuncCall(part, tuple(coords), 0, t)
    else:
        def source(coords, e=d0.values[0]):
            env = dict(zip(f.args, coords))
            return substitute(e, lambda x: env.get(x.name) if isinstance(x, Var) else None)

    lo = {a: fa[0].iir[2], b: fb[0].iir[2]}
    hi = {a: fa[0].iir[3], b: fb[0].iir[3]}
    count = {k: _b("-", hi[k], lo[k]) for k in (a, b)}
    tiles = {k: _b("/", _b("+", count[k], _I(n[k] - 1)), _I(n[k])) for k in (a, b)}
    D = sorted((a, b))
    other = {a: b, b: a}
    rest = [x for i, x in enumerate(f.args) if i not in (a, b)]
    rv = [Var(x) for x in rest]
    iname = {k: f"{f.args[k]}_in" for k in (a, b)}
    tname = {k: f"{f.args[k]}_tile" for k in (a, b)}
    iv = {k: Var(iname[k]) for k in (a, b)}
    tv = {k: Var(tname[k]) for k in (a, b)}
    tile_names = [iname[k] for k in D] + [tname[k] for k in D] + rest
    # (u, tiles..., rest): a line across the tile (u its coordinate along the other dim)
    taken = set(f.args) | set(iname.values()) | set(tname.values())

    def fresh(base):                            # a var name no dim of f has
        while base in taken:
            base += "_"
        taken.add(base)
        return base
    uname, cname, tlname = fresh("u"), fresh("c"), fresh("tile")
    line_names = [uname] + [tname[k] for k in D] + rest

    def tile_call(g, i: dict, tt: dict, idx=0, ty=None):
        return FuncCall(g, tuple(i[k] for k in D) + tuple(tt[k] for k in D) + tuple(rv), idx, ty or t)

    def line_call(g, u, tt: dict, idx=0, ty=None):
        return FuncCall(g, (u,) + tuple(tt[k] for k in D) + tuple(rv), idx, ty or t)

    def inside(k, c, tt):                       # in-tile coordinate c of tile tt along k is in the range
        return _b("<", _b("+", _b("*", tt, _I(n[k])), c), count[k])

    def coord_of(u: Update, p):                 # filter order position p -> in-tile coordinate
        return p if u.iir[1] == "+" else _b("-", _I(n[u.iir[0]] - 1), p)

    def neighbour(u: Update, tt):               # the tile before tt in u's order, and whether it exists
        k = u.iir[0]
        if u.iir[1] == "+":
            return _b("max", _b("-", tt, _I(1)), _I(0)), _b(">", tt, _I(0))
        return _b("min", _b("+", tt, _I(1)), _b("-", tiles[k], _I(1))), _b("<", _b("+", tt, _I(1)), tiles[k])

    def coefs(u: Update, ty):
        cast = (lambda e: e) if ty == t else (lambda e: Cast(ty, e))
        return cast(u.iir[4]), [cast(x) for x in u.iir[5]]

    def scan(g, u: Update, at, ty, seed, tile_of, masked=True):
        """Append to g an update running u's recursion along its dim inside each tile: `at(c)`
        the call args with the filter's in-tile coordinate c, `seed(l, ri)` the value l - ri
        places before the tile (the tail), `tile_of` the tile index along the filter's dim."""
        k = u.iir[0]
        b0, fb_ = coefs(u, ty)
        rd = RDom(f"{g.name}.r{len(g.updates)}", [(_I(0), _I(n[k]))], None, span)
        ri = RVar(rd, 0)
        pos = coord_of(u, ri)
        cur = FuncCall(g, at(pos), 0, ty)
        zero = Const(ty, 0)
        inp = Select(inside(k, pos, tile_of), cur, zero, ty) if masked else cur
        total = _b("*", b0, inp, ty)
        for l, c in enumerate(fb_, start=1):
            if seed is None:                    # (the tails lie in g's slots before the tile)
                back = FuncCall(g, at(coord_of(u, _b("-", ri, _I(l)))), 0, ty)
            else:
                back = FuncCall(g, at(coord_of(u, _b("max", _b("-", ri, _I(l)), _I(0)))), 0, ty)
                back = Select(_b(">=", ri, _I(l)), back, seed(l, ri), ty)
            total = _b("+", total, _b("*", c, back, ty), ty)
        g.updates.append(Update(list(at(pos)), [total], rd, span))
        defs[id(g)] = Definitions(g, g.values, g.updates)
        return ri.name

    def carried(l, ri, get, ty):
        """The value l - ri places before the tile, for ri < l: tail entry l - ri - 1."""
        c = get(l - 1)
        for idx in range(l - 2, -1, -1):
            c = Select(_b("==", ri, _I(l - 1 - idx)), get(idx), c, ty)
        return c

    filters = fa + fb
    m = len(fa)

    def dim_tile_at(k, c):                      # args of a tile Func with coordinate c along k
        def at(pos):
            i = {k: pos, other[k]: iv[other[k]]}
            return tuple(i[x] for x in D) + tuple(tv[x] for x in D) + tuple(rv)
        return at

    # the input in tile coordinates, 0 in the padding
    coords = []
    for i, x in enumerate(f.args):
        if i in (a, b):
            c = _b("+", lo[i], _b("+", _b("*", tv[i], _I(n[i])), iv[i]))
            coords.append(_b("max", _b("min", c, _b("-", hi[i], _I(1))), lo[i]))
        else:
            coords.append(Var(x))
    value_in = Select(_b("&&", inside(a, iv[a], tv[a]), inside(b, iv[b], tv[b])), source(coords), Const(t, 0), t)

    # ---- the chain of one run (the filters along one dim) inside each tile, in a Func whose
    # storage along that dim has slots besides the tile's n points: [-K, 0) and [n, n + K)
    # hold the tails the causal / anticausal filters read (0 in intra; the true tails, written
    # by an update before each filter, in final), [n + K + r K, ...) the edges of the run's
    # filter r saved before the next one overwrites them (intra). The other dim is innermost
    # in storage: the recursion runs along this dim with the lanes across it.
    K = max(len(u.iir[5]) for u in filters)

    def save_pos(r, j):
        return n_save0 + r * K + (j - 1)

    def chain(name, run, base, source_at, tails_of=None):
        k = run[0].iir[0]
        o = other[k]
        nk = n[k]
        g = new(name, tile_names, [Const(t, 0)])
        ck = iv[k]
        src = source_at(_b("max", _b("min", ck, _I(nk - 1)), _I(0)))
        g.values = [Select(_b("&&", _b(">=", ck, _I(0)), _b("<", ck, _I(nk))), src, Const(t, 0), t)]
        at = dim_tile_at(k, None)
        upd = {}
        for r, u in enumerate(run):
            if tails_of is not None:
                for l in range(1, len(u.iir[5]) + 1):
                    slot = _I(-l) if u.iir[1] == "+" else _I(nk - 1 + l)
                    upd[len(g.updates)] = "line"
                    g.updates.append(Update(list(at(slot)), [tails_of(base + r, l - 1)], None, span))
            i_scan = len(g.updates)
            upd[i_scan] = scan(g, u, at, t, None, tv[k], masked=base + r > 0)
            if tails_of is None and r < len(run) - 1:
                for j in range(1, len(u.iir[5]) + 1):
                    upd[len(g.updates)] = "line"
                    g.updates.append(Update(list(at(_I(save_pos(r, j)))),
                                            [FuncCall(g, at(coord_of(u, _I(nk - j))), 0, t)], None, span))
        defs[id(g)] = Definitions(g, g.values, g.updates)
        lane = iname[o]
        st = {i: ([Directive("reorder", [lane, kind], span, i)] if kind != "line" else [])
              + [Directive("vectorize", [lane, L], span, i)] for i, kind in upd.items()}
        # the pure definition (the input, or the other run's result, stored with the other
        # dim innermost) vectorized along the lanes with the run's dim serial around them: the
        # code generator transposes such loops in 16 x 16 register blocks (codegen/transpose.py)
        lo_, li_ = f"{lane}.lo", f"{lane}.li"
        st[-1] = [Directive("split", [lane, lo_, li_, L], span, -1), Directive("reorder", [li_, iname[k], lo_], span, -1),
                  Directive("vectorize", [li_], span, -1)]
        if k == D[0]:
            st[-1].insert(0, Directive("reorder_storage", [lane, iname[k]] + [tname[x] for x in D] + rest,
                                       span, -1))
        g.chain_dim = k
        scheds[id(g)].stages = st
        return g

    n_save = {k: n[k] + K for k in (a, b)}

    def src_a(c):                               # the input, in the chain along a
        i = {a: c, b: iv[b]}
        return substitute(value_in, lambda x: i[{iname[a]: a, iname[b]: b}[x.name]]
                          if isinstance(x, Var) and x.name in (iname[a], iname[b]) else None)

    def src_b_of(ga):
        def src_b(c):                           # the chain along a's result, in the chain along b
            i = {b: c, a: _b("max", _b("min", iv[a], _I(n[a] - 1)), _I(0))}
            return tile_call(ga, i, tv)
        return src_b

    n_save0 = n_save[a]
    ia_ = chain(f"intra_{f.args[a]}", fa, 0, src_a)
    n_save0 = n_save[b]
    ib_ = chain(f"intra_{f.args[b]}", fb, m, src_b_of(ia_))
    edge_vals, edge_at = [], {}
    for s, u in enumerate(filters):
        k = u.iir[0]
        o = other[k]
        run_s = s if s < m else s - m
        last_in_run = s == m - 1 or s == len(filters) - 1
        for j in range(1, min(len(u.iir[5]), n[k]) + 1):       # (a tile has n[k] points of its own)
            pos = coord_of(u, _I(n[k] - j)) if last_in_run else _I(n_save[k] + run_s * K + (j - 1))
            i = {k: pos, o: _b("min", Var(uname), _I(n[o] - 1))}
            edge_at[(s, j)] = len(edge_vals)
            edge_vals.append(tile_call(ia_ if s < m else ib_, i, tv))
    edges = new("edges", line_names, edge_vals)
    scheds[id(edges)].stages = {-1: [Directive("reorder", [uname, tname[a], tname[b]] + rest, span, -1),
                                     Directive("vectorize", [uname, L], span, -1),
                                     Directive("parallel", [tname[b]], span, -1)]}
    for g in (ia_, ib_):
        scheds[id(g)].compute = scheds[id(g)].store = Level("at", edges, tname[a])

    # ---- responses: K[(s', l, s)](c, tile) along one dim
    resp = {}
    for run, base in ((fa, 0), (fb, m)):
        for s1 in range(len(run)):
            u1 = run[s1]
            k = u1.iir[0]
            for l in range(1, len(u1.iir[5]) + 1):
                # W: the response of filter s1 to a unit value l places before the tile (no input)
                g = new(f"resp{base + s1}_{l}_{base + s1}", [cname, tlname], [Const(wt, 0)])
                c, tl = Var(cname), Var(tlname)

                def seed(ll, ri, l=l):          # 1 at place l before the tile, 0 elsewhere
                    return Select(_b("==", _b("-", _I(ll), ri), _I(l)), Const(wt, 1), Const(wt, 0), wt)
                scan(g, u1, lambda pos: (pos, tl), wt, seed, tl, masked=False)
                resp[(base + s1, l, base + s1)] = g
                for s2 in range(s1 + 1, len(run)):
                    h = new(f"resp{base + s1}_{l}_{base + s2}", [cname, tlname],
                            [FuncCall(g, (c, tl), 0, wt)])
                    scan(h, run[s2], lambda pos: (pos, tl), wt, lambda ll, ri: Const(wt, 0), tl)
                    resp[(base + s1, l, base + s2)] = h
                    g = h

    def K(s1, l, s, c, tt):
        return FuncCall(resp[(s1, l, s)], (c, tt), 0, wt)

    # ---- tails along a, then the a-corrections the b filters see, then tails along b
    tails = {}

    def tail_entry(s, u_expr, tt: dict, idx):
        """T_s at line u of tile tt's neighbour in s's direction, entry idx (0 where none)."""
        u = filters[s]
        k = u.iir[0]
        nt, ok = neighbour(u, tt[k])
        tt2 = dict(tt)
        tt2[k] = nt
        return Select(ok, line_call(tails[s], u_expr, tt2, idx, wt), Const(wt, 0), wt)

    def wide(e):
        return e if wt == t else Cast(wt, e)

    U = Var(uname)
    corr = {}
    for s, u in enumerate(filters):
        k = u.iir[0]
        ks = len(u.iir[5])
        g = new(f"tails{s}", line_names, [Const(wt, 0)] * ks)
        rd = RDom(f"{g.name}.r", [(_I(0), tiles[k])], None, span)
        rt = RVar(rd, 0)
        tk = rt if u.iir[1] == "+" else _b("-", _b("-", tiles[k], _I(1)), rt)
        tt = {k: tk, other[k]: tv[other[k]]}
        tails[s] = g
        run0 = 0 if s < m else m
        vals = []
        for j in range(1, ks + 1):
            if j > n[k]:
                # a tile shorter than the order: the value j places before its end lies j - n
                # places before it, entry j - n - 1 of the tails of the tile before (true values)
                vals.append(tail_entry(s, U, tt, j - n[k] - 1))
                continue
            c = coord_of(u, _I(n[k] - j))
            e = wide(line_call(edges, U, tt, edge_at[(s, j)]))
            for s1 in range(run0, s + 1):
                for l in range(1, len(filters[s1].iir[5]) + 1):
                    e = _b("+", e, _b("*", K(s1, l, s, c, tk), tail_entry(s1, U, tt, l - 1), wt), wt)
            if s >= m:
                # the a filters' corrections, through the b filters: K_a(u) * corr(edge)
                for s1 in range(m):
                    for l in range(1, len(filters[s1].iir[5]) + 1):
                        cc = corr[(s1, l, s)]
                        e = _b("+", e, _b("*", K(s1, l, m - 1, U, tt[a]),
                                          FuncCall(cc, (c, tt[b], tt[a]) + tuple(rv), 0, wt), wt), wt)
            vals.append(e)
        g.updates = [Update([U] + [tt[x] for x in D] + rv, vals, rd, span)]
        defs[id(g)] = Definitions(g, g.values, g.updates)
        scheds[id(g)].stages = {-1: [Directive("vectorize", [uname, L], span, -1)],
                                0: [Directive("reorder", [uname, rt.name], span, 0),
                                    Directive("vectorize", [uname, L], span, 0),
                                    Directive("parallel", [tname[other[k]]], span, 0)]}
        if s == m - 1:
            # the a filters' tails, b-filtered inside each b tile: corr[(s1, l, m + t)](c, tb, ta)
            for s1 in range(m):
                for l in range(1, len(filters[s1].iir[5]) + 1):
                    cn = [cname, tname[b], tname[a]] + rest
                    cv, tbv, tav = Var(cname), Var(tname[b]), Var(tname[a])
                    col = Select(inside(b, cv, tbv),
                                 tail_entry(s1, cv, {a: tav, b: tbv}, l - 1), Const(wt, 0), wt)
                    for t2 in range(len(fb)):
                        h = new(f"corr{s1}_{l}_{m + t2}", cn, [col])
                        scan(h, fb[t2], lambda pos: (pos, tbv, tav) + tuple(rv), wt,
                             lambda ll, ri: Const(wt, 0), tbv, masked=t2 > 0)
                        scheds[id(h)].stages = {-1: [Directive("parallel", [tname[a]], span, -1)],
                                                0: [Directive("parallel", [tname[a]], span, 0)]}
                        corr[(s1, l, m + t2)] = h
                        col = FuncCall(h, (cv, tbv, tav) + tuple(rv), 0, wt)

    # ---- final: the chain again in each tile, from the true tails
    def tail_of(s, idx):
        u = filters[s]
        k = u.iir[0]
        o = other[k]
        e = tail_entry(s, iv[o], {k: tv[k], o: tv[o]}, idx)
        return e if wt == t else Cast(t, e)
    n_save0 = n_save[a]
    fa_ = chain(f"final_{f.args[a]}", fa, 0, src_a, tail_of)
    n_save0 = n_save[b]
    final = chain(f"final_{f.args[b]}", fb, m, src_b_of(fa_), tail_of)

    # ---- f: the final values on the box, the serial form outside
    vs = [Var(x) for x in f.args]
    pos = {k: _b("-", vs[k], lo[k]) for k in (a, b)}
    posc = {k: _b("max", _b("min", pos[k], _b("-", _b("*", tiles[k], _I(n[k])), _I(1))), _I(0)) for k in (a, b)}
    y = tile_call(final, {k: _b("%", posc[k], _I(n[k])) for k in (a, b)},
                  {k: _b("/", posc[k], _I(n[k])) for k in (a, b)})
    defs[id(f)] = Definitions(f, [y], [])
    # f is computed on the box exactly, and a pipeline that needs more of it fails at run
    # time (a clear error, as a bound() too small: runtime/native.py), never wrong values
    for k in (a, b):
        if f.args[k] in fs.bounds:
            raise HdslError(f"'{f.name}' has a bound() on '{f.args[k]}', but tile_iir({v1}, {v2}, ...) computes it "
                            f"on its filters' range along '{f.args[k]}'", span,
                            f"remove {f.name}.bound({f.args[k]}, ...)")
        fs.bounds[f.args[k]] = (lo[k], count[k])
    for i, ds in sorted(fs.stages.items()):
        if i >= 0 and ds:
            raise HdslError(f"'{f.name}.update({i})' is one of the filters that tile_iir({v1}, {v2}, ...) "
                            "replaces; its schedule has nothing to apply to", ds[0].span,
                            f"remove the directives of {f.name}.update({i}), or tile each dim on its own")
    fs.stages = {-1: fs.stages.get(-1, [])}
    if not fs.stages[-1]:
        # f in tiles of the filters' tiles (aligned: both start at lo), the rows of tiles in
        # parallel, the final chains computed per tile, in the cache
        va, vb = f.args[a], f.args[b]
        ao, ai, bo, bi = f"{va}.to", f"{va}.ti", f"{vb}.to", f"{vb}.ti"
        inner = va if D[0] == a else vb
        fs.stages[-1] = [Directive("split", [va, ao, ai, n[a]], span, -1, "guard_with_if"),
                         Directive("split", [vb, bo, bi, n[b]], span, -1, "guard_with_if"),
                         Directive("reorder", [ai, bi, ao, bo] if inner == va else [bi, ai, bo, ao], span, -1),
                         Directive("vectorize", [ai if inner == va else bi, L], span, -1),
                         Directive("parallel", [bo if inner == va else ao], span, -1)]
        for g in (fa_, final):
            scheds[id(g)].compute = scheds[id(g)].store = Level("at", f, ao if inner == va else bo)
    return created, final


def stage_funcs_2d(f: Func, d: Directive) -> list[Func]:
    """Stand-ins of the stages of f.tile_iir(a, b, na, nb) a schedule may name (the same
    names, args and updates): f.intra_<a>, f.intra_<b>, f.edges, f.final_<a>, f.final_<b>."""
    defs = {id(f): Definitions(f, list(f.values), list(f.updates))}
    scheds = {id(f): FuncSchedule(Level("root"), Level("root"), {})}
    created, _ = rewrite_2d(f, d, defs, scheds)
    out = [g for g in created if re.fullmatch(r"(intra|final)_\w+|edges", g.name.rsplit(".", 1)[1])]
    for g in out:
        g.tile_stage_of = (f, "2d")
    return out
