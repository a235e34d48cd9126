"""Loop partitioning: a steady-state copy of a loop whose vector code carries no clamps or guards.

Boundary conditions (`clamp(x - 1, 0, w - 1)`) and the guards of split tails
(`if x_outer * 16 + x_inner < extent`) are no-ops for all but a few iterations
of the loop around a vectorized loop, yet inside it they turn dense vector
loads into gathers and plain stores into masked ones. Like Halide's
partition_loops, this pass splits such a loop

    for v in [m, m + e):  body

into a prologue, a steady state and an epilogue,

    for v in [m, lo):        body
    for v in [lo, hi):       body with the clamps and guards known to be no-ops removed
    for v in [hi, m + e):    body

with `lo` and `hi` worked out at run time, just before the loop, from the
symbolic bounds of each clamp or guard over the loops inside it. A clamp or
guard qualifies when, with the lets inside the loop substituted, it is linear
in `v` (`c * v + r`, c a nonzero constant) and the upper bound of `r` over the
inner loops does not depend on `v`; then it holds for all inner iterations
exactly when `v <= floor(-max r / c)` (c > 0) or `v >= ceil(max r / -c)`
(c < 0). Only clamps and guards that vary across a vector's lanes are
considered (scalar ones are cheap), and every occurrence of a removed node in
the loop's body is checked, so the steady copy computes exactly what the
original does. The prologue and epilogue are left as they were.
"""
from __future__ import annotations

from hdsl.ir.expr import (BinOp, Const, Expr, Select, Var, free_vars, intern, is_canonical, memo_table, subst_vars,
                          walk)
from hdsl.ir.simplify import _key, _linear, _rebuild_linear, simplify
from hdsl.ir.stmt import (Block, For, IfThenElse, LetStmt, Stmt, Store, children, map_exprs, own_exprs,
                          with_children)
from hdsl.ir.types import BOOL, I32
from hdsl.lower.symbolic import _Candidates, expr_bounds

_CMP = ("<", "<=", ">", ">=")
NARROW_LANES = ".lanes"  # the var of a narrow region's lanes made a scalar loop (_narrow_lanes)
_WHOLE = 1 << 29        # a steady range's end past any loop's: a condition that holds for every v


def partition_loops(stmt: Stmt) -> Stmt:
    return _Partitioner().stmt(stmt)


def _I(v: int) -> Const:
    return Const(I32, v)


def _b(op, a, b) -> Expr:
    return simplify(BinOp(op, a, b, I32))


def _names(e: Expr) -> frozenset:
    return free_vars(e)


_exprs, _kids = own_exprs, children


def _has_vector_loop(s: Stmt) -> bool:
    if isinstance(s, For) and s.kind == "vectorized":
        return True
    return any(_has_vector_loop(k) for k in _kids(s))


def _directly_around_vectors(s: Stmt) -> bool:
    """Whether vector code is right inside s, with no serial or parallel loop between (unrolled
    loops may be: a tile of 64 x 2 vectorized in x and unrolled in y is one block of vectors)."""
    if isinstance(s, For):
        return s.kind == "vectorized" or (s.kind == "unrolled" and _directly_around_vectors(s.body))
    return any(_directly_around_vectors(k) for k in _kids(s))


def _conditions(n: Expr, in_if: bool):
    """The (node, d, replacement) of a clamp or guard: `node` equals `replacement` when d <= 0."""
    if not isinstance(n, BinOp):
        return []
    a, b = n.a, n.b
    if n.type == I32 and n.op == "min":
        return [(n, BinOp("-", a, b, I32), a), (n, BinOp("-", b, a, I32), b)]
    if n.type == I32 and n.op == "max":
        return [(n, BinOp("-", b, a, I32), a), (n, BinOp("-", a, b, I32), b)]
    if in_if and n.op in _CMP and a.type == I32:
        t = Const(BOOL, True)
        if n.op == "<":
            return [(n, BinOp("+", BinOp("-", a, b, I32), _I(1), I32), t)]
        if n.op == "<=":
            return [(n, BinOp("-", a, b, I32), t)]
        if n.op == ">":
            return [(n, BinOp("+", BinOp("-", b, a, I32), _I(1), I32), t)]
        return [(n, BinOp("-", b, a, I32), t)]
    return []


def _is_edge_clamp(n: Expr) -> bool:
    """min(e, B.min.d + B.extent.d - 1) or max(e, B.min.d): a boundary condition's clamp to
    a buffer's edge."""
    if not (isinstance(n, BinOp) and n.op in ("min", "max")):
        return False
    for b in (n.a, n.b):
        names = _names(b)
        if len(names) == 1 and next(iter(names)).split(".")[-2:-1] == ["min"]:
            return True
        if len(names) == 2 and {x.rsplit(".", 2)[-2] for x in names} == {"min", "extent"} and \
                len({x.rsplit(".", 2)[0] + "." + x.rsplit(".", 1)[-1] for x in names}) == 1:
            return True
    return False


def _stores_stay_vector(s: Stmt) -> bool:
    """Every store inside a vector loop still has an index that varies across the lanes (a
    tail's clamp pinned to its bound would leave a vector stored to one address)."""
    ok = True

    def visit(x: Stmt, lane: frozenset):
        nonlocal ok
        if isinstance(x, For) and x.kind == "vectorized" and not (isinstance(x.extent, Const) and x.extent.value < 2):
            lane = frozenset({x.var})       # the lanes are the innermost real vector loop's
        if isinstance(x, Store) and lane and not (free_vars(x.index) & lane):
            ok = False
        if isinstance(x, LetStmt) and free_vars(x.value) & lane:
            lane = lane | {x.name}
        for k in _kids(x):
            visit(k, lane)
    visit(s, frozenset())
    return ok


def _has_variable_loop(s: Stmt) -> bool:
    if isinstance(s, For) and not isinstance(s.extent, Const):
        return True
    return any(_has_variable_loop(k) for k in _kids(s))


class _Partitioner:
    def stmt(self, s: Stmt, in_vector: bool = False) -> Stmt:
        inner_vec = in_vector or (isinstance(s, For) and s.kind == "vectorized")
        kids = _kids(s)
        new = [self.stmt(k, inner_vec) for k in kids]
        if any(a is not b for a, b in zip(new, kids)):
            s = with_children(s, new)
        if isinstance(s, For) and s.kind == "serial" and isinstance(s.extent, Const) and s.extent.value == 1:
            # a one-trip loop (a producer computed per vector, 8 points split by 8) is a let:
            # the loop around it partitions instead, once for all of its iterations
            return LetStmt(s.var, s.min, s.body)
        if isinstance(s, For) and s.kind in ("serial", "parallel") and _has_vector_loop(s.body):
            return self.partition(s)
        if (isinstance(s, For) and s.kind == "serial" and not in_vector and not isinstance(s.extent, Const)
                and not _has_variable_loop(s.body)):
            # scalar code (a histogram's scatter, a scan): the innermost loop of run-time
            # extent partitions on the clamps that vary inside it; loops of constant extent
            # below it (an rdom over a kernel) are too short to be worth three copies
            return self.partition(s, scalar=True)
        return s

    # ------------------------------------------------------------ analysis
    def _hot(self, loop: For, scalar: bool = False) -> tuple[dict[int, Expr], set[int]]:
        """Clamp and guard nodes inside vector loops whose value varies across the lanes
        (scalar: anywhere in the loop, varying with its var or an inner loop's), and the ids
        of those that do vary across lanes (not only with the loop's own var)."""
        hot: dict[int, Expr] = {}
        lane_varying: set[int] = set()
        # the loop right around vector code (no other loop between): its own clamps count too
        own = not scalar and _directly_around_vectors(loop.body)

        def visit(s: Stmt, lane: set, in_vec: bool):
            if isinstance(s, For) and (s.kind == "vectorized" or scalar):
                lane = lane | {s.var}
                in_vec = True
            if in_vec:
                for e in _exprs(s):
                    in_if = isinstance(s, IfThenElse) and e is s.cond
                    for n in walk(e):
                        if not isinstance(n, BinOp) or id(n) in hot:
                            continue
                        if (n.type == I32 and n.op in ("min", "max")) or (in_if and n.op in _CMP and n.a.type == I32):
                            # (or one of the loop's own var: a shifted-inwards tile's start,
                            # min(v * n, extent - n), is v * n in the steady state, and the
                            # clamps of coordinates built on it become linear)
                            if _names(n) & lane or (own and n.op in ("min", "max") and loop.var in _names(n)):
                                hot[id(n)] = n
                                if _names(n) & lane:
                                    lane_varying.add(id(n))
            if isinstance(s, LetStmt) and _names(s.value) & lane:
                lane = lane | {s.name}
            for k in _kids(s):
                visit(k, lane, in_vec)
        visit(loop.body, {loop.var} if scalar else set(), scalar)
        del visit           # (it refers to itself: a cycle left for the collector otherwise)
        return hot, lane_varying

    def partition(self, loop: For, scalar: bool = False, invariant_only: str = "") -> Stmt:
        """(invariant_only: only the conditions that do not move with the loop's var, which
        hold for all of its iterations or none: the loop becomes `if they hold: the loop
        without them, else: the loop`, as two loops of which one is empty; its value names
        the copy being split, for the names of its bounds.)"""
        hot, lane_varying = self._hot(loop, scalar)
        if not hot:
            return loop
        v = loop.var
        # every occurrence of a hot node, each with the binders between the loop and it
        found: dict[int, list] = {}     # id(node) -> [(in_if, chain)] per occurrence

        def visit(s: Stmt, chain: list):
            for e in _exprs(s):
                in_if = isinstance(s, IfThenElse) and e is s.cond
                for n in walk(e):
                    if id(n) in hot:
                        found.setdefault(id(n), []).append((in_if, tuple(chain)))
            if isinstance(s, For):
                chain = chain + [("loop", s.var, s.min, s.extent)]
            elif isinstance(s, LetStmt):
                chain = chain + [("let", s.name, s.value)]
            for k in _kids(s):
                visit(k, chain)
        visit(loop.body, [])
        del visit           # (it refers to itself: a cycle that would keep `found` for the collector)

        # inner clamps first: within the steady range every chosen replacement holds at
        # once, so an outer clamp is judged with the inner ones already replaced
        # (max(min(x, hi), lo) becomes max(x, lo), then x)
        def n_hot_below(n):
            return sum(1 for m in walk(n) if id(m) in hot)
        # (and again while something new is replaced: a clamp of a let whose value is a
        # guard's min, `let x = min(base, max)` then `clamp(x, …)`, is linear only once the
        # let's min has gone)
        order = sorted((hot[i] for i in found), key=n_hot_below)
        # (a condition that does not move with v is worth a copy only right around vector code)
        repl, lows, highs = self._choose(order, found, v, invariant=invariant_only or (
            not scalar and _directly_around_vectors(loop.body)), invariant_only=bool(invariant_only))
        if not repl:
            return loop
        m, e = loop.min, loop.extent
        end = _b("+", m, e)
        # (merged where they differ by a constant: max((a + 16) / 16, (a + 15) / 16) is one term)
        lo_c, hi_c = _Candidates(False), _Candidates(True)
        for x in [m] + lows:
            lo_c.add(x)
        for x in [end] + [_b("+", x, _I(1)) for x in highs]:
            hi_c.add(x)
        # a bound that cannot pass the loop's own end (a shifted-inwards tile's `max(v * n, 0)`
        # in a loop from 0 holds from its first iteration) leaves that end's copy of the body
        # empty for every extent: no prologue (or epilogue) is made for it
        lo_v_, hi_v_ = lo_c.value(), hi_c.value()
        has_prologue = bool(lows) and not _never_positive(_b("-", lo_v_, m))
        has_epilogue = bool(highs) and not _never_positive(_b("-", end, hi_v_))
        lo = _b("min", lo_v_, end)
        hi = _b("max", hi_v_, lo)
        steady_body = _replace_stmt(loop.body, repl)
        kind = f"{invariant_only}.wide" if invariant_only else "steady"
        lo_name, hi_name = f"{v}.{kind}.min", f"{v}.{kind}.end"
        lo_v, hi_v = Var(lo_name, I32), Var(hi_name, I32)
        if loop.kind == "parallel":
            # one parallel loop (one dispatch to the thread pool), each task choosing its copy
            inside = BinOp("&&", BinOp("<=", lo_v, Var(v, I32), BOOL), BinOp("<", Var(v, I32), hi_v, BOOL), BOOL)
            body = IfThenElse(inside, steady_body, loop.body)
            return LetStmt(lo_name, lo, LetStmt(hi_name, hi, For(v, m, e, loop.kind, body)))
        parts = []
        if has_prologue:
            parts.append(For(v, m, _b("-", lo_v, m), "serial", loop.body))
        parts.append(For(v, lo_v, _b("-", hi_v, lo_v), "serial", steady_body))
        sat = None
        if has_epilogue and not scalar and not invariant_only:
            # past the steady state a clamp that is not an input's boundary condition (a
            # pyramid level clamped to a coarser level's size) may pin every lane to its
            # bound over a long stretch: there it is the bound itself, a broadcast, instead
            # of lanes checked at run time. (Boundary conditions are pinned only over the
            # few points of the halo, not worth a fourth copy of the loop.)
            # (a shifted-inwards tile start, min(v * n, e - n), not varying across lanes, is
            # v * n up to the last tile: the saturated stretch ends there, the last tile after it)
            sat_order = [n for n in order if (id(n) in lane_varying and not _is_edge_clamp(n))
                         or id(n) not in lane_varying]
            free_hi = {id(n) for n in sat_order if id(n) not in lane_varying}
            sat_repl, sat_lows, sat_highs = self._choose(sat_order, found, v, only="lo", invariant=True,
                                                         free_hi=free_hi)
            if sat_lows and any(sat_repl[i] is not repl.get(i) for i in sat_repl if i not in free_hi) and \
                    _stores_stay_vector(_replace_stmt(loop.body, sat_repl)):
                sat_c = _Candidates(False)
                for x in [hi_v] + sat_lows:
                    sat_c.add(x)
                sat_value = _b("min", sat_c.value(), end)
                sat_end = None
                if sat_highs:
                    end_c = _Candidates(True)
                    for x in [end] + [_b("+", x, _I(1)) for x in sat_highs]:
                        end_c.add(x)
                    sat_end = (f"{v}.saturated.end", _b("max", end_c.value(), Var(f"{v}.saturated.min", I32)))
                sat = (f"{v}.saturated.min", sat_value, _replace_stmt(loop.body, sat_repl), sat_end)
        if sat is not None:
            sat_name, sat_value, sat_body, sat_end = sat
            sat_v = Var(sat_name, I32)
            sat_stop = Var(sat_end[0], I32) if sat_end else end
            parts.append(For(v, hi_v, _b("-", sat_v, hi_v), "serial", loop.body))
            parts.append(For(v, sat_v, _b("-", sat_stop, sat_v), "serial", sat_body))
            if sat_end:
                parts.append(For(v, sat_stop, _b("-", end, sat_stop), "serial", loop.body))
        elif has_epilogue:
            # (an all-or-nothing split's other copy runs only where the region is narrower than
            # a vector: its lanes, pinned by the clamp, become a short scalar loop)
            body = _narrow_lanes(loop.body) if invariant_only else loop.body
            parts.append(For(v, hi_v, _b("-", end, hi_v), "serial", body))
        if not scalar and not invariant_only and _directly_around_vectors(loop.body) and \
                not _has_variable_loop(loop.body):
            # the prologue and epilogue keep the clamps that do not move with v: a narrow
            # region's clamp of a shifted-inwards split, min(lane, extent - 1), which holds
            # for every lane once the region is a vector wide. In the epilogue (the last,
            # shifted tile, run once per row) it would turn the tile's loads and stores into
            # per-lane ones: those copies get their own all-or-nothing steady state. (Not
            # where the body holds loops of its own, a tile's producers: those partition
            # inside, and a copy of the whole nest would cost more code than it saves.)
            parts = [self.partition(p, invariant_only="before" if k == 0 else f"after{k}")
                     if isinstance(p, For) and p.body is loop.body else p for k, p in enumerate(parts)]
        out = Block(tuple(parts))
        if sat is not None:
            if sat_end:
                out = LetStmt(sat_end[0], sat_end[1], out)
            out = LetStmt(sat_name, sat_value, out)
        return LetStmt(lo_name, lo, LetStmt(hi_name, hi, out))

    def _choose(self, order, found, v, only: str | None = None, invariant: bool = False,
                free_hi: frozenset | set = frozenset(), invariant_only: bool = False):
        """Replacements for the hot nodes (in `order`, inner ones first) that hold over one
        range of v, with the bounds of that range: (repl, lows, highs). only="lo": just
        replacements that hold for all v from some point on (the end of the loop), except the
        nodes in free_hi, which may also hold up to some point (their bounds join the highs)."""
        lows, highs, repl = [], [], {}
        # _replace's results for the current `repl`, shared by every node and _solve call
        # until `repl` grows (a let's value is otherwise rewritten again for each clamp and
        # each occurrence: about a fifth of the local Laplacian's lowering)
        memo: dict = {}
        pending = list(order)
        changed = True
        while changed:
            changed = False
            for n in list(pending):
                occurrences = found[id(n)]
                cur = _replace(n, repl, memo)
                if any(not _conditions(cur, in_if) for in_if, _ in occurrences):
                    pending.remove(n)
                    continue            # e.g. a comparison also used outside an if's condition
                choice = None
                for k in range(len(_conditions(cur, True))):
                    bounds = []
                    for in_if, chain in occurrences:
                        _, d, r = _conditions(cur, in_if)[k]
                        b = self._solve(d, v, chain, repl, invariant and (only or "hi"), invariant_only, memo)
                        if b is None or (only is not None and b[0] != only and id(n) not in free_hi):
                            break
                        bounds.append(b)
                    else:
                        choice = (k, bounds)
                        break
                if choice is None:
                    continue
                k, bounds = choice
                repl[id(n)] = _conditions(cur, True)[k][2]
                memo = {}
                pending.remove(n)
                changed = True
                for kind, e in bounds:
                    (highs if kind == "hi" else lows).append(e)
        return repl, lows, highs

    @staticmethod
    def _solve(d: Expr, v: str, chain, repl: dict, invariant: str | bool = False,
               invariant_only: bool = False, memo: dict | None = None) -> tuple[str, Expr] | None:
        """('hi', H): d <= 0 for every inner iteration when v <= H; ('lo', L): when v >= L
        (invariant "hi" or "lo": d may not move with v at all, and the bound of that kind
        is then all or nothing).
        The lets' values are taken with the replacements already chosen (`repl`; `memo`:
        _replace's memo for that `repl`)."""
        memo = {} if memo is None else memo
        inner = {b[1] for b in chain}
        # the lets inside the loop, substituted (innermost first: values may use outer ones)
        full = d
        for b in reversed(chain):
            if b[0] == "let":
                if b[2].type != I32:
                    if b[1] in _names(full):
                        return None
                    continue
                full = _subst_var(full, b[1], _replace(b[2], repl, memo))
        full = simplify(full)
        terms: dict = {}
        order: list = []
        const = _linear(full, 1, terms, order)
        kv = _key(Var(v, I32))
        c = terms.get(kv, [None, 0])[1]
        if (c == 0 and not invariant) or (c != 0 and invariant_only):
            return None
        rest = {k: t for k, t in terms.items() if k != kv}
        for t, _ in rest.values():
            if v in _names(t):
                return None             # v also appears non-linearly
        r = _rebuild_linear(rest, [k for k in order if k != kv], const)
        # the largest r over the inner loops, innermost first (their ranges may use outer ones)
        hi = simplify(r)
        for b in reversed(chain):
            if b[1] not in _names(hi):
                continue
            if b[0] == "let":
                if b[2].type != I32:
                    return None
                hi = simplify(_subst_var(hi, b[1], b[2]))
                continue
            _, name, mn, ext = b
            last = BinOp("-", BinOp("+", mn, ext, I32), _I(1), I32)
            hi = expr_bounds(hi, {name: (simplify(mn), simplify(last))})[1]
            if hi is None:
                return None
            hi = simplify(hi)
        names = _names(hi)
        if v in names or names & inner:
            return None
        if c == 0:
            # the same for every v (a narrow region's clamp of a shifted-inwards split,
            # min(inner, extent - 1)): the whole loop is steady, or none of it
            holds = BinOp("<=", hi, _I(0), BOOL)
            if invariant == "lo":
                return ("lo", simplify(Select(holds, _I(-_WHOLE), _I(_WHOLE), I32)))
            return ("hi", simplify(Select(holds, _I(_WHOLE), _I(-_WHOLE), I32)))
        if c > 0:
            return ("hi", _b("/", _b("-", _I(0), hi), _I(c)))
        return ("lo", _b("/", _b("+", hi, _I(-c - 1)), _I(-c)))


def _narrow_lanes(s: Stmt) -> Stmt:
    """s with each vector loop `for lane in 0 .. n - 1` whose var appears only as
    `min(lane, K)` (K >= 0, the same K throughout, computed outside the loop: a narrow region's
    clamp of a shifted-inwards split) made a serial loop over the distinct lanes,
    `for lane.lanes in 0 .. min(n - 1, K)` with the clamp gone. The pinned lanes computed and stored
    copies of lane K's value, so the loop does the same work once per point, as scalar code:
    where the clamp binds (the region narrower than a vector) no lane pattern is dense, and the
    vector form was a gather per load."""
    if isinstance(s, For) and s.kind == "vectorized":
        return _narrow_loop(s)
    kids = _kids(s)
    new = [_narrow_lanes(k) for k in kids]
    return s if all(a is b for a, b in zip(new, kids)) else with_children(s, new)


def _narrow_loop(loop: For) -> Stmt:
    lane = loop.var
    if not (isinstance(loop.min, Const) and loop.min.value == 0 and isinstance(loop.extent, Const)):
        return loop
    clamps: dict[int, Expr] = {}
    bound: set = set()
    ks: list = []

    def visit(x: Stmt):
        if isinstance(x, (For, LetStmt)):
            bound.add(x.var if isinstance(x, For) else x.name)
        for e in _exprs(x):
            for n in walk(e):
                if isinstance(n, BinOp) and n.op == "min" and n.type == I32:
                    for a, k in ((n.a, n.b), (n.b, n.a)):
                        if isinstance(a, Var) and a.name == lane and lane not in _names(k):
                            clamps[id(n)] = n
                            ks.append(k)
        for k in _kids(x):
            visit(k)
    visit(loop.body)
    if not ks:
        return loop
    k0 = ks[0]
    if any(_key(k) != _key(k0) for k in ks) or _names(k0) & bound or not _non_negative(k0):
        return loop
    # every use of the lane is inside one of those clamps
    hole = Var(lane + ".clamped", I32)
    probe = _replace_stmt(loop.body, {i: hole for i in clamps})
    if any(lane in _names(e) for x in _stmts(probe) for e in _exprs(x)):
        return loop
    # (named as such: code generation keeps LLVM from vectorizing or unrolling it again)
    name = lane + NARROW_LANES
    body = _replace_stmt(loop.body, {i: Var(name, I32) for i in clamps})
    extent = _b("+", _b("min", _I(loop.extent.value - 1), k0), _I(1))
    return For(name, loop.min, extent, "serial", body)


def _stmts(s: Stmt):
    yield s
    for k in _kids(s):
        yield from _stmts(k)


def _non_negative(e: Expr) -> bool:
    if isinstance(e, Const):
        return e.value >= 0
    return isinstance(e, BinOp) and e.op == "max" and any(isinstance(x, Const) and x.value >= 0 for x in (e.a, e.b))


def _never_positive(e: Expr) -> bool:
    """Whether e <= 0 for all values of its variables (a constant, as the simplifier leaves it)."""
    return isinstance(e, Const) and e.value <= 0


def _subst_var(e: Expr, name: str, value: Expr) -> Expr:
    # (kept for the whole lowering when both are canonical: _solve substitutes the same
    # lets into the same conditions for many clamps; the local Laplacian: 3740 calls, 2316
    # distinct)
    if not (is_canonical(e) and is_canonical(value)):
        return subst_vars(e, {name: value})
    table = memo_table("subst_var")
    key = (id(e), name, id(value))
    hit = table.get(key)
    if hit is None:
        hit = table[key] = (e, value, subst_vars(e, {name: value}))
    return hit[2]


def _replace(e: Expr, repl: dict, memo: dict) -> Expr:
    """e with each node in repl replaced (top-down, so nested clamps go too)."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    if id(e) in repl:
        out = _replace(repl[id(e)], repl, memo)
    else:
        kids = e.children()
        if kids:
            new = [_replace(k, repl, memo) for k in kids]
            out = e if all(a is b for a, b in zip(new, kids)) else _fold(intern(_rebuild_expr(e, new)))
        else:
            out = e
    memo[id(e)] = (e, out)
    return out


def _rebuild_expr(e: Expr, kids: list[Expr]) -> Expr:
    from hdsl.ir.expr import rebuild
    return rebuild(e, kids)


def _fold(e: Expr) -> Expr:
    """true && x = x and friends (the simplifier leaves boolean connectives alone)."""
    if isinstance(e, BinOp) and e.op in ("&&", "||"):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(x, Const):
                if e.op == "&&":
                    return y if x.value else x
                return x if x.value else y
    return e


def _replace_stmt(s: Stmt, repl: dict, memo: dict | None = None) -> Stmt:
    memo = {} if memo is None else memo
    return map_exprs(s, lambda e: _replace(e, repl, memo))


__all__ = ["partition_loops"]
