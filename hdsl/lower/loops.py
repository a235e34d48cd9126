"""Loop-nest synthesis: each Func's stages as loops shaped by its schedule,
injected at its compute level, with storage at its store level.

Assumes: definitions already have inline Funcs substituted (inline.py).
Guarantees: every Func is produced before it is consumed, over a region
that covers what its consumers read (bounds inference by symbolic interval
analysis of the consumers' loop body, lower/symbolic.py) plus what its own
update definitions touch. Loop vars are named `f.s<stage>.<var>`; each
Func's region is bound by LetStmts `f.s0.<var>.min/max` around its
production, so producers of producers see it symbolically.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hdsl.diagnostics import HdslError, Span
from hdsl.ir.expr import BinOp, Const, Expr, FuncCall, RVar, Select, Var, free_vars, substitute, walk
from hdsl.ir.func import Directive, Func, Schedule, inner_loop_name, pure_positions, tile_parts
from hdsl.ir.simplify import simplify
from hdsl.ir.stmt import (GPU_BLOCK, GPU_THREAD, Assert, Block, For, IfThenElse, LetStmt, Provide, Realize, RuntimeFold, Stmt,
                          block, children, own_exprs, with_children)
from hdsl.ir.types import BOOL, I32
from hdsl.lower.inline import Definitions
from hdsl.lower.symbolic import Required, box_of, expr_bounds

ERR_INPUT_BOUNDS = 1
ERR_OUTPUT_BOUNDS = 2
ERR_BOUND_DIRECTIVE = 3
ERR_OUT_OF_MEMORY = 4
ERR_BAD_BUFFER = 5
ERR_BUFFER_TOO_LARGE = 6        # 2^31 elements or more: offsets are 32-bit
# sliding windows of varying height bounded by a constant are folded too (slide; a switch
# for benchmarks/alias_ab.py)
BOUNDED_FOLDS = True
# a sliding window whose height no rule bounds by a constant (camera_pipe's planes, below a
# rounded-up tone curve) is folded by the smallest power of two that holds its largest window,
# found at run time before the sliding loop (RuntimeFold; lower.py runtime_fold); False: such
# storage holds every row the loop computes (a switch for benchmarks/alias_ab.py)
RUNTIME_FOLDS = True
ERR_FOLD_TOO_SMALL = 10         # a fold_storage factor under the rows a sliding window holds
ERR_FLOAT_COORDINATE = 11       # a coordinate computed through floats may be NaN or beyond +-2^30


def V(name: str) -> Var:
    return Var(name, I32)


def I(v: int) -> Const:
    return Const(I32, v)


def add(a, b):
    return simplify(BinOp("+", a, b, I32))


def sub(a, b):
    return simplify(BinOp("-", a, b, I32))


def mul(a, b):
    return simplify(BinOp("*", a, b, I32))


def div(a, b):
    return simplify(BinOp("/", a, b, I32))


def monotonic(e: Expr, y: str) -> int | None:
    """How integer expression e moves as var y grows: 1 never down, -1 never up, 0 not at
    all, None unknown. (Floor division by a positive constant, min and max keep the
    direction, so `(min(y, m) + 1) / 2` moves forward although its step is 0 or 1.)"""
    from hdsl.ir.expr import Cast

    def comb(a, b):
        if a is None or b is None:
            return None
        if a == 0 or a == b:
            return b
        return a if b == 0 else None

    def neg(a):
        return None if a is None else -a

    def go(n):
        if y not in free_vars(n):
            return 0
        if isinstance(n, Var):
            return 1 if n.name == y else None
        if isinstance(n, Cast):
            return go(n.value) if n.type.is_int() and n.value.type.is_int() and n.type.bits >= n.value.type.bits \
                and not n.saturate else None
        if isinstance(n, BinOp):
            if n.op == "+":
                return comb(go(n.a), go(n.b))
            if n.op == "-":
                return comb(go(n.a), neg(go(n.b)))
            if n.op in ("min", "max"):
                return comb(go(n.a), go(n.b))
            if n.op in ("*", "/") and isinstance(n.b, Const) and n.b.type.is_int():
                k = n.b.value
                m = go(n.a)
                return 0 if k == 0 else (m if k > 0 else neg(m))
            if n.op == "*" and isinstance(n.a, Const) and n.a.type.is_int():
                k = n.a.value
                return 0 if k == 0 else (go(n.b) if k > 0 else neg(go(n.b)))
            return None
        if isinstance(n, Select) and y not in free_vars(n.cond):
            return comb(go(n.t), go(n.f))
        if isinstance(n, Select) and isinstance(n.cond, BinOp) and n.cond.op == "<=" and \
                isinstance(n.cond.a, Var) and n.cond.a.name == y and y not in free_vars(n.cond.b) and \
                isinstance(n.f, BinOp) and n.f.op == "max" and n.t in (n.f.a, n.f.b) and \
                go(n.t) == 1 and go(n.f) == 1:
            # a slid window's start, select(y <= first, lo, max(lo, …)): never below lo,
            # which never goes down, and then moving up
            return 1
        if isinstance(n, Select) and isinstance(n.cond, BinOp) and n.cond.op == "<=" and \
                isinstance(n.cond.a, Var) and n.cond.a.name == y and y not in free_vars(n.cond.b) and \
                go(n.t) in (0, 1) and go(n.f) in (0, 1) and (k := diff_upper(n.t, n.f)) is not None and k <= 0:
            # the same where the simplifier has resolved the max (select(y <= first, lo, lo + 1)
            # from an upsampling consumer's slid start): two arms that never go down, the later
            # never below the earlier
            return 1
        return None
    return go(e)


@dataclass
class Level:
    """Where a Func is computed or stored: root, inline, or inside loop `var` of `func`'s stage."""
    kind: str                    # 'root', 'inline', 'at'
    func: Func | None = None
    var: str | None = None
    span: Span | None = field(default=None, compare=False)      # the directive, for errors


@dataclass
class FuncSchedule:
    compute: Level
    store: Level
    stages: dict[int, list[Directive]] = field(default_factory=dict)   # -1 pure, i update i
    bounds: dict[str, tuple[Expr, Expr]] = field(default_factory=dict)
    folds: dict[str, Directive] = field(default_factory=dict)       # fold_storage(v, n), by v


def func_schedules(funcs: list[Func], outputs: list[Func], sched: Schedule | None) -> dict[int, FuncSchedule]:
    out = {}
    for f in funcs:
        ds = sched.for_func(f) if sched is not None else []
        compute = Level("root") if f in outputs else Level("inline")
        store = None
        fs = FuncSchedule(compute, compute)
        for d in ds:
            if d.name == "compute_root":
                compute = Level("root")
            elif d.name == "compute_inline":
                compute = Level("inline")
            elif d.name == "compute_at":
                compute = Level("at", d.args[0], d.args[1], d.span)
            elif d.name == "store_root":
                store = Level("root")
            elif d.name == "store_at":
                store = Level("at", d.args[0], d.args[1], d.span)
            elif d.name == "bound":
                fs.bounds[d.args[0]] = (d.args[1], d.args[2])
            elif d.name == "fold_storage":
                fs.folds[d.args[0]] = d
            else:
                fs.stages.setdefault(d.stage, []).append(d)
        if compute.kind == "inline" and f.updates:
            # as in Halide: a reduction left unscheduled is computed where it is used, innermost
            compute = Level("innermost")
        fs.compute = compute
        fs.store = store or compute
        out[id(f)] = fs
    return out


class _StageShape:
    """The loops of one stage as directives reshape them (innermost first)."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.dims: list[str] = []          # user names, innermost first
        self.internal: dict[str, str] = {}  # user name -> internal loop var name
        self.bounds: dict[str, tuple[Expr, Expr]] = {}   # internal -> (min, extent)
        self.kinds: dict[str, str] = {}
        self.lets: list[tuple[str, Expr]] = []            # internal name := expr (creation order)
        self.guards: list[Expr] = []
        self.versions: dict[str, int] = {}
        # unroll/vectorize of a whole loop whose extent is not constant here: decided once
        # bounds inference has given the loop's range (internal name -> (directive, var))
        self.deferred: dict[str, tuple] = {}
        self.shifted: list[tuple[str, int]] = []         # (var, factor) of splits shifted inwards
        self.shift_outer: dict[str, int] = {}     # outer loops of shift_inwards splits -> factor
        # let name -> (value with the region-end clamp, value without): see strip_region_clamps
        self.region_clamps: dict[str, tuple[Expr, Expr]] = {}
        self.clamped_inner: dict[str, str] = {}     # a shifted split's inner loop -> its clamp's let
        # rounded-up splits: let name -> (its point clamped to the region's end, the outer
        # loop var); see required_values
        self.roundup: dict[str, tuple[Expr, str]] = {}

    def fresh(self, user: str) -> str:
        n = self.versions.get(user, 0)
        self.versions[user] = n + 1
        return self.prefix + user + (f"${n}" if n else "")

    def add_dim(self, user: str, lo: Expr, ext: Expr, internal: str | None = None):
        name = internal or self.fresh(user)
        self.dims.append(user)
        self.internal[user] = name
        self.bounds[name] = (lo, ext)

    def split(self, v: str, vo: str, vi: str, n: int, tail: str):
        old = self.internal[v]
        lo, ext = self.bounds[old]
        i = self.dims.index(v)
        outer, inner = self.fresh(vo), self.fresh(vi)
        self.dims[i:i + 1] = [vi, vo]
        self.internal[vo], self.internal[vi] = outer, inner
        self.bounds[outer] = (I(0), div(add(ext, I(n - 1)), I(n)))
        self.bounds[inner] = (I(0), I(n))
        kind = self.kinds.pop(old, None)
        if kind:
            self.kinds[outer] = kind
        base = mul(V(outer), I(n))
        e = simplify(ext)
        if isinstance(e, Const) and e.value % n == 0:
            tail = "exact"          # the factor divides a constant extent: no tail at all
        if tail == "roundup_after_shift":
            tail = "roundup"        # (the shifted split below clamps what this one rounds up)
        elif tail == "shift_inwards":
            # later splits of the outer loop by no more than n may round up: a tile past the
            # end is clamped by this split's shift (Halide's rule in Func.cpp, Stage::split)
            self.shift_outer[vo] = n
        if tail == "shift":
            base = simplify(BinOp("min", base, sub(ext, I(n)), I32))
            self.shifted.append((v, n))
        elif tail in ("shift_inwards", "shift_expand"):
            # Halide's ShiftInwards: the last tile ends at the extent's end, recomputing a few
            # points; a region narrower than n (no whole tile fits) clamps the inner var
            # instead, so nothing outside [lo, lo + ext) is ever computed or read. In the
            # steady state both clamps are no-ops that partition_loops removes.
            # shift_expand, ShiftInwards as Halide has it: a narrow region is computed a
            # whole tile wide, starting n - ext points before it (the region grows; see
            # LoopBuilder.expandable for when that is allowed). Every lane a distinct point:
            # dense loads and stores where the clamped form has a gather and a scatter.
            if tail == "shift_expand":
                inner_value = V(inner)
                base = simplify(BinOp("min", base, sub(ext, I(n)), I32))
            elif isinstance(e, Const) and e.value < n:
                inner_value = simplify(BinOp("min", V(inner), I(e.value - 1), I32))
                base = I(0)
            else:
                # (min(inner, max(e - 1, 0)): its lower bound simplifies to 0)
                inner_value = V(inner) if isinstance(e, Const) else \
                    simplify(BinOp("min", V(inner), BinOp("max", sub(ext, I(1)), I(0), I32), I32))
                base = simplify(BinOp("min", base, sub(ext, I(n)), I32))
                if not isinstance(e, Const):
                    base = simplify(BinOp("max", base, I(0), I32))
            point = add(lo, add(base, inner_value))
            if not isinstance(e, Const):
                # The point never passes the region's last point, lo + ext - 1, but bounds
                # inference takes lo + base + min(inner, ext - 1) term by term and cannot see
                # it when lo and ext move together (a region that moves with an outer loop):
                # its maximum came out up to n - 1 past the region's end, and a valid input
                # was refused. Bounds inference sees the no-op clamp min(point, lo + ext - 1);
                # strip_region_clamps removes it once the regions are known, so the code and
                # loop partitioning see the plain point.
                clamped = simplify(BinOp("min", point, sub(add(lo, ext), I(1)), I32))
                self.region_clamps[old] = (clamped, simplify(point))
                self.clamped_inner[inner] = old
                point = clamped
            self.lets.append((old, point))
            return
        value = add(lo, add(base, V(inner)))
        if tail == "roundup" and old in self.clamped_inner:
            # the inner loop of a shifted split, rounded up: it now runs past the split's
            # factor, and the clamp of the shifted split's point is no longer a no-op (the
            # points past the region's end would be written outside the storage)
            self.region_clamps.pop(self.clamped_inner.pop(old), None)
        if tail == "roundup":
            # the points past the region's end are computed (from whatever their producers'
            # storage holds there) but never used: the region the stage needs of its
            # producers ends with its own (lower/symbolic.py, Required)
            self.roundup[old] = (simplify(BinOp("min", value, sub(add(lo, ext), I(1)), I32)), outer)
        if tail == "guard":
            # the guard skips the points past the end; the clamp (a no-op where the guard
            # holds) lets bounds inference see that nothing past the end is touched
            value = simplify(BinOp("min", value, sub(add(lo, ext), I(1)), I32))
            self.guards.append(BinOp("<", add(base, V(inner)), ext, BOOL))
        self.lets.append((old, value))

    def fuse(self, a: str, b: str, ab: str):
        ia, ib = self.internal[a], self.internal[b]
        lo_a, ext_a = self.bounds[ia]
        lo_b, ext_b = self.bounds[ib]
        fused = self.fresh(ab)
        self.dims.remove(b)
        self.dims[self.dims.index(a)] = ab
        self.internal[ab] = fused
        self.bounds[fused] = (I(0), mul(ext_a, ext_b))
        self.lets.append((ia, add(lo_a, simplify(BinOp("%", V(fused), ext_a, I32)))))
        # clamped into b's range (a no-op: fused < ext_a * ext_b) so bounds inference sees it
        b_val = add(lo_b, div(V(fused), ext_a))
        b_val = simplify(BinOp("max", BinOp("min", b_val, sub(add(lo_b, ext_b), I(1)), I32), lo_b, I32))
        self.lets.append((ib, b_val))

    def reorder(self, names: list[str]):
        positions = sorted(self.dims.index(n) for n in names)
        for p, n in zip(positions, names):
            self.dims[p] = n

    def required_values(self) -> dict[str, tuple[Expr, frozenset]]:
        """For Required: each rounded-up split's let -> (its point clamped to the region's
        end, the loops its outer var is made of: that loop itself, or the loops of later
        splits and fuses of it, through their lets)."""
        if not self.roundup:
            return {}
        lets = dict(self.lets)
        loops = {self.internal[u] for u in self.dims}
        out = {}
        for name, (clamped, outer) in self.roundup.items():
            found, todo, seen = set(), [outer], set()
            while todo:                 # (a loop, not a recursive closure: no reference cycle)
                v = todo.pop()
                if v in loops:
                    found.add(v)
                elif v in lets and v not in seen:
                    seen.add(v)
                    todo += [w for w in free_vars(lets[v]) if w in lets or w in loops]
            out[name] = (clamped, frozenset(found))
        return out

    def nest(self, body: Stmt) -> Stmt:
        for g in reversed(self.guards):
            body = IfThenElse(simplify(g), body)
        # a later split defines the var an earlier one uses: later lets go outside
        for name, value in self.lets:
            body = LetStmt(name, simplify(value), body)
        for user in self.dims:
            name = self.internal[user]
            lo, ext = self.bounds[name]
            body = For(name, simplify(lo), simplify(ext), self.kinds.get(name, "serial"), body)
        return body


def shifts(shape: _StageShape, v: str, pure_stage: bool, is_output: bool, shift_outputs: bool, f: Func) -> bool:
    """Whether a split of v shifts its last tile inwards (Halide's ShiftInwards): an output's
    pure stage, a dim of the output not split before and not bound (see shift_requirements)."""
    return shift_outputs and pure_stage and is_output and v in f.args and shape.internal.get(v) == shape.prefix + v \
        and not isinstance(simplify(shape.bounds[shape.internal[v]][1]), Const)


def apply_directives(shape: _StageShape, directives: list[Directive], pure_stage: bool, is_output: bool,
                     f: Func, shift_outputs: bool = False, expandable=None) -> None:
    """expandable(v): whether f may be computed past its region along pure var v (see
    LoopBuilder.expandable): then vectorize(v, n) of v itself shifts its last vector inwards
    without clamping lanes, as Halide does (tail 'shift_expand')."""
    base_tail = "shift_inwards" if pure_stage and not is_output else "guard"

    def tail_of(v, n, d=None):
        written = d.tail if d is not None else None
        if written == "round_up":
            return "roundup"
        if written == "guard_with_if":
            return "guard"
        if shifts(shape, v, pure_stage, is_output, shift_outputs, f):
            return "shift"
        if written == "shift_inwards" and not is_output:
            return "shift_inwards"
        if base_tail == "shift_inwards" and shape.shift_outer.get(v, 0) >= n:
            return "roundup_after_shift"
        if base_tail == "shift_inwards" and d is not None and d.name == "vectorize" and written is None and \
                expandable is not None and v in f.args and shape.internal.get(v) == shape.prefix + v and \
                expandable(v):
            return "shift_expand"
        return base_tail
    for d in directives:
        a = d.args
        if d.name == "split":
            shape.split(a[0], a[1], a[2], a[3], tail_of(a[0], a[3], d))
        elif d.name == "fuse":
            shape.fuse(a[0], a[1], a[2])
        elif d.name == "reorder":
            shape.reorder(list(a))
        elif d.name in ("tile", "gpu_tile") and len(a) >= 6:
            parts = tile_parts(a)
            tails = [tail_of(x, n, d) for x, _, _, n in parts]
            for (x, xo, xi, n), t in zip(parts, tails):
                shape.split(x, xo, xi, n, t)
            shape.reorder([p[2] for p in parts] + [p[1] for p in parts])
            if d.name == "gpu_tile":
                for _, xo, xi, _ in parts:
                    shape.kinds[shape.internal[xo]] = GPU_BLOCK
                    shape.kinds[shape.internal[xi]] = GPU_THREAD
        elif d.name == "gpu_tile":
            shape.split(a[0], a[0], a[1], a[2], tail_of(a[0], a[2], d))
            shape.kinds[shape.internal[a[0]]] = GPU_BLOCK
            shape.kinds[shape.internal[a[1]]] = GPU_THREAD
        elif d.name in ("vectorize", "unroll", "parallel"):
            kind = {"vectorize": "vectorized", "unroll": "unrolled", "parallel": "parallel"}[d.name]
            v = a[0]
            if len(a) == 2:
                inner = inner_loop_name(v, shape.dims)
                shape.split(v, v, inner, a[1], tail_of(v, a[1], d))
                target = inner if d.name != "parallel" else v
            else:
                target = v
                ext = simplify(shape.bounds[shape.internal[v]][1])
                if d.name != "parallel" and not isinstance(ext, Const):
                    # (the region may still turn out constant: f(x, y, 0) + f(x, y, 1))
                    shape.deferred[shape.internal[target]] = (d, v)
            shape.kinds[shape.internal[target]] = kind
        elif d.name in ("gpu_blocks", "gpu_threads"):
            # (the loops' GPU dims come from their nesting: see hdsl/lower/gpu.py)
            for v in a:
                shape.kinds[shape.internal[v]] = GPU_BLOCK if d.name == "gpu_blocks" else GPU_THREAD
        elif d.name == "glsl":
            # OpenGL's fragment path: channels innermost, a "block" per (x, y) (the fragment
            # shader's generator, hdsl/codegen/glsl.py, renders them; lower.py marks the kernel)
            if len(a) == 3:
                shape.reorder([a[2], a[0], a[1]])
            for v in a[:2]:
                shape.kinds[shape.internal[v]] = GPU_BLOCK
        elif d.name in ("memoize", "estimate", "reorder_storage", "update", "rfactor", "store_nontemporal"):
            pass
        else:
            raise HdslError(f"'{d.name}' is not supported by the native compiler yet", d.span,
                            "run this schedule with --target interp, or remove the directive")


def _clamped(a: Expr, dims: frozenset) -> bool:
    """Whether a is clamp(e, lo, hi) (max(min(e, hi), lo) or min(max(e, lo), hi)) with lo and
    hi free of the vars `dims`: its value stays in [lo, hi] whatever e."""
    if not isinstance(a, BinOp) or a.op not in ("min", "max"):
        return False
    other = "max" if a.op == "min" else "min"
    for inner, k1 in ((a.a, a.b), (a.b, a.a)):
        if free_vars(k1) & dims or not isinstance(inner, BinOp) or inner.op != other:
            continue
        if not (free_vars(inner.a) & dims) or not (free_vars(inner.b) & dims):
            return True
    return False


def bound_func_index(outputs: list[Func], f: Func) -> int:
    """f's place in the pipeline's Funcs (topological order): how the error of a bound()
    directive names its Func to the runtime, which finds the directive from it."""
    from hdsl.ir.func import topo_order
    for i, g in enumerate(topo_order(outputs)):
        if g is f:
            return i
    return -1


class LoopBuilder:
    # Producers of rounded-up stages computed over what the stages' regions need (Halide's
    # RoundUp), not over their rounded loops; False: over the loops (for A/B measurements,
    # benchmarks/alias_ab.py --switch REQUIRED_REGIONS)
    REQUIRED_REGIONS = True

    def __init__(self, defs: dict[int, Definitions], scheds: dict[int, FuncSchedule], outputs: list[Func]):
        self.defs, self.scheds, self.outputs = defs, scheds, outputs
        self.slid = None        # (dim, window) of the last sliding-window rewrite
        self.slid_window: Expr | None = None    # its window (rows held at once), constant or not
        self.slid_loop: For | None = None       # the loop it slides along
        self.fold_checks: dict[int, tuple] = {}   # id(Func) -> (dim, factor, directive) to check
        self.deferred: dict[str, tuple] = {}     # loops to unroll/vectorize whole, see fix_extents
        self.shift_outputs = False               # outputs' splits shift their last tile inwards
        self.shifted: set[tuple[int, int, int]] = set()   # (output, dim, factor) actually shifted
        # (Func id, arg) -> the constant extent of the region being computed, when it is one
        # (an inline reduction computed per vector: 8 points, so its loops split without a tail)
        self.const_extent: dict[tuple[int, str], Expr] = {}
        self.region_clamps: dict[str, tuple[Expr, Expr]] = {}   # see strip_region_clamps
        # let name -> (bounds-only value, loops): the regions stages need, not what their
        # rounded-up loops touch (lower/symbolic.py, Required)
        self.required_alt: dict = {}

    # ---------------------------------------------------------------- one Func's production
    def stage_nest(self, f: Func, stage: int) -> Stmt:
        d = self.defs[id(f)]
        fs = self.scheds[id(f)]
        prefix = f"{f.name}.s{stage}."
        shape = _StageShape(prefix)
        is_output = f in self.outputs
        if stage == 0:
            for a in f.args:
                if a in fs.bounds:
                    # bound(): the loop's range is the given constants (so unroll and
                    # vectorize see a constant extent)
                    lo, ext = fs.bounds[a]
                    shape.add_dim(a, lo, ext)
                    continue
                lo, hi = V(f"{f.name}.s0.{a}.min"), V(f"{f.name}.s0.{a}.max")
                shape.add_dim(a, lo, self.const_extent.get((id(f), a)) or add(sub(hi, lo), I(1)))
            mapping = {a: V(shape.internal[a]) for a in f.args}
            args = [mapping[a] for a in f.args]
            values = [self._subst(v, mapping, {}) for v in d.values]
            body: Stmt = Provide(f, tuple(args), tuple(values))
            directives = fs.stages.get(-1, [])
        else:
            u = d.updates[stage - 1]
            rv_names = []
            if u.rdom is not None:
                for i, (lo, ext) in enumerate(u.rdom.bounds):
                    user = RVar(u.rdom, i).name
                    rv_names.append(user)
                    shape.add_dim(user, lo, ext)
            for _, a in pure_positions(f, u):
                # over the whole computed region: later stages may read what this one
                # writes beyond the region f's consumers need (a scan along y reads
                # every row that the scan along x before it produced)
                lo, hi = V(f"{f.name}.s0.{a}.min"), V(f"{f.name}.s0.{a}.max")
                shape.add_dim(a, lo, self.const_extent.get((id(f), a)) or add(sub(hi, lo), I(1)))
            mapping = {a: V(shape.internal[a]) for _, a in pure_positions(f, u)}
            rmap = {i: V(shape.internal[n]) for i, n in enumerate(rv_names)}
            args = [self._subst(a, mapping, rmap, u.rdom) for a in u.args]
            values = [self._subst(v, mapping, rmap, u.rdom) for v in u.values]
            body = Provide(f, tuple(args), tuple(values))
            if u.rdom is not None and u.rdom.predicate is not None:
                body = IfThenElse(self._subst(u.rdom.predicate, mapping, rmap, u.rdom), body)
            directives = fs.stages.get(stage - 1, [])
        apply_directives(shape, directives, stage == 0, is_output, f, self.shift_outputs,
                         lambda v: self.expandable(f, frozenset((v,))))
        if shape.shifted:
            k = self.outputs.index(f)
            self.shifted |= {(k, f.args.index(v), n) for v, n in shape.shifted}
        self.deferred.update(shape.deferred)
        self.region_clamps.update(shape.region_clamps)
        self.required_alt.update(shape.required_values())
        return shape.nest(body)

    def expandable(self, f: Func, dims: frozenset) -> bool:
        """Whether f may be computed beyond the region its consumers need along its pure vars
        `dims` (a vector wider than a narrow region: Halide computes the whole vector) without
        changing any value or refusing a valid input: f is no output and has no update, no
        bound() and no fold_storage (whose checks the larger region would fail); the Funcs it
        reads are, along the dims whose coordinates depend on `dims`, expandable too; and an
        input read at such a coordinate is read through a clamp to bounds that do not depend
        on f's vars (a boundary condition: repeat_edge, constant_exterior, ...), so the
        input is read where it was before, whatever the region."""
        key = (id(f), dims)
        memo = self.__dict__.setdefault("_expandable", {})
        if key in memo:
            return memo[key]
        memo[key] = False          # (a cycle through an update is refused below anyway)
        fs = self.scheds.get(id(f))
        d = self.defs.get(id(f))
        ok = f not in self.outputs and fs is not None and d is not None and not d.updates and \
            not fs.bounds and not fs.folds
        if ok:
            from hdsl.ir.expr import InputCall, free_vars
            for e in d.values:
                for n in walk(e):
                    if isinstance(n, FuncCall) and n.func is not f:
                        moved = frozenset(n.func.args[i] for i, a in enumerate(n.args) if free_vars(a) & dims)
                        if moved and not self.expandable(n.func, moved):
                            ok = False
                    elif isinstance(n, InputCall):
                        if any(free_vars(a) & dims and not _clamped(a, dims) for a in n.args):
                            ok = False
                    if not ok:
                        break
                if not ok:
                    break
        memo[key] = ok
        return ok

    @staticmethod
    def _subst(e: Expr, mapping: dict, rmap: dict, rdom=None) -> Expr:
        def visit(n):
            if isinstance(n, Var) and n.name in mapping:
                return mapping[n.name]
            if isinstance(n, RVar) and rdom is not None and n.rdom is rdom and n.index in rmap:
                return rmap[n.index]
            return None
        return substitute(e, visit)

    def production(self, f: Func) -> Stmt:
        stages = [self.stage_nest(f, 0)] + [self.stage_nest(f, i + 1) for i in range(len(self.defs[id(f)].updates))]
        return block(*stages)

    def footprint(self, f: Func, pure: dict) -> list:
        """Boxes that f's updates touch when their pure vars range over `pure` (name -> (lo, hi))."""
        d = self.defs[id(f)]
        boxes = []
        for u in d.updates:
            scope = {a: pure[a] for _, a in pure_positions(f, u)}
            if u.rdom is not None:
                for i, (lo, ext) in enumerate(u.rdom.bounds):
                    scope[("rvar", id(u.rdom), i)] = (lo, sub(add(lo, ext), I(1)))
            boxes.append([expr_bounds(a, scope) for a in u.args])
            for e in u.values + u.args:
                for n in walk(e):
                    if isinstance(n, FuncCall) and n.func is f:
                        boxes.append([expr_bounds(a, scope) for a in n.args])
        return boxes

    def required_region(self, f: Func, body: Stmt, seen: dict):
        """The region of f that body's stages need: (required, outer). The stages' rounded-up
        splits count only up to their regions' ends (Required), where body holds their
        outer loops; inside one of them (f computed per tile of a rounded-up stage) f
        computes the whole tile. outer: for the latter, (box, loops): the region f needs for
        the stage's own region alone, which walks from outside those loops take (see
        wrap_compute), or None. seen: box_of's record of what the stages touch, for f's
        storage (LoopBuilder.realize), which covers every point the loops touch."""
        if not self.required_alt or not self.REQUIRED_REGIONS:
            return box_of(body, f, f.dims, reads=True, writes=False, record=seen), None
        req = Required(self.required_alt)
        touched: dict = {}
        required = box_of(body, f, f.dims, reads=True, writes=False, record=touched, required=req)
        if not req.used:
            seen.update(touched)
        outer = None
        if req.skipped and required is not None:
            forced = Required(self.required_alt, force=True)
            box = box_of(body, f, f.dims, reads=True, writes=False, required=forced)
            if forced.outside:
                outer = (box, frozenset(forced.outside))
        return required, outer

    def wrap_compute(self, f: Func, body: Stmt, required, slide: For | None = None, outer=None) -> Stmt:
        """Lets for f's region around (production of f; body).

        With `slide` (a serial loop between f's storage and its computation), the
        sliding-window optimization: on every iteration but the first, f's region
        starts after what the previous iteration computed (2013 paper, Fig. 1)."""
        fs = self.scheds[id(f)]
        for dim, (lo, hi) in enumerate(required):
            if lo is None or hi is None:
                raise HdslError(f"cannot tell which part of '{f.name}' is needed: its "
                                f"{f.args[dim] if dim < len(f.args) else 'dim ' + str(dim)} coordinate is unbounded",
                                f.span, "clamp data-dependent coordinates, e.g. f(clamp(i32(v), 0, 255))")
        region = [list(r) for r in required]
        if self.defs[id(f)].updates:
            # twice: the updates' pure vars range over the region the first pass found
            req = {a: (V(f"{f.name}.{a}.req.min"), V(f"{f.name}.{a}.req.max")) for a in f.args}
            for pure in (req, None):
                pure = pure or {a: tuple(region[i]) for i, a in enumerate(f.args)}
                for box in self.footprint(f, pure):
                    for dim, (lo, hi) in enumerate(box):
                        if lo is None or hi is None:
                            raise HdslError(f"cannot tell which part of '{f.name}' its update writes: coordinate "
                                            f"{dim} is unbounded", f.span, "clamp computed coordinates into a fixed range")
                        # (an update at the pure var itself writes the required region: a
                        # min/max with it would only hide the region's shape from the simplifier)
                        own = req[f.args[dim]]
                        if lo != own[0] and lo != region[dim][0]:
                            region[dim][0] = simplify(BinOp("min", region[dim][0], lo, I32))
                        if hi != own[1] and hi != region[dim][1]:
                            region[dim][1] = simplify(BinOp("max", region[dim][1], hi, I32))
        checks = []
        for a, (blo, bext) in fs.bounds.items():
            dim = f.args.index(a)
            bmax = sub(add(blo, bext), I(1))
            checks.append(Assert(BinOp("&&", BinOp("<=", blo, V(f"{f.name}.{a}.req.min"), BOOL),
                                       BinOp(">=", bmax, V(f"{f.name}.{a}.req.max"), BOOL), BOOL),
                                 ERR_BOUND_DIRECTIVE, (I(bound_func_index(self.outputs, f)), I(dim),
                                                       V(f"{f.name}.{a}.req.min"), V(f"{f.name}.{a}.req.max"))))
            region[dim] = [blo, bmax]
        if slide is not None and not self.defs[id(f)].updates:
            self.slid = self.slide(f, region, slide)
            if id(f) in self.fold_checks and self.slid is not None:
                checks.append(self.fold_check(f, self.slid[0]))
        if outer is not None and slide is None and not self.defs[id(f)].updates:
            # computed per tile of a rounded-up stage: walks from outside the tile's loops take
            # the region that the stage's own region needs, a clamp of f's coordinates
            box, loops = outer
            for dim, a in enumerate(f.args):
                lo, hi = box[dim]
                if a in fs.bounds or lo is None or hi is None:
                    continue
                lo, hi = simplify(lo), simplify(hi)
                if lo != simplify(region[dim][0]) or hi != simplify(region[dim][1]):
                    self.required_alt[("range", f"{f.name}.s0.{a}")] = ((lo, hi), loops)
        for dim, a in enumerate(f.args):
            ext = simplify(add(sub(region[dim][1], region[dim][0]), I(1)))
            if isinstance(ext, Const):
                self.const_extent[(id(f), a)] = ext
            else:
                self.const_extent.pop((id(f), a), None)
        inner = block(*checks, self.production(f), body)
        for dim, a in reversed(list(enumerate(f.args))):
            inner = LetStmt(f"{f.name}.s0.{a}.min", region[dim][0],
                            LetStmt(f"{f.name}.s0.{a}.max", region[dim][1], inner))
        for dim, a in reversed(list(enumerate(f.args))):
            inner = LetStmt(f"{f.name}.{a}.req.min", simplify(required[dim][0]),
                            LetStmt(f"{f.name}.{a}.req.max", simplify(required[dim][1]), inner))
        return inner

    def slide(self, f: Func, region, loop: For):
        """Shrink the region along the one dim that moves with `loop`; returns (dim, window) or None."""
        y = loop.var
        moving = [d for d, (lo, hi) in enumerate(region)
                  if any(isinstance(n, Var) and n.name == y for e in (lo, hi) for n in walk(e))]
        if len(moving) != 1:
            return None
        d = moving[0]
        lo, hi = region[d]
        self.slid_loop = loop

        def previous(e):
            return substitute(e, lambda n: sub(V(y), I(1)) if isinstance(n, Var) and n.name == y else None)
        # Each iteration computes [max(lo, previous hi + 1), hi]. With lo never going down,
        # that is every row needed: rows up to the previous hi were computed before (and
        # if hi ever went down, the rows above it are recomputed, not skipped). The storage
        # holds rows up to the largest hi so far, so it is folded only where hi provably
        # never goes down (then the window hi - lo + 1 is what it holds at once).
        forward = monotonic(hi, y) in (0, 1)
        prev = previous(hi)
        first = BinOp("<=", V(y), loop.min, BOOL)
        if monotonic(lo, y) not in (0, 1):
            # lo not provably moving forward (camera_pipe's planes: their consumers' windows
            # end at a round_up tile's last row, `S + 2 * ((M - S + 2) / 2) - 1` over the tone
            # curve's slid start S, which parity keeps moving forward but no rule shows):
            # slide where lo did not go down since the previous iteration, checked at run
            # time, and compute the whole region where it did. Sound without folding (the
            # storage keeps every row computed): by induction every row of [lo, hi] is
            # valid after each iteration, and with lo(y) >= lo(y - 1) the rows up to the
            # previous hi lie in the previous iteration's region. Never folded automatically;
            # fold_storage(v, n) folds it (fold_check: the window, checked, is all it needs).
            back = BinOp("<", lo, previous(lo), BOOL)
            region[d][0] = simplify(Select(BinOp("||", first, back, BOOL), lo,
                                           simplify(BinOp("max", lo, add(prev, I(1)), I32)), I32))
            self.slid_window = simplify(add(sub(hi, lo), I(1)))
            return (d, None)
        region[d][0] = simplify(Select(first, lo, simplify(BinOp("max", lo, add(prev, I(1)), I32)), I32))
        window = simplify(add(sub(hi, lo), I(1)))
        self.slid_window = window
        # (the automatic fold keeps to windows of at most a constant height whose end provably
        # moves forward too; fold_storage(v, n) needs neither, see fold_check)
        if not isinstance(window, Const) and BOUNDED_FOLDS:
            # a window of varying height bounded by a constant (an upsampling consumer's rows
            # y / 2 .. (y + 1) / 2: 1 or 2): the largest is all the storage needs at once (the
            # induction of fold_check holds for any n at least the window)
            most = diff_upper(hi, lo)
            window = I(most + 1) if most is not None and most >= 0 else None
        return (d, window) if window is not None and forward else (d, None)

    def fold_check(self, f: Func, dim: int) -> Stmt:
        """fold_storage(v, n): the rows of f's window (what its consumers read in one iteration
        of the sliding loop; f computes no row outside it) must fit in n slices. A constant
        window is checked here, any other at run time (an assertion, ERR_FOLD_TOO_SMALL).

        That is all folding needs, once the window's start lo never moves back in an
        iteration that slides (proved, or checked at run time: see slide), whether or not its
        end hi moves forward. Induction on the iterations: after iteration y every row of
        [lo(y), hi(y)] holds its value in its slice (row mod n). Iteration y writes rows
        [s, hi(y)] with s >= lo(y), in any order; two rows of one slice lie n or more apart,
        which the window hi - lo + 1 <= n rules out within [lo(y), hi(y)], so each row written
        holds its value after the iteration, and every row of [lo(y), s - 1] (s > lo(y) only
        where the iteration slid: rows up to hi(y - 1), at or above lo(y - 1)) held it before
        and shares its slice with no row written."""
        want, n, d = self.fold_checks[id(f)]
        if want != dim:
            raise HdslError(f"fold_storage({f.args[want]}, {n}): the storage of '{f.name}' slides along "
                            f"{f.args[dim]}, not {f.args[want]}", d.span, f"fold_storage({f.args[dim]}, n)")
        w = self.slid_window
        if isinstance(w, Const):
            if w.value > n:
                raise HdslError(f"fold_storage({f.args[dim]}, {n}) is too small: '{f.name}' holds {w.value} "
                                f"slices along {f.args[dim]} at once", d.span, f"fold_storage({f.args[dim]}, {w.value})")
            return block()
        return Assert(BinOp("<=", w, I(n), BOOL), ERR_FOLD_TOO_SMALL,
                      (I(bound_func_index(self.outputs, f)), I(dim), w))

    def realize(self, f: Func, body: Stmt, fold=None, known: dict | None = None) -> Stmt:
        """f's storage around body, over what body reads and writes of it. known: boxes of f
        already found in statements body holds (box_of's `record`), not walked again."""
        box = box_of(body, f, f.dims, known=known)
        if box is None:
            return body
        bounds = []
        for dim, (lo, hi) in enumerate(box):
            if lo is None or hi is None:
                raise HdslError(f"cannot tell how much storage '{f.name}' needs", f.span,
                                "clamp data-dependent coordinates into a fixed range")
            bounds.append((simplify(lo), simplify(add(sub(hi, lo), I(1)))))
        folds = ()
        if fold is not None and len(fold) == 3:          # fold_storage(v, n): n slices exactly
            folds = ((fold[0], fold[2]),)
        elif fold is not None and isinstance(fold[1], RuntimeFold):
            folds = (fold,)
        elif fold is not None and fold[1] is not None:
            d, window = fold
            factor = 1
            while factor < window.value:
                factor *= 2
            folds = ((d, factor),)
        return Realize(f, tuple(bounds), body, folds)


def find_loop_var(stmt: Stmt, prefix: str, user_var: str) -> list[str]:
    """Internal names of loops `prefix<var>` (any version) in stmt, outermost first."""
    found = []

    def visit(s):
        if isinstance(s, For):
            base = s.var.split("$")[0]
            if base == prefix + user_var:
                found.append(s.var)
            visit(s.body)
        elif isinstance(s, (LetStmt, Realize)):
            visit(s.body)
        elif isinstance(s, Block):
            for x in s.stmts:
                visit(x)
        elif isinstance(s, IfThenElse):
            visit(s.then)
            if s.otherwise is not None:
                visit(s.otherwise)
    visit(stmt)
    return found


def compute_site(stmt: Stmt, g: Func, stages: int, user_var: str, f: Func) -> str | None:
    """The loop `user_var` of Func g that `compute_at(g, user_var)` of f means: as Halide's
    LoopLevel(g, var) (src/Schedule.cpp, LoopLevel::match), a loop of that name in any stage
    of g (an update's RVar loops, or loops split from them); of several, the first whose body
    uses f (the legal site encloses f's uses), else the first."""
    found = [loop for stage in range(stages) for loop in find_loop_var(stmt, f"{g.name}.s{stage}.", user_var)]
    for loop in found:
        if _loop_uses(stmt, loop, f):
            return loop
    return found[0] if found else None


def _loop_uses(stmt: Stmt, loop_var: str, f: Func) -> bool:
    hit = [False]

    def visit(s):
        if isinstance(s, For) and s.var == loop_var:
            hit[0] = stmt_reads(s.body, f)
            return
        for k in _children(s):
            visit(k)
    visit(stmt)
    return hit[0]


def inject_at_loop(stmt: Stmt, loop_var: str, fn) -> tuple[Stmt, bool]:
    """Replace the body of loop `loop_var` by fn(body, loop)."""
    done = [False]

    def visit(s):
        if isinstance(s, For):
            if s.var == loop_var and not done[0]:
                done[0] = True
                return For(s.var, s.min, s.extent, s.kind, fn(s.body, s))
            b = visit(s.body)
            return s if b is s.body else For(s.var, s.min, s.extent, s.kind, b)
        if isinstance(s, LetStmt):
            b = visit(s.body)
            return s if b is s.body else LetStmt(s.name, s.value, b)
        if isinstance(s, Realize):
            b = visit(s.body)
            return s if b is s.body else Realize(s.func, s.bounds, b, s.folds)
        if isinstance(s, Block):
            new = [visit(x) for x in s.stmts]
            return s if all(a is b for a, b in zip(new, s.stmts)) else Block(tuple(new))
        if isinstance(s, IfThenElse):
            t = visit(s.then)
            o = visit(s.otherwise) if s.otherwise is not None else None
            return s if t is s.then and o is s.otherwise else IfThenElse(s.cond, t, o)
        return s
    out = visit(stmt)
    return out, done[0]


def _reads(e: Expr, f: Func) -> bool:
    return any(isinstance(n, FuncCall) and n.func is f for n in walk(e))


_own_exprs, _children = own_exprs, children


def stmt_reads(s: Stmt, f: Func) -> bool:
    return any(_reads(e, f) for e in _own_exprs(s)) or any(stmt_reads(c, f) for c in _children(s))


def innermost_loop_using(stmt: Stmt, f: Func, above_vectors: bool = True):
    """The innermost loop whose body contains every use of f (for unscheduled reductions):
    descend while exactly one child uses f and the node itself does not, and (above_vectors)
    stop above a vectorized loop: computed inside it, f would turn the consumer's vector
    code scalar; above it, its region covers the lanes. Returns (that loop's var, the
    vectorized loop below it or None, the names of the loops f is moved out of)."""
    chain: list[str] = []
    s = stmt
    while True:
        if any(_reads(e, f) for e in _own_exprs(s)):
            return (chain[-1] if chain else None), None, set()
        if isinstance(s, For):
            if s.kind == "vectorized" and above_vectors:
                # right above it, inside the loop over the vectors (x$1 around x_i): f is
                # computed per vector, its region the lanes' points, its partial results a
                # vector that stays in registers (a whole row computed ahead was tried:
                # ~7% slower on the unsharp mask, the sums going through memory)
                return (chain[-1] if chain else None), s, loop_names(s)
            chain.append(s.var)
        users = [c for c in _children(s) if stmt_reads(c, f)]
        if len(users) != 1:
            return (chain[-1] if chain else None), None, set()
        s = users[0]


def loop_names(s: Stmt) -> set[str]:
    out = {s.var} if isinstance(s, For) else set()
    for k in _children(s):
        out |= loop_names(k)
    return out


def lane_dim(loop: For, f: Func) -> int | None:
    """The one dimension of f along which f's calls inside vectorized `loop` vary from lane
    to lane (through lets that depend on the loop's var), or None."""
    dims: set[int] = set()

    def visit(s: Stmt, lane: frozenset):
        for e in _own_exprs(s):
            for n in walk(e):
                if isinstance(n, FuncCall) and n.func is f:
                    for d, a in enumerate(n.args):
                        if free_vars(a) & lane:
                            dims.add(d)
        if isinstance(s, LetStmt) and free_vars(s.value) & lane:
            lane = lane | {s.name}
        for k in _children(s):
            visit(k, lane)
    visit(loop.body, frozenset({loop.var}))
    return dims.pop() if len(dims) == 1 else None


def strip_region_clamps(stmt: Stmt, clamps: dict[str, tuple[Expr, Expr]]) -> Stmt:
    """Drop the clamps that split lets carry for bounds inference alone (_StageShape.split,
    shift_inwards of a region of run-time extent): once bounds inference has written every
    region, `let v = min(point, lo + ext - 1)` becomes `let v = point`. The clamp is a no-op
    (the point is lo + max(min(vo * n, ext - n), 0) + min(vi, max(ext - 1, 0)) with vi < n,
    which is at most lo + ext - 1), so no value changes. A let whose value an earlier rewrite
    changed is left as it is."""
    if not clamps:
        return stmt

    def visit(s: Stmt) -> Stmt:
        kids = children(s)
        new_kids = [visit(k) for k in kids]
        if any(a is not b for a, b in zip(new_kids, kids)):
            s = with_children(s, new_kids)
        if isinstance(s, LetStmt) and s.name in clamps and clamps[s.name][0] == s.value:
            return LetStmt(s.name, clamps[s.name][1], s.body)
        return s
    return visit(stmt)


def fix_extents(stmt: Stmt, deferred: dict[str, tuple]) -> Stmt:
    """unroll(c) / vectorize(c) of a whole loop need its extent to be a constant: with the
    lets that bounds inference wrote substituted where they are constants (a producer read
    at c = 0 and 1 only, or inside an output's bound(c, 0, 3)), it often is; else the user
    gets a positioned error."""
    from hdsl.ir.expr import subst_vars

    def visit(s: Stmt, env: dict, sym: dict) -> Stmt:
        if isinstance(s, LetStmt):
            v = simplify(subst_vars(s.value, env)) if env else s.value
            inner = dict(env, **{s.name: v}) if isinstance(v, Const) else env
            # (every integer let, for the largest extent a loop can have: see widest)
            inner_sym = dict(sym, **{s.name: simplify(subst_vars(s.value, sym))}) if s.value.type == I32 else sym
            body = visit(s.body, inner, inner_sym)
            return s if body is s.body else LetStmt(s.name, s.value, body)
        if isinstance(s, For) and s.var in deferred:
            d, v = deferred[s.var]
            ext = simplify(subst_vars(s.extent, env))
            most = _widest(simplify(subst_vars(s.extent, sym)))
            slid = any(isinstance(n, Select) for n in walk(subst_vars(s.extent, sym)))
            if not isinstance(ext, Const) and most is None and slid and d.name == "unroll":
                # a slid window whose size this form of the code cannot bound by a constant
                # (the guarded last tile of an output narrower than a tile): left rolled, as
                # unrolling changes no value
                return For(s.var, s.min, s.extent, "serial", visit(s.body, env, sym))
            if not isinstance(ext, Const) and most is not None:
                # a sliding window's slice (store_root + compute_at): its first iteration
                # computes the whole window, later ones the new rows. The loop keeps the
                # window's constant extent, ending where this iteration's rows end and
                # skipping the rows computed before (so it stays inside the window, and
                # bounds inference sees no more than the window)
                start = sub(add(s.min, s.extent), most)
                guard = BinOp(">=", V(s.var), s.min, BOOL)
                return For(s.var, start, most, s.kind, IfThenElse(guard, visit(s.body, env, sym)))
            if not isinstance(ext, Const):
                raise HdslError(f"{d.name}({v}) needs a loop of constant extent, but the extent of '{v}' "
                                "depends on the output's size", d.span,
                                f"split it first, {d.name}({v}, 8), or fix its range with bound({v}, 0, N)")
            return For(s.var, s.min, ext, s.kind, visit(s.body, env, sym))
        kids = children(s)
        if not kids:
            return s
        new = [visit(k, env, sym) for k in kids]
        if all(a is b for a, b in zip(new, kids)):
            return s
        return with_children(s, new)
    return visit(stmt, {}, {}) if deferred else stmt


def diff_upper(h: Expr, l: Expr, depth: int = 0) -> int | None:
    """A constant that h - l never exceeds, or None (i32 expressions that share their
    moving parts: a sliding window's end and start). Floor division by a positive constant
    keeps a bound: floor(a / n) - floor(b / n) <= ceil((a - b) / n) (floor(x + y) <=
    floor(x) + ceil(y)); a min in h, a max in l or a select in either bounds by its operands;
    min against min and max against max by the pairwise differences."""
    if depth > 24:
        return None
    d = simplify(sub(h, l))
    if isinstance(d, Const):
        return int(d.value)
    nxt = depth + 1

    def best(*vals):
        vals = [v for v in vals if v is not None]
        return min(vals) if vals else None

    def worst(*vals):
        return None if any(v is None for v in vals) else max(vals)
    if isinstance(h, BinOp) and h.op in ("+", "-") and isinstance(h.b, Const):
        r = diff_upper(h.a, l, nxt)
        return None if r is None else r + int(h.b.value) * (1 if h.op == "+" else -1)
    if isinstance(l, BinOp) and l.op in ("+", "-") and isinstance(l.b, Const):
        r = diff_upper(h, l.a, nxt)
        return None if r is None else r - int(l.b.value) * (1 if l.op == "+" else -1)
    if isinstance(h, Select):
        return worst(diff_upper(h.t, l, nxt), diff_upper(h.f, l, nxt))
    if isinstance(l, Select):
        return worst(diff_upper(h, l.t, nxt), diff_upper(h, l.f, nxt))
    if (isinstance(h, BinOp) and isinstance(l, BinOp) and h.op == l.op == "/" and isinstance(h.b, Const)
            and isinstance(l.b, Const) and int(h.b.value) == int(l.b.value) > 0):
        r = diff_upper(h.a, l.a, nxt)
        return None if r is None else -(-r // int(h.b.value))
    pair = None
    if isinstance(h, BinOp) and isinstance(l, BinOp) and h.op == l.op and h.op in ("min", "max"):
        pair = worst(diff_upper(h.a, l.a, nxt), diff_upper(h.b, l.b, nxt))
    if isinstance(h, BinOp) and h.op == "min":
        return best(pair, diff_upper(h.a, l, nxt), diff_upper(h.b, l, nxt))
    if isinstance(l, BinOp) and l.op == "max":
        return best(pair, diff_upper(h, l.a, nxt), diff_upper(h, l.b, nxt))
    return pair


def _widest(ext: Expr) -> Const | None:
    """The largest value of a loop extent that is a constant on each side of its selects
    (a slid region's extent, `y + 1 - select(first, y - 1, y + 1) + 1`: 3 or 1), or None."""
    from hdsl.ir.expr import substitute
    selects = [n for n in walk(ext) if isinstance(n, Select)]
    if not selects or len(selects) > 3:
        return None
    values = []
    for k in range(1 << len(selects)):
        pick = {id(n): (n.t if k >> i & 1 else n.f) for i, n in enumerate(selects)}
        v = _const_upper(simplify(substitute(ext, lambda n: pick.get(id(n)))))
        if v is None:
            return None
        values.append(v)
    return I(max(values)) if max(values) > 0 else None


def _const_upper(e: Expr) -> int | None:
    """A constant that e never exceeds, when one shows: e with each min in a positive place
    (max in a negative one) replaced by one of its operands, which only makes it larger, and
    simplified to a constant (`B + 9 - max(B - 1, C) + 1` is at most 11)."""
    values = [int(c.value) for c in map(simplify, _bounding(e, 1)) if isinstance(c, Const)]
    return min(values) if values else None


def _bounding(e: Expr, sign: int) -> list[Expr]:
    """Expressions >= e (sign 1) or <= e (sign -1), e itself among them (a few dozen at most)."""
    out = [e]
    if isinstance(e, BinOp) and e.type == I32:
        if e.op in ("+", "-"):
            inner = sign if e.op == "+" else -sign
            out = [BinOp(e.op, a, b, I32) for a in _bounding(e.a, sign) for b in _bounding(e.b, inner)][:32]
        elif (e.op == "min" and sign > 0) or (e.op == "max" and sign < 0):
            out = ([e] + _bounding(e.a, sign) + _bounding(e.b, sign))[:32]
    return out


def check_shifted(shifted, p, schedule: str | None, target="host") -> list[tuple[int, int, int]]:
    """The requirements of the shifted form (shift_requirements), after checking that lowering
    shifted no split they leave out (that form would then run on outputs too narrow for it)."""
    from hdsl.diagnostics import InternalError
    reqs = shift_requirements(p, schedule, target)
    extra = set(shifted) - set(reqs)
    if extra:
        raise InternalError(f"splits shifted inwards without a size requirement: {sorted(extra)}")
    return reqs


def shift_requirements(p, schedule: str | None, target="host") -> list[tuple[int, int, int]]:
    """(output, dim, factor) for each split that the shifted variant of a schedule shifts
    inwards (the rule of `shifts`, read from the directives alone, without lowering): that
    variant is valid only when every such output dim is at least its factor wide."""
    from hdsl.lower.lower import choose_schedule
    sched = choose_schedule(p, schedule, target)
    if sched is None:
        return []
    reqs = []
    for k, f in enumerate(p.outputs):
        split_before: set[str] = set()
        bounded = {d.args[0] for d in sched.directives.get(id(f), []) if d.name == "bound"}
        for d in sched.directives.get(id(f), []):
            if d.stage != -1:
                continue
            a = d.args
            pairs = []
            if d.name == "split":
                pairs = [(a[0], a[3])]
            elif d.name in ("tile", "gpu_tile") and len(a) >= 6:
                pairs = [(x, n) for x, _, _, n in tile_parts(a)]
            elif d.name == "gpu_tile":
                pairs = [(a[0], a[2])]
            elif d.name in ("vectorize", "unroll", "parallel") and len(a) == 2:
                pairs = [(a[0], a[1])]          # (each splits v by the factor: apply_directives)
            elif d.name == "fuse":
                split_before |= {a[0], a[1]}
            for v, n in pairs:
                if v in f.args and v not in split_before and v not in bounded and \
                        d.tail not in ("round_up", "guard_with_if"):
                    reqs.append((k, f.args.index(v), int(n)))
                split_before.add(v)
    return reqs
