"""The automatic scheduler: `schedule auto` and `--schedule auto`.

It works from the pipeline's structure and the sizes known at compile time: the
outputs' `estimate(v, min, extent)` directives (in the `schedule auto { ... }` block,
or `estimate`/`bound` directives of the file's other blocks), else DEFAULT_EXTENTS.
It never looks at the inputs of a call, so the schedule (and the compile cache's
object) is the same for every run.

The rules start from the 2018 paper's (Li et al., "Differentiable programming for
image processing and deep learning in Halide", section 5: checkpoint every stage
that scatters, reduces or is used twice, inline the rest, tile the checkpointed
stages with the tiles in parallel and the inner dimension vectorized, rfactor large
reductions), with what measuring the examples taught (benchmarks/RESULTS.md):

- a stage read pointwise (at the consumer's own coordinates) or cheaply (a boundary
  condition, a cast) is inlined even when read several times;
- a stencil producer read by one consumer is computed per tile of that consumer
  (`compute_at`): the tile's footprint stays in cache (the 2012 paper's tiled blur);
- a producer read at computed coordinates (a look-up table, a histogram) or through
  resampling (pyramids) is computed at the root;
- a stage whose tiles hold a half-resolution plane (camera_pipe's deinterleave) runs in
  strips of whole rows instead, a step of as many rows as the resolution factor, its
  producers computed per step and stored per strip: they slide (`strip_directives`);
  a producer of such a strip read only at its reader's own coordinates (camera_pipe's
  demosaic) is computed per vector of that reader instead (`per_vector`);
- a call in an arm of a select on a channel index or a parity counts only where that arm
  is chosen (`_arm_weights`);
- a stage at the root keeps its channels between its vector dim and its rows, in loops
  and storage (interpolate 1.16x -> 1.06-1.10x, local_laplacian 1.10-1.13x -> 1.08x of the
  hand-written schedule's time, interleaved under load);
- the vector width is two of the target's vector registers over the widest type the
  stage computes in; dims estimated at most SMALL wide (colour channels) are neither
  tiled nor vectorized, and an output's are innermost (its interleaved layout).

The result is ordinary schedule text, recorded with every check a block written in
the file gets (`Pipeline.record_text`), so `hdsl schedule FILE` prints what the
compiler runs and a user can paste and edit it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from hdsl.diagnostics import HdslError
from hdsl.ir.bounds import BoundsEnv, interval
from hdsl.ir.expr import BinOp, BufferProp, Const, FuncCall, InputCall, Param, RVar, Select, Var, walk
from hdsl.ir.func import Func, Pipeline, Schedule, calls_in, definition_exprs, pure_positions, topo_order
from hdsl.ir.printer import expr_str
from hdsl.target import parse_target

DEFAULT_EXTENTS = (1536, 1024, 4)     # an output's dims without an estimate (dims past the third: 4)
SMALL = 16                 # a dim at most this wide is a channel-like dim: not tiled, not vectorized
CHEAP = 12                 # expression nodes of a definition cheap enough to inline at every use
INLINE_BUDGET = 80         # operations per point that recomputing an inlined Func may cost (a
                           # full-size buffer's store and load cost more: interpolate's ds[0] and
                           # local_laplacian's gp[0], at ~60, ran 1.3x faster inlined)
SELECT_ARMS = True         # a call in an arm of a select on a channel or a parity counts where that
                           # arm is chosen (`_arm_weights`)
PER_VECTOR = True          # a strip's stage read pointwise computed per vector of its reader (`per_vector`)
ROOT_CHANNELS_INSIDE = True  # a root stage's channels between its vector dim and its rows
RESAMPLED_AT = True        # compute a resampled producer (x / 2) per tile of its consumer (not a
                           # pyramid level that reads a coarser computed level itself)
TILE_Y = 32
TILE_VECS = 16             # a tile's width in vectors (of vector_width lanes)
VECTORS = 2                # registers per vectorized loop iteration (two: the loads of one overlap the
                           # arithmetic of the other; unsharp 0.54-0.59x, camera_pipe 0.82x,
                           # interpolate 0.90x, local_laplacian 0.90x, blur and bilateral_grid 1.00x of
                           # the time with one, interleaved at full size, load 5-18)
TASK_POINTS = 4096         # points per parallel task of an untiled stage: small tasks balance the
                           # two cores when other processes take turns on them (interpolate with
                           # rows of 16K points: 1.31x of the hand-written schedule's time, with
                           # one row a task 1.19x, interleaved at load 15)
MAX_EXTENT = 1 << 24
# the vector register of each CPU target, in bytes (host: AVX2's, which every x86-64 hdsl targets has)
VECTOR_BYTES = {"host": 32, "x86-64-avx2": 32, "x86-64-avx512": 64}
# targets the automatic scheduler knows; a GPU target's rules plug in through `rules_for`
CPU_TARGETS = tuple(VECTOR_BYTES)


@dataclass
class _Stage:
    """What the scheduler knows of one Func."""
    f: Func
    name: str | None               # how a schedule names it (None: unnamed, left to the defaults)
    region: list[list[float]]      # estimated [lo, hi] per dim
    consumers: list[Func] = field(default_factory=list)
    calls: list[FuncCall] = field(default_factory=list)
    choice: str = "inline"         # inline, root, at, output
    at: tuple | None = None        # (consumer, loop var) for 'at'
    evals: float = 0.0             # times f is evaluated if inlined into what reads it
    strip: int = 0                 # a site whose producers slide down strips: rows per step (0: tiles)
    per_vector: int = 0            # a stage with producers computed per vector: its tiles' rows

    def extent(self, d: int) -> int:
        lo, hi = self.region[d]
        if math.isinf(lo) or math.isinf(hi):
            return MAX_EXTENT
        return int(min(MAX_EXTENT, max(1, hi - lo + 1)))


def vector_width(f: Func, target: str) -> int:
    """Lanes: VECTORS of the target's vector registers over the widest type f's pure definition
    computes in."""
    bits, seen = 8, set()
    todo = list(f.values or [])
    while todo:               # (not the index arithmetic of the loads: that is i32 whatever the data)
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        t = getattr(n, "type", None)
        if t is not None and not t.is_bool():
            bits = max(bits, t.bits)
        if not isinstance(n, (FuncCall, InputCall)):
            todo += list(n.children())
    return max(4, VECTORS * VECTOR_BYTES.get(target, 32) * 8 // bits)


def output_estimates(p: Pipeline) -> dict[int, list[tuple[int, int]]]:
    """(min, extent) per dim of each output: `estimate` / `bound` directives (the auto block's
    first), else DEFAULT_EXTENTS."""
    found: dict[int, dict[str, tuple[int, int]]] = {}
    blocks = sorted(p.schedules.values(), key=lambda s: not s.auto)
    for s in blocks:
        for f in p.outputs:
            for d in s.for_func(f):
                if d.name in ("estimate", "bound") and d.args[0] not in found.setdefault(id(f), {}):
                    lo, ext = (_const(a) for a in d.args[1:])
                    if lo is not None and ext is not None and ext > 0:
                        found[id(f)][d.args[0]] = (lo, ext)
    out = {}
    for f in p.outputs:
        got = found.get(id(f), {})
        out[id(f)] = [got.get(a, (0, DEFAULT_EXTENTS[min(i, 2)])) for i, a in enumerate(f.args)]
    return out


def _const(e):
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, int):
        return e
    return None


def _scalar(p: Pipeline, est):
    first = next(iter(est.values()), [])
    defaults = {q.name: q.default for q in p.params}

    def scalar(e):
        if isinstance(e, Param):
            return defaults.get(e.name)
        if isinstance(e, BufferProp):
            # inputs estimated as large as the first output
            if e.what == "min":
                return 0
            return first[e.dim][1] if e.dim < len(first) else DEFAULT_EXTENTS[2]
        return None
    return scalar


def analyse(p: Pipeline, target: str = "host") -> dict[int, _Stage]:
    """Each Func's estimated region (bounds inference over intervals, from the outputs'
    estimates) and its callers."""
    est = output_estimates(p)
    funcs = topo_order(p.outputs)
    stages = {id(f): _Stage(f, p.names.get(id(f)), [[math.inf, -math.inf] for _ in f.args]) for f in funcs}
    for f in p.outputs:
        stages[id(f)].region = [[lo, lo + ext - 1] for lo, ext in est[id(f)]]
    scalar = _scalar(p, est)
    for g in reversed(funcs):             # consumers first: a region is whole before its reads are
        sg = stages[id(g)]
        for d, (lo, hi) in enumerate(sg.region):
            if lo > hi:                   # read nowhere we could tell: a default size
                sg.region[d] = [0, DEFAULT_EXTENTS[min(d, 2)] - 1]
        env = BoundsEnv({a: tuple(sg.region[d]) for d, a in enumerate(g.args)}, {}, scalar)
        defs = [(list(g.values or []), None)]
        for u in g.updates:
            if u.rdom is not None:
                for i, (lo, ext) in enumerate(u.rdom.bounds):
                    a, b = interval(lo, env), interval(ext, env)
                    env.rvars[(id(u.rdom), i)] = (a[0], a[1] + b[1] - 1)
            defs.append((u.values + u.args, u))
            for d, a in enumerate(u.args):       # a scatter widens the Func's own region
                if d < len(sg.region):
                    lo, hi = interval(a, env)
                    sg.region[d] = [min(sg.region[d][0], lo), max(sg.region[d][1], hi)]
        for exprs, _u in defs:
            for c in calls_in(exprs):
                if not isinstance(c, FuncCall) or c.func is g:
                    continue
                sf = stages[id(c.func)]
                if g not in sf.consumers:
                    sf.consumers.append(g)
                sf.calls.append(c)
                for d, a in enumerate(c.args):
                    lo, hi = interval(a, env)
                    lo, hi = max(lo, -MAX_EXTENT), min(hi, MAX_EXTENT)
                    sf.region[d] = [min(sf.region[d][0], lo), max(sf.region[d][1], hi)]
    return stages


EXPENSIVE = {"exp", "log", "pow", "sin", "cos", "tan", "atan", "atan2", "sqrt", "tanh", "sinh", "cosh",
             "asin", "acos", "erf", "fast_exp", "fast_log", "fast_pow"}


def _cost(f: Func) -> int:
    """Operations of f's pure definition: a load counts once (not its index arithmetic), a
    transcendental function ten times."""
    n, seen = 0, set()
    todo = list(f.values or [])
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        n += 10 if getattr(e, "name", None) in EXPENSIVE else 1
        if not isinstance(e, (FuncCall, InputCall)):
            todo += list(e.children())
    return n


def _arg_kind(a) -> str:
    """'var' (x), 'shift' (x + 3, x + r.x), 'const', 'data' (reads a Func or input), or
    'other' (resampling, x / 2, clamps)."""
    nodes = list(walk(a))
    if any(isinstance(n, (FuncCall, InputCall)) for n in nodes):
        return "data"
    if isinstance(a, Var):
        return "var"
    if isinstance(a, Const):
        return "const"
    if all(isinstance(n, (Var, RVar, Const)) or getattr(n, "op", None) in ("+", "-") for n in nodes) \
            and sum(isinstance(n, Var) for n in nodes) <= 1:
        return "shift"
    return "other"


def _kinds(stages, calls) -> set[str]:
    """How s is read by these calls, dim by dim; a computed index into a dim at most SMALL
    wide (local Laplacian's intensity level k) is a choice among a few planes, not a gather:
    it is read as at the consumer's own coordinates."""
    out = set()
    for c in calls:
        s = stages[id(c.func)]
        for d, a in enumerate(c.args):
            k = _arg_kind(a)
            out.add("var" if k == "data" and s.extent(d) <= SMALL else k)
    return out


def _calls_reduction(f: Func) -> bool:
    """Whether f's pure definition reads an inline reduction (an unnamed Func with updates)."""
    return any(isinstance(c, FuncCall) and c.func.implicit and c.func.updates for c in calls_in(f.values or []))


def _area(s: _Stage) -> float:
    """Points over the large dims (not the channels)."""
    return float(math.prod(s.extent(d) for d in _large_dims(s))) or 1.0


def _points(s: _Stage) -> float:
    return float(math.prod(s.extent(d) for d in range(len(s.f.args)))) or 1.0


def decide(p: Pipeline, stages: dict[int, _Stage]) -> None:
    """compute_root / compute_at / inline for every Func: the 2018 rules, refined by how often
    inlining would evaluate a Func (`evals`, from the estimated regions) against its size."""
    funcs = topo_order(p.outputs)
    _CALLS.clear()
    for f in p.outputs:
        stages[id(f)].choice = "output"
    evals: dict[int, float] = {}
    hard: set[int] = set()        # Funcs that must be computed on their own (reductions, tables)
    for f in reversed(funcs):
        s = stages[id(f)]
        # how many times f is evaluated if inlined into what reads it
        n = 0.0
        for g in s.consumers:
            per = evals[id(g)] if stages[id(g)].choice in ("inline", "default") else _points(stages[id(g)])
            weights = _arm_weights(g, stages) if SELECT_ARMS else {}
            for c in _direct_calls(g):
                if c.func is f:
                    rv = {id(r.rdom): r for a in c.args for r in walk(a) if isinstance(r, RVar)}
                    n += per * (SMALL if rv else 1) * weights.get(id(c), 1.0)
        evals[id(f)] = s.evals = n
        if s.choice == "output":
            continue
        if s.name is None or f.implicit:
            # an unnamed helper or a boundary condition: the defaults decide (inline)
            s.choice = "default"
            continue
        kinds = _kinds(stages, s.calls)
        ratio = n / _points(s)
        cost = _cost(f)
        constant = all(not any(isinstance(v, Var) for a in c.args for v in walk(a)) for c in s.calls)
        if f.updates or "data" in kinds or _calls_reduction(f):
            # reduces, scatters, or is read at computed places; or its value is a reduction
            # (`sum(...)`): computed on its own, the reduction's loop runs under the vector
            # loop of its points (inlined, a serial loop per point)
            s.choice = "root"
            hard.add(id(f))
        elif constant and cost > 4:
            s.choice = "root"             # read at the same few points everywhere: a table
            hard.add(id(f))
        elif ratio <= 1.01 or (ratio <= 2.5 and cost <= 2 * CHEAP) or (ratio <= 4 and cost <= 3):
            s.choice = "inline"           # computed about once per point anyway, or as cheap as a load
        else:
            s.choice = "root"
        if s.choice == "inline":
            evals[id(f)] = n
    # a stencil producer whose readers are all computed per tile of one stage: computed per
    # tile of that stage too
    for f in reversed(funcs):
        s = stages[id(f)]
        if s.choice != "root" or f.updates or not _large_dims(s):
            continue
        users = _scheduled_users(f, stages)
        if not users:
            continue
        kinds = _kinds(stages, [c for u in users for c in _reads_through_inlined(f, u, stages)])
        if "data" in kinds:
            continue
        # where each user is computed: per tile of a root stage, or where it is computed at
        sites = set()
        for u in users:
            g = stages[id(u)]
            if g.choice in ("output", "root") and len(_large_dims(g)) >= 2 and not g.f.updates:
                sites.add((g.f, g.f.args[_large_dims(g)[0]]))
            elif g.choice == "at":
                sites.add(g.at)
            else:
                sites.add(None)
        if len(sites) == 1 and None not in sites:
            site = next(iter(sites))
            # resampled (x / 2, 2 * x): only between neighbouring resolutions, not a deep
            # pyramid's levels (a coarse level per fine tile is mostly recomputation)
            if kinds <= {"var", "shift", "const"}:
                s.choice, s.at = "at", site
            elif RESAMPLED_AT and _area(s) * 8 >= _area(stages[id(site[0])]) and not _reads_resampled(f, stages):
                s.choice, s.at = "at", site
                # a half-resolution plane inside a full-resolution stage's tiles: strips
                g, k = stages[id(site[0])], _resampling_factor([c for u in users for c in
                                                                _reads_through_inlined(f, u, stages)], stages)
                if k > 1:
                    g.strip = max(g.strip, k)
    # a cheap Func that would be a whole buffer at the root: inlined unless recomputing it
    # costs more than INLINE_BUDGET operations per point (memory traffic costs more)
    for f in funcs:
        s = stages[id(f)]
        if s.choice == "root" and id(f) not in hard and s.at is None:
            if _inlined_cost(f, stages, {}) * evals[id(f)] / _points(s) <= INLINE_BUDGET \
                    and not _has_at_users(f, stages):
                s.choice = "inline"


def per_vector(p: Pipeline, stages: dict[int, _Stage]) -> None:
    """A producer P computed per step of a strip whose one reader U, computed per step of the
    same strip, reads it only at U's own coordinates in every large dim (camera_pipe's
    demosaic, read by the colour correction at (x, y, 0..2), inlined into the tone curve):
    nothing of P is shared between U's neighbouring points, so P is computed per vector of U
    (`compute_at(U, x)`), in registers and L1, not as rows of the strip. U is tiled a vector
    wide and the strip's step high (`tile(x, y, x, y, x_i, y_i, vec, k, round_up)`, y_i
    unrolled), so that P's rows of a step, which read the same rows of the half-resolution
    planes (y / k), are computed together; the named Funcs inlined between P and U (the
    colour correction) are computed per vector too. U's tiles are rounded up (a constant
    vector for P), so only where U and what is computed in its tiles may be computed past
    their region (`_tile_reads_in_bounds`: no updates, the inputs they read themselves read
    through a boundary condition; what is computed outside the tiles is computed only over
    what U's region needs, as Halide's RoundUp).
    camera_pipe at 2560x1920, interleaved at loads 4-13: 1.36-1.47x of the hand-written
    schedule's time without this rule (and `_arm_weights`), 1.07-1.09x with it; the colour
    correction left inlined: +10%; U's tiles one row high: +5-9%; U's channels outside its
    tiles (each channel recomputing P): no gain at all."""
    funcs = topo_order(p.outputs)
    for f in reversed(funcs):
        s = stages[id(f)]
        if s.choice != "at" or f.updates or not stages[id(s.at[0])].strip:
            continue
        site = stages[id(s.at[0])]
        users = _scheduled_users(f, stages)
        if len(users) != 1:
            continue
        u = stages[id(users[0])]
        if u.choice != "at" or u.at[0] is not site.f or u.f.updates or len(_large_dims(u)) < 2:
            continue
        between = _between(f, u.f, stages)
        if not all(_pointwise(stages[id(g)], _reads_through_inlined(g, u.f, stages)) for g in [f] + between):
            continue
        if not _tile_reads_in_bounds(u.f, stages, frozenset(u.f.args[d] for d in _large_dims(u)[:2]),
                                     {id(g) for g in [f] + between}):
            continue
        x = u.f.args[_large_dims(u)[0]]
        u.per_vector = site.strip
        s.at = (u.f, x)
        for g in between:
            if stages[id(g)].choice == "inline":
                stages[id(g)].choice, stages[id(g)].at = "at", (u.f, x)


def _pointwise(s: _Stage, calls) -> bool:
    """Whether these calls of s read it only at the caller's own coordinates (the same
    vars, unshifted) in each of s's two or more large dims."""
    large = _large_dims(s)
    return len(large) >= 2 and bool(calls) and all(
        _arg_kind(c.args[d]) == "var" and c.args[d].name == s.f.args[d] for c in calls for d in large)


def _between(f: Func, user: Func, stages) -> list[Func]:
    """The inlined Funcs on the way from f to `user`."""
    out, todo = [], list(stages[id(f)].consumers)
    while todo:
        g = todo.pop()
        if g is user or g in out or stages[id(g)].choice not in ("inline", "default"):
            continue
        out.append(g)
        todo += stages[id(g)].consumers
    return out


def _tile_reads_in_bounds(f: Func, stages, dims: frozenset, inside: set, seen=None) -> bool:
    """Whether f, computed in rounded-up tiles (past the region its readers need along its vars
    `dims`), reads no input past its end. As Halide's RoundUp (lower/symbolic.py, Required), a
    Func computed outside the tiles is computed over what f's region needs, not past it (the
    tiles' extra lanes read its storage and are never used), so only f and what is computed
    with it count: the Funcs inlined into it and those computed per tile (`inside`, by id).
    Those have no update and are no output, and read an input at a coordinate that moves with
    `dims` only through a clamp to bounds free of them (a boundary condition)."""
    from hdsl.ir.expr import free_vars
    from hdsl.lower.loops import _clamped
    seen = set() if seen is None else seen
    if (id(f), dims) in seen:
        return True
    seen.add((id(f), dims))
    if f.updates or stages[id(f)].choice == "output":
        return False
    for n in (m for e in (f.values or []) for m in walk(e)):
        if isinstance(n, FuncCall) and n.func is not f and \
                (id(n.func) in inside or stages[id(n.func)].choice in ("inline", "default")):
            moved = frozenset(n.func.args[i] for i, a in enumerate(n.args) if free_vars(a) & dims)
            if moved and not _tile_reads_in_bounds(n.func, stages, moved, inside, seen):
                return False
        if isinstance(n, InputCall) and any(free_vars(a) & dims and not _clamped(a, dims) for a in n.args):
            return False
    return True


def _arm_share(cond, s: _Stage):
    """(key, n) when `cond` picks one of n classes of s's points by a channel index or a
    parity: `c == k` with c a dim at most SMALL wide (n: its extent), `v % m == k` (n: m);
    None for any other condition."""
    if not (isinstance(cond, BinOp) and cond.op == "==" and isinstance(cond.b, Const)):
        return None
    a = cond.a
    if isinstance(a, Var) and a.name in s.f.args:
        ext = s.extent(s.f.args.index(a.name))
        return (a.name, ext) if ext <= SMALL else None
    if isinstance(a, BinOp) and a.op == "%" and isinstance(a.a, Var) and isinstance(a.b, Const) \
            and isinstance(a.b.value, int) and a.b.value > 1:
        return ((a.a.name, a.b.value), a.b.value)
    return None


def _arm_weights(g: Func, stages) -> dict[int, float]:
    """For each call in g's pure definition, the share of g's points that evaluate it: a call
    in an arm of a `select` on a channel index or a parity (camera_pipe's `c == 0` among
    three channels, its interleaves' `x % 2 == 0`) is evaluated only where that arm is
    chosen, since the code generator computes each arm only on its points (a condition the
    same on every lane branches; one the same on every k-th lane computes each lane set with
    its own arm). In the else arm of `c == k` the next test of c chooses among one class
    fewer (mux chains). A call reached by several paths keeps the largest share."""
    out: dict[int, float] = {}
    s = stages[id(g)]
    todo, seen = [(e, 1.0, ()) for e in (g.values or [])], set()
    while todo:
        e, w, excl = todo.pop()
        if (id(e), w, excl) in seen:
            continue
        seen.add((id(e), w, excl))
        if isinstance(e, FuncCall):
            out[id(e)] = max(out.get(id(e), 0.0), w)
            todo += [(a, w, excl) for a in e.args]
            continue
        if isinstance(e, Select):
            got = _arm_share(e.cond, s)
            if got is not None:
                key, n = got
                left = max(1, n - sum(1 for k in excl if k == key))
                todo += [(e.cond, w, excl), (e.t, w / left, excl), (e.f, w * (left - 1) / left, excl + (key,))]
                continue
        todo += [(ch, w, excl) for ch in e.children()]
    return out


def _resampling_factor(calls, stages) -> int:
    """The largest constant that these calls' coordinates multiply or divide a var by in a
    large dim (deinterleaved(x, y, c) = denoised(2 * x, ...): 2; not a channel's `4 * c`),
    at most TILE_Y; 1 without any."""
    k = 1
    for c in calls:
        for d, a in enumerate(c.args):
            if stages[id(c.func)].extent(d) <= SMALL:
                continue
            for n in walk(a):
                if getattr(n, "op", None) in ("*", "/") and any(isinstance(m, Var) for m in walk(n)):
                    for m in n.children():
                        if isinstance(m, Const) and isinstance(m.value, int) and 1 < m.value <= TILE_Y:
                            k = max(k, int(m.value))
    return k


def _reads_resampled(f: Func, stages, seen=None) -> bool:
    """Whether f reads a computed (not inlined) Func through upsampled coordinates (x / 2),
    through what is inlined into it: a pyramid level reading a coarser level. Computed per
    tile of the finer level, it runs 1.4-2x slower than at the root (interpolate's it[1..5],
    local_laplacian's og[1..5], measured)."""
    seen = set() if seen is None else seen
    for c in calls_in(f.values or []):
        if not isinstance(c, FuncCall) or c.func is f or id(c.func) in seen:
            continue
        seen.add(id(c.func))
        g = stages[id(c.func)]
        if g.choice in ("inline", "default") and not c.func.updates:
            if _reads_resampled(c.func, stages, seen):
                return True
        elif any(_arg_kind(a) == "other" and any(getattr(n, "op", None) in ("/", ">>") for n in walk(a))
                 for a in c.args):
            return True
    return False


def _inlined_cost(f: Func, stages, memo: dict) -> float:
    """f's cost with what is inlined into it (each call of an inlined Func at its cost)."""
    if id(f) in memo:
        return memo[id(f)]
    n = float(_cost(f))
    for c in calls_in(f.values or []):
        if isinstance(c, FuncCall) and c.func is not f and not c.func.updates \
                and stages[id(c.func)].choice in ("inline", "default"):
            n += _inlined_cost(c.func, stages, memo)
    memo[id(f)] = n
    return n


def _has_at_users(f: Func, stages) -> bool:
    """Whether some Func is computed inside f's loops."""
    return any(s.choice == "at" and s.at[0] is f for s in stages.values())


def _scheduled_users(f: Func, stages) -> list[Func]:
    """The Funcs computing what f is read for: its consumers, through inlined ones."""
    out, seen, todo = [], set(), list(stages[id(f)].consumers)
    while todo:
        g = todo.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        if stages[id(g)].choice in ("inline", "default") and g not in out:
            todo += stages[id(g)].consumers
        elif g not in out:
            out.append(g)
    return out


def _reads_through_inlined(f: Func, user: Func, stages, seen=None) -> list[FuncCall]:
    """f's calls on the way to `user` (those of the inlined Funcs between them included)."""
    seen = set() if seen is None else seen
    if id(f) in seen:
        return []
    seen.add(id(f))
    out = []
    for g in stages[id(f)].consumers:
        out += [c for c in stages[id(f)].calls if c in _direct_calls(g)]
        if g is not user:
            out += _reads_through_inlined(g, user, stages, seen)
    return out


_CALLS: dict[int, tuple] = {}


def _direct_calls(g: Func) -> set:
    got = _CALLS.get(id(g))
    if got is None or got[0] is not g:
        got = (g, {c for c in calls_in(definition_exprs(g)) if isinstance(c, FuncCall)})
        _CALLS[id(g)] = got
    return got[1]


def _large_dims(s: _Stage) -> list[int]:
    return [d for d in range(len(s.f.args)) if s.extent(d) > SMALL]


def _loops(s: _Stage, p: Pipeline, target: str, tiled: bool, stages: dict) -> list[str]:
    """Directives shaping one computed stage's pure loops: tiles of TILE_Y rows and 8 vectors
    when something is computed per tile, the tiles (else rows, in tasks of ~TASK_POINTS) in
    parallel, the innermost large dim vectorized."""
    vec = vector_width(s.f, target)
    large = _large_dims(s)
    if s.per_vector:
        return per_vector_directives(s, vec)
    if s.choice == "at" and stages[id(s.at[0])].per_vector:
        return per_vector_directives(s, 0)
    if tiled and s.strip and len(large) >= 2:
        return strip_directives(s, vec)
    tile = (max(TILE_VECS * vec, 64), TILE_Y) if tiled else None
    par = None
    if s.choice != "at" and len(large) >= 2 and _points(s) >= 64 * 64:
        rows = _points(s) / s.extent(large[-1])
        par = max(1, min(64, -(-TASK_POINTS // max(1, int(rows)))))
    small = [d for d in range(len(s.f.args)) if d not in large]
    if ROOT_CHANNELS_INSIDE and s.choice == "root" and tile is None and small and len(large) >= 2 \
            and large[0] == 0 and not s.f.updates:
        # channels between the vector dim and the rows, in the loops and in storage
        order = ", ".join(s.f.args[d] for d in [large[0]] + small + large[1:])
        return [f"reorder_storage({order})", f"reorder({order})"] + loop_directives(s, vec, tile, par)
    return loop_directives(s, vec, tile, par)


def strip_directives(s: _Stage, vec: int) -> list[str]:
    """A site whose producers slide: strips of TILE_Y whole rows in parallel (y), each
    computed s.strip rows a step (y_i; the split y_ii), its innermost large dim vectorized.
    Its producers are computed per step and stored per strip (`compute_at(S, y_i)
    .store_at(S, y)`), so each of their rows is computed once per strip, not once per tile
    and again in the next tile's halo; a step of as many rows as the producers' resolution is
    coarser (2: camera_pipe's half-resolution planes) computes one row of each plane per step
    (camera_pipe at 2560x1920, single-threaded CPU time, interleaved: 17.4 ms against the
    tiles' 19.1, the hand-written schedule's 13.4; steps of one row measured 0.92x of the
    tiles against 0.90x for two). Full-resolution stencil chains keep their tiles: harris in
    strips took 2.1x the tiles' CPU time.
    """
    f = s.f
    large = _large_dims(s)
    small = [d for d in range(len(f.args)) if d not in large]
    x, y = f.args[large[0]], f.args[large[1]]
    out = []
    if small and (s.choice == "output" or large[0] != 0):
        out.append(f"reorder({', '.join([f.args[d] for d in small] + [f.args[d] for d in large])})")
    if s.strip > 1:
        out.append(f"split({y}, {y}, {y}_ii, {s.strip}).split({y}, {y}, {y}_i, {max(1, TILE_Y // s.strip)})")
    else:
        out.append(f"split({y}, {y}, {y}_i, {TILE_Y})")
    if vec and s.extent(large[0]) >= vec:
        out.append(f"vectorize({x}, {vec})")
    out.append(f"parallel({y})")
    return out


def per_vector_directives(s: _Stage, vec: int) -> list[str]:
    """The loops of a stage with producers computed per vector (vec: its lanes): tiles a
    vector wide and s.per_vector rows high, rounded up, the rows unrolled; those of such a
    producer (vec 0): its whole region (one vector of the reader, its rows) vectorized and
    unrolled. Channel-like dims innermost in both (Halide's camera_pipe schedule's order):
    outside the tiles, they would compute the producers once per channel of the reader
    (camera_pipe: 1.42x of the hand-written schedule's time against 1.09x, interleaved)."""
    f = s.f
    large = _large_dims(s)
    small = [d for d in range(len(f.args)) if d not in large]
    x, y = f.args[large[0]], f.args[large[1]]
    out = [f"reorder({', '.join(f.args[d] for d in small + large)})"] if small else []
    if vec:
        return out + [f"tile({x}, {y}, {x}, {y}, {x}_i, {y}_i, {vec}, {s.per_vector}, round_up)",
                      f"vectorize({x}_i)", f"unroll({y}_i)"]
    return out + [f"vectorize({x})", f"unroll({y})"]


def loop_directives(s: _Stage, vec: int, tile: tuple | None, par: int | None) -> list[str]:
    """reorder / tile / vectorize / parallel of one stage's pure loops: `tile` (w, h) over its
    two outer large dims, `vec` lanes of the innermost (0: none), `par` the outermost large dim
    in parallel in tasks of that many rows (None: serial)."""
    f = s.f
    large = _large_dims(s)
    small = [d for d in range(len(f.args)) if d not in large]
    out = []
    if not large:
        return out
    x = f.args[large[0]]
    if small and (s.choice == "output" or large[0] != 0):
        # channel-like dims innermost for an output (interleaved); an intermediate keeps
        # them outermost (planes, as it stores them)
        order = [f.args[d] for d in small] + [f.args[d] for d in large]
        out.append(f"reorder({', '.join(order)})")
    outer = f.args[large[-1]]
    if tile is not None and len(large) >= 2:
        y = f.args[large[1]]
        out.append(f"tile({x}, {y}, {x}_i, {y}_i, {tile[0]}, {tile[1]})")
        if vec:
            out.append(f"vectorize({x}_i, {vec})")
        if par is not None:
            out.append(f"parallel({outer})")
        return out
    if vec and s.extent(large[0]) >= vec:
        out.append(f"vectorize({x}, {vec})")
    if par is not None and len(large) >= 2:
        out.append(f"parallel({outer}, {par})" if par > 1 else f"parallel({outer})")
    return out


def _update_loops(s: _Stage, i: int) -> list[str]:
    """An update's loops: its channel-like pure dims (at most SMALL) innermost, inside the
    reduction's loops (by default they are outermost: a histogram's two channels would each
    sweep the image, and the parallel loop would start once per channel), then the outermost
    large pure dim in parallel. bilateral_grid's histogram: 1.19x -> 0.95x of the hand-written
    schedule's time (which orders it so too), measured interleaved."""
    f = s.f
    u = f.updates[i]
    pure = [a for _, a in pure_positions(f, u)]
    large = [a for a in pure if s.extent(f.args.index(a)) > SMALL]
    small = [a for a in pure if a not in large]
    out = []
    if small and large and u.rdom is not None and u.iir is None:
        rv = [RVar(u.rdom, k).name for k in range(len(u.rdom.bounds))]
        out.append(f"reorder({', '.join(small + rv + large)})")
    if large and math.prod(s.extent(f.args.index(a)) for a in large) >= 64 * 64:
        out.append(f"parallel({large[-1]})")
    return out


def estimate_lines(p: Pipeline) -> list[str]:
    est = output_estimates(p)
    return [f"{p.names.get(id(f), f.name)}.estimate({a}, {lo}, {ext})"
            for f in p.outputs for a, (lo, ext) in zip(f.args, est[id(f)])]


def scheduled_stages(p: Pipeline, stages):
    """(Func, its stage) of every Func the automatic schedule writes a chain for, consumers
    first (the CPU rules' and the GPU rules' (auto_gpu.py) common walk)."""
    for f in reversed(topo_order(p.outputs)):
        s = stages[id(f)]
        if s.name is not None and s.choice != "default":
            yield f, s


def auto_genes(p: Pipeline, target: str = "host") -> dict[str, list[str]]:
    """The automatic schedule's chains, by the name of the Func they schedule (consumers first)."""
    if rules_for(target) in ("cuda", "opengl"):
        from hdsl.schedule.auto_gpu import gpu_genes       # (the GPU rules' own module)
        return gpu_genes(p, target)
    stages = analyse(p, target)
    decide(p, stages)
    if PER_VECTOR:          # (CPU loops: not in `decide`, which the GPU rules and tune share)
        per_vector(p, stages)
    tiled_roots = {id(s.at[0]) for s in stages.values() if s.choice == "at"}
    genes: dict[str, list[str]] = {}
    for f, s in scheduled_stages(p, stages):
        lines, chain = [], []
        if s.choice == "inline":
            if f.updates:
                continue
            chain.append("compute_inline()")
        elif s.choice == "root":
            chain.append("compute_root()")
        elif s.choice == "at":
            g, v = s.at
            gs, gname = stages[id(g)], p.names.get(id(g), g.name)
            if gs.strip:       # computed per step of its strip, stored for the strip: it slides
                y = g.args[_large_dims(gs)[1]]
                chain.append(f"compute_at({gname}, {y}_i).store_at({gname}, {y})")
            else:
                chain.append(f"compute_at({gname}, {v})")
        if s.choice != "inline":
            chain += _loops(s, p, target, id(f) in tiled_roots, stages)
        if chain:
            lines.append(f"{s.name}." + ".".join(chain))
        if s.choice in ("root", "output"):
            for i in range(len(f.updates)):
                ul = _update_loops(s, i)
                if ul:
                    lines.append(f"{s.name}.update({i})." + ".".join(ul))
        genes[s.name] = lines
    return genes


def auto_text(p: Pipeline, target: str = "host") -> str:
    """The automatic schedule for `target`, as schedule text (one chain a line)."""
    genes = auto_genes(p, target)
    return "\n".join(estimate_lines(p) + [line for lines in genes.values() for line in lines]) + "\n"


def rules_for(target: str) -> str:
    """The hook for targets: "cpu", the rules above, for every CPU target; "cuda" for the
    CUDA targets and cuda-emulate, "opengl" for opengl (its compute path), whose gpu_tile
    rules are hdsl/schedule/auto_gpu.py's (with each target's limits)."""
    if parse_target(target).arch in ("cuda", "opengl"):
        return parse_target(target).arch
    if parse_target(target).base not in CPU_TARGETS:
        raise HdslError(f"the automatic scheduler has no rules for target '{target}' yet", None,
                        "it schedules for the CPU (host, x86-64-avx2, x86-64-avx512) and the GPU (cuda, "
                        "cuda-sm_80, cuda-sm_90, cuda-emulate, opengl); write a "
                        "`schedule NAME { ... }` block for this target")
    return "cpu"


def auto_schedule(p: Pipeline, target: str = "host") -> Schedule:
    """The automatic schedule as a Schedule of p's Funcs (cached on p per target)."""
    base = parse_target(target).base
    cache = p.__dict__.setdefault("_auto_schedules", {})
    if base not in cache:
        text = auto_text(p, base)
        try:
            sched = p.record_text(text, "generated")
        except HdslError as e:       # a rule broke a check: a bug here, said as such
            raise AssertionError(f"the automatic schedule of '{p.name}' was refused:\n{e.render()}\n{text}")
        sched.name, sched.auto, sched.text = "auto", True, text
        cache[base] = sched
    return cache[base]


# ---- schedule text from a Schedule (`hdsl schedule FILE --schedule NAME`) ------------------------

def _arg_text(p: Pipeline, a) -> str:
    if isinstance(a, Func):
        return p.names.get(id(a), a.name)
    if isinstance(a, bool):
        return str(a).lower()
    if isinstance(a, (int, str)):
        return str(a)
    return expr_str(a)


def schedule_text(p: Pipeline, sched: Schedule) -> str:
    """A recorded schedule as text that records to the same directives: one chain per Func
    and stage, in the order written."""
    if getattr(sched, "text", None) is not None:
        return sched.text
    lines = []
    for fid, ds in sched.directives.items():
        f = sched.funcs[fid]
        name = p.names.get(fid)
        if name is None:
            raise HdslError(f"the schedule names '{f.name}', which no name in the file reaches", None)
        stage, chain = None, []
        for d in ds:
            if d.stage != stage and chain:
                lines.append(name + ("" if stage < 0 else f".update({stage})") + "." + ".".join(chain))
                chain = []
            stage = d.stage
            args = [_arg_text(p, a) for a in d.args] + ([d.tail] if d.tail else [])
            chain.append(f"{d.name}({', '.join(args)})")
        if chain:
            lines.append(name + ("" if stage < 0 else f".update({stage})") + "." + ".".join(chain))
    return "\n".join(lines) + "\n"


def block_text(text: str, name: str, comment: str | None = None) -> str:
    body = "".join(f"    {line}\n" for line in text.splitlines() if line.strip())
    head = f"# {comment}\n" if comment else ""
    return f"{head}schedule {name} {{\n{body}}}\n"
