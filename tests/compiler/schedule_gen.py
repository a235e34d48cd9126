"""Random valid schedules for a pipeline, rendered as a `schedule NAME { ... }` block.

The generator follows Halide's legality rules (and hdsl's schedule checker):

- Compute levels are chosen consumers first (reverse topological order).
  A Func without update definitions may be inlined; any Func may be computed
  at the root; `compute_at(g, v)` is offered only where every use of the Func
  lies inside loop `v` of `g`'s pure stage: `g` is materialised (not inline),
  every other consumer (seen through inlined Funcs and unscheduled inline
  reductions) is computed inside that same loop, and `g`'s update stages do
  not read it. `v` is any loop of `g` after `g`'s own splits.
- `store_root()` / `store_at(h, w)` is chosen only at a level enclosing the
  compute level, with no parallel loop between the two (that would race on
  the shared storage).
- Stage directives (split, tile, reorder, fuse, vectorize(v, n), unroll(v, n),
  parallel(v[, n]), factors 1..9) name loops that exist at that point: the
  loop list is tracked as Halide (and hdsl's checker) reshape it, innermost
  first: split(v, vo, vi, n) replaces v by [vi, vo]; tile is two splits and a
  reorder; vectorize/unroll/parallel(v, n) split v into [v_i, v].
- In update stages the iteration order of the reduction variables is kept
  (a reorder or fuse that would change which rdom point comes first is not
  generated), and no loop derived from a reduction variable is parallelised
  or vectorised (that would race).
- vectorize(v) / unroll(v) without a factor only on loops of constant extent.
- `update(i).rfactor(r.k, u)` only where hdsl's (and Halide's) rule allows it: an
  update `f(P) = f(P) op e` with op + * min max, P pure vars, e not reading f, an
  rdom (not a one-dimensional one with a `where`); it is the stage's only directive
  (hdsl takes none after it, and one before it would name loops the factored update
  no longer has), and the Funcs that stage reads are then never computed inside a
  loop (the intermediate is computed at the root).
- `reorder_storage` of a materialised intermediate: a permutation of its pure vars.
- `bound(v, min, extent)`: on an output, exactly the size realized (`output_sizes`);
  on an intermediate computed at the root (of at most two dimensions), a box given by
  the caller (`bound_box`) far larger than any region read, split tails included: not
  on a Func that reads an output (its region would widen), nor on a producer of a Func
  already given the box (the box plus its consumer's stencil would not fit in it); the
  caller gives no box for pipelines that read inputs without a boundary condition.
- GPU directives (gpu_blocks, gpu_threads, gpu_tile) only when asked for: `gpu=True`
  puts them anywhere (schedules the CPU target must refuse at the directive, issue 14
  item 4); `gpu_valid=True` makes schedules a GPU target runs (checked under cuda-emulate):
  the output and some root Funcs get gpu_tile (1-D or 2-D) or gpu_blocks + gpu_threads on
  their pure stage (updates stay on the host); a Func computed at a GPU Func's innermost
  block loop (no updates) lives in shared memory and mostly gets gpu_threads of its own
  (else one thread of the block computes it), one
  computed at or inside a thread loop is per thread; nothing is computed between block and
  thread loops; no parallel, vectorize or unroll (a kernel may not lie inside them), no
  rfactor, tile_iir or store_at. `gpu_wide=True` (the CUDA fuzz) widens them: 3-D gpu_tile,
  tail strategies on gpu_tile, updates on the GPU over their pure vars.

A `Chooser` makes every decision, so the same code serves Hypothesis (which
then shrinks the schedule) and plain seeded `random` (for the repro helper).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from hdsl.ir.expr import BinOp, FuncCall, RVar, Var, walk
from hdsl.ir.func import Func, Update

DIRECTIVES = ("split", "tile", "reorder", "fuse", "vectorize", "unroll", "parallel")
_NAMEABLE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_])?")
_KEYWORDS = {"in", "for", "fn", "let", "var", "rdom", "where", "return", "true", "false", "use", "pipeline",
             "input", "output", "param", "const", "algorithm", "schedule"}


# ----------------------------------------------------------------------------- choosers
class Chooser:
    def int(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def bool(self, percent: int = 50) -> bool:
        """True with about `percent` % probability (False is the simple choice)."""
        return self.int(0, 99) >= 100 - percent

    def subset_permutation(self, seq, k: int):
        pool, out = list(seq), []
        for _ in range(k):
            out.append(pool.pop(self.int(0, len(pool) - 1)))
        return out


class RandomChooser(Chooser):
    def __init__(self, seed):
        self.r = random.Random(seed)

    def int(self, lo, hi):
        return self.r.randint(lo, hi)


class DataChooser(Chooser):
    """Decisions drawn from Hypothesis's `data` (so that failures shrink)."""

    def __init__(self, data):
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def int(self, lo, hi):
        return self.data.draw(self.st.integers(lo, hi))


# ----------------------------------------------------------------------------- loop lists
@dataclass
class Loop:
    name: str
    comps: tuple = ()          # rvar significance keys, fastest first (empty: pure)
    extent: int | None = None  # when a compile-time constant
    kind: str = "serial"       # serial, parallel, vectorized, unrolled

    @property
    def nameable(self) -> bool:
        return bool(_NAMEABLE.fullmatch(self.name)) and self.name not in _KEYWORDS

    @property
    def from_rvar(self) -> bool:
        return bool(self.comps)


class Stage:
    """One stage's loops, innermost first, as the directives reshape them."""

    def __init__(self, fname: str, index: int, loops: list[Loop]):
        self.fname, self.index, self.loops = fname, index, loops
        self.lines: list[str] = []
        self.counter = 0
        self.exclude = ()

    def factor(self, ch: Chooser) -> int:
        return ch.int(2 if "factor1" in self.exclude else 1, 9)

    def names(self):
        return [l.name for l in self.loops]

    def find(self, name) -> int:
        return self.names().index(name)

    def prefix(self) -> str:
        return self.fname + (f".update({self.index})" if self.index >= 0 else "")

    def fresh(self) -> str:
        """A new loop name (t1, t2, ...: never one that exists, never ending in '_i')."""
        while True:
            self.counter += 1
            n = f"t{self.counter}"
            if n not in self.names():
                return n

    @staticmethod
    def order_ok(loops: list[Loop]) -> bool:
        """The rdom points are still visited in lexicographic order."""
        keys = [k for l in loops for k in l.comps]
        return all(a < b for a, b in zip(keys, keys[1:]))

    # the directives, each returning False when it does not apply
    def _split_loops(self, l: Loop, outer: str, inner: str, n: int) -> list[Loop] | None:
        if len(l.comps) > 1:
            return None        # a fused rvar-derived loop: keep it whole
        ci = tuple(c + (0,) for c in l.comps)
        co = tuple(c + (1,) for c in l.comps)
        ext_o = None if l.extent is None else -(-l.extent // n)
        return [Loop(inner, ci, n), Loop(outer, co, ext_o, l.kind)]

    def split(self, ch: Chooser) -> bool:
        cands = [l for l in self.loops if l.nameable and l.kind in ("serial", "parallel") and len(l.comps) <= 1]
        if not cands:
            return False
        l = ch.choice(cands)
        n = self.factor(ch)
        outer, inner = self.fresh(), self.fresh()
        i = self.find(l.name)
        self.loops[i:i + 1] = self._split_loops(l, outer, inner, n)
        self.lines.append(f"split({l.name}, {outer}, {inner}, {n})")
        return True

    def tile(self, ch: Chooser) -> bool:
        cands = [l for l in self.loops if l.nameable and l.kind in ("serial", "parallel") and len(l.comps) <= 1]
        if len(cands) < 2:
            return False
        lx, ly = ch.subset_permutation(cands, 2)
        w, h = self.factor(ch), self.factor(ch)
        long_form = ch.bool(30)
        if long_form:
            xo, yo = self.fresh(), self.fresh()
        else:
            xo, yo = lx.name, ly.name
        xi, yi = self.fresh(), self.fresh()
        trial = list(self.loops)
        for l, outer, inner, n in ((lx, xo, xi, w), (ly, yo, yi, h)):
            i = [t.name for t in trial].index(l.name)
            trial[i:i + 1] = self._split_loops(l, outer, inner, n)
        trial = _reordered(trial, [xi, yi, xo, yo])
        if not self.order_ok(trial):
            return False
        self.loops = trial
        if long_form:
            self.lines.append(f"tile({lx.name}, {ly.name}, {xo}, {yo}, {xi}, {yi}, {w}, {h})")
        else:
            self.lines.append(f"tile({lx.name}, {ly.name}, {xi}, {yi}, {w}, {h})")
        return True

    def reorder(self, ch: Chooser) -> bool:
        cands = [l.name for l in self.loops if l.nameable]
        if len(cands) < 2:
            return False
        k = ch.int(2, min(4, len(cands)))
        names = ch.subset_permutation(cands, k)
        trial = _reordered(self.loops, names)
        if not self.order_ok(trial):
            return False
        self.loops = trial
        self.lines.append(f"reorder({', '.join(names)})")
        return True

    def fuse(self, ch: Chooser) -> bool:
        cands = [l for l in self.loops if l.nameable and l.kind == "serial"]
        if len(cands) < 2:
            return False
        a, b = ch.subset_permutation(cands, 2)
        ab = self.fresh()
        ext = a.extent * b.extent if a.extent is not None and b.extent is not None else None
        trial = [l for l in self.loops if l is not b]
        trial[trial.index(a)] = Loop(ab, a.comps + b.comps, ext)
        if not self.order_ok(trial):
            return False
        self.loops = trial
        self.lines.append(f"fuse({a.name}, {b.name}, {ab})")
        return True

    def _mark(self, ch: Chooser, what: str) -> bool:
        kind = {"vectorize": "vectorized", "unroll": "unrolled", "parallel": "parallel"}[what]
        racy = what != "unroll"
        cands = [l for l in self.loops if l.nameable and l.kind == "serial"
                 and not (racy and l.from_rvar) and len(l.comps) <= 1]
        if not cands:
            return False
        l = ch.choice(cands)
        with_factor = what == "parallel" and ch.bool(50) or what != "parallel" and (l.extent is None or ch.bool(70))
        if with_factor:
            inner = l.name + "_i"
            if inner in self.names():
                return False
            n = self.factor(ch)
            i = self.find(l.name)
            new = self._split_loops(l, l.name, inner, n)
            if what == "parallel":
                new[1].kind = kind
            else:
                new[0].kind = kind
            self.loops[i:i + 1] = new
            self.lines.append(f"{what}({l.name}, {n})")
        else:
            if what != "parallel" and l.extent is None:
                return False
            l.kind = kind
            self.lines.append(f"{what}({l.name})")
        return True

    def gpu(self, ch: Chooser) -> None:
        """A GPU directive on loops that exist (the loop list is left as it is: nothing after it
        is compiled, the CPU target refuses it)."""
        names = [l.name for l in self.loops if l.nameable]
        kind = ch.choice(["gpu_blocks", "gpu_threads", "gpu_tile"] if len(names) >= 2 else ["gpu_blocks"])
        if kind == "gpu_tile":
            x, y = ch.subset_permutation(names, 2)
            self.lines.append(f"gpu_tile({x}, {y}, {self.fresh()}, {self.fresh()}, {self.factor(ch)}, "
                              f"{self.factor(ch)})")
        else:
            self.lines.append(f"{kind}({', '.join(ch.subset_permutation(names, ch.int(1, min(2, len(names)))))})")

    def gpu_valid(self, ch: Chooser, tails: tuple = ()) -> bool:
        """A GPU mapping a GPU target runs: gpu_tile (2-D or 1-D; 3-D where `tails` is given),
        or gpu_blocks(a) and gpu_threads(b) with b, of a small known extent, inside a; marks
        the loops gpu_block / gpu_thread. `tails`: the tail strategies a gpu_tile may name
        (besides none) — the CUDA fuzz's wider schedules; none for OpenGL's, as before."""
        cands = [l for l in self.loops if l.nameable and l.kind == "serial" and not l.comps]
        if not cands:
            return False
        kinds = ["tile2", "tile1", "blocks_threads"] if len(cands) >= 2 else ["tile1"]
        # 3-D: three neighbouring loops (else a loop between two of them would lie between
        # the block loops, which is an error: a serial loop inside the kernel's grid)
        runs = [self.loops[i:i + 3] for i in range(len(self.loops) - 2)
                if all(l in cands for l in self.loops[i:i + 3])]
        if tails and runs:
            kinds.append("tile3")
        kind = ch.choice(kinds)
        if kind == "blocks_threads" and not any(l.extent is not None and l.extent <= 32 for l in cands):
            kind = "tile2"
        tail = ""
        if tails and kind != "blocks_threads":
            t = ch.choice([None, *tails])
            tail = f", {t}" if t else ""
        if kind in ("tile2", "tile3"):
            picked = ch.subset_permutation(cands, 2) if kind == "tile2" else \
                ch.subset_permutation(ch.choice(runs), 3)
            sizes = [self.factor(ch) for _ in picked]          # (at most 9 x 9 x 9 threads)
            inners = [self.fresh() for _ in picked]
            trial = list(self.loops)
            for l, inner, n in zip(picked, inners, sizes):
                i = [t.name for t in trial].index(l.name)
                trial[i:i + 1] = self._split_loops(l, l.name, inner, n)
            trial = _reordered(trial, inners + [l.name for l in picked])
            for t in trial:
                if t.name in inners:
                    t.kind = "gpu_thread"
                elif t.name in [l.name for l in picked]:
                    t.kind = "gpu_block"
            self.loops = trial
            self.lines.append(f"gpu_tile({', '.join(l.name for l in picked)}, {', '.join(inners)}, "
                              f"{', '.join(map(str, sizes))}{tail})")
        elif kind == "tile1":
            l = ch.choice(cands)
            n = self.factor(ch)
            inner = self.fresh()
            i = self.find(l.name)
            new = self._split_loops(l, l.name, inner, n)
            new[0].kind, new[1].kind = "gpu_thread", "gpu_block"
            self.loops[i:i + 1] = new
            self.lines.append(f"gpu_tile({l.name}, {inner}, {n}{tail})")
        else:
            # the threads: a loop of a small known extent (a split's inner loop; a whole
            # dimension may be bound() to more than a block's 1024 threads)
            small = [l for l in cands if l.extent is not None and l.extent <= 32]
            if not small:
                return False
            b = ch.choice(small)
            outer = [l for l in cands if self.find(l.name) > self.find(b.name)]
            if not outer:
                return False
            a = ch.choice(outer)
            a.kind, b.kind = "gpu_block", "gpu_thread"
            self.lines.append(f"gpu_blocks({a.name}).gpu_threads({b.name})")
        return True

    def threads_only(self, ch: Chooser) -> bool:
        """gpu_threads on one or two pure loops of a small known extent (a Func computed at a
        block loop: its whole dimensions may be bound() to more than 1024 points)."""
        cands = [l for l in self.loops if l.nameable and l.kind == "serial" and not l.comps
                 and l.extent is not None and l.extent <= 32]
        if not cands:
            return False
        picked = ch.subset_permutation(cands, ch.int(1, min(2, len(cands))))
        for l in picked:
            l.kind = "gpu_thread"
        self.lines.append(f"gpu_threads({', '.join(l.name for l in picked)})")
        return True

    def random_directive(self, ch: Chooser, directives=DIRECTIVES) -> bool:
        what = ch.choice(directives)
        if what in ("vectorize", "unroll", "parallel"):
            return self._mark(ch, what)
        return getattr(self, what)(ch)


def _reordered(loops: list[Loop], names: list[str]) -> list[Loop]:
    """reorder(names...): the named loops take their own positions, innermost first in the given order."""
    out = list(loops)
    by_name = {l.name: l for l in loops}
    positions = sorted(i for i, l in enumerate(loops) if l.name in names)
    for p, n in zip(positions, names):
        out[p] = by_name[n]
    return out


# ----------------------------------------------------------------------------- the pipeline's Funcs
def _stage_exprs(f: Func, stage: int):
    if stage == 0:
        return list(f.values or [])
    u = f.updates[stage - 1]
    exprs = list(u.args) + list(u.values)
    if u.rdom is not None:
        for lo, ext in u.rdom.bounds:
            exprs += [lo, ext]
        if u.rdom.predicate is not None:
            exprs.append(u.rdom.predicate)
    return exprs


def rfactor_dims(f: Func, u: Update) -> list[int]:
    """The rdom dimensions `rfactor` may factor out of update `u` of `f` (none: not allowed)."""
    if u.rdom is None or u.iir is not None or len(u.values) != 1 or not all(isinstance(a, Var) for a in u.args):
        return []
    v = u.values[0]
    if not (isinstance(v, BinOp) and v.op in ("+", "*", "min", "max") and isinstance(v.a, FuncCall)
            and v.a.func is f and all(isinstance(a, Var) and a.name == b.name for a, b in zip(v.a.args, u.args))):
        return []
    if any(isinstance(n, FuncCall) and n.func is f for n in walk(v.b)):
        return []
    if len(u.rdom.bounds) == 1 and u.rdom.predicate is not None:
        return []
    return list(range(len(u.rdom.bounds)))


def _direct_callees(f: Func, stage: int) -> list[Func]:
    out = []
    for e in _stage_exprs(f, stage):
        for n in walk(e):
            if isinstance(n, FuncCall) and n.func is not f and all(n.func is not g for g in out):
                out.append(n.func)
    return out


@dataclass
class FuncInfo:
    func: Func
    sname: str | None                      # how a schedule names it; None: it can't be named
    is_output: bool
    stage_callees: list[list[Func]] = field(default_factory=list)

    @property
    def has_updates(self) -> bool:
        return bool(self.func.updates)


class PipelineInfo:
    """The Funcs of a pipeline and the names a schedule reaches them by."""

    def __init__(self, pipeline_ir, text: str, no_inline=()):
        import hdsl
        self.ir = pipeline_ir
        self.funcs = pipeline_ir.funcs          # producers before consumers
        names = _schedule_names(pipeline_ir)
        # check the names the way a schedule would use them
        if names:
            probe = "\nschedule probe_names {\n" + "".join(f"    {n}.memoize()\n" for n in names.values()) + "}\n"
            p = hdsl.loads(text + probe, "<probe>")
            sched = p.ir.schedules["probe_names"]
            got = [f.name for f in sched.funcs.values()]
            want = [f.name for f in self.funcs if id(f) in names]
            assert sorted(got) == sorted(want), (got, want)
        self.infos = {}
        for f in self.funcs:
            self.infos[id(f)] = FuncInfo(f, names.get(id(f)), f in pipeline_ir.outputs,
                                         [_direct_callees(f, s) for s in range(1 + len(f.updates))])
        self.no_inline = set(no_inline)
        # id(f) -> ids of the Funcs that read f, directly or not
        self.downstream: dict[int, set[int]] = {id(f): set() for f in self.funcs}
        for g in self.funcs:                      # producers first
            for callees in self.infos[id(g)].stage_callees:
                for c in callees:
                    self.downstream[id(c)].add(id(g))
        for f in reversed(self.funcs):            # consumers first: close transitively
            for gid in list(self.downstream[id(f)]):
                self.downstream[id(f)] |= self.downstream[gid]

    def info(self, f: Func) -> FuncInfo:
        return self.infos[id(f)]


def _schedule_names(p) -> dict[int, str]:
    """id(Func) -> a name by which a schedule can reach it (plain names, and fn locals as `g.local`)."""
    reductions = ("sum", "product", "maximum", "minimum", "argmax", "argmin")
    names: dict[int, str] = {}
    for f in p.funcs:
        # '$n' marks a renamed copy, '(' an unnamed boundary condition; the implicit Funcs of
        # inline reductions are named after the reduction and cannot be reached
        if _plain(f.name) and not (f.implicit and f.name in reductions):
            names[id(f)] = f.name
    for f in p.funcs:
        if id(f) in names:
            for local, g in f.locals.items():
                if id(g) not in names and any(g is h for h in p.funcs):
                    names[id(g)] = f"{names[id(f)]}.{local}"
    return names


def _plain(name: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_]\w*(\[\d+\])?", name))


# ----------------------------------------------------------------------------- the generator
@dataclass
class Level:
    kind: str                      # inline, innermost, root, at
    func: Func | None = None
    var: str | None = None


class Generated:
    def __init__(self):
        self.lines: list[str] = []

    def block(self, name: str = "fuzz") -> str:
        body = "".join(f"    {l}\n" for l in self.lines)
        return f"\nschedule {name} {{\n{body}}}\n"


AVOIDABLE = {
    "store": "no store_root/store_at",
    "innermost": "no Func with updates left unscheduled",
    "update_at": "Funcs with update definitions computed at the root only",
    "dollar_at": "no compute_at/store_at inside a Func whose internal name has a '$n' suffix",
    "factor1": "split factors 2..9, never 1",
}


def _renderable(t) -> bool:
    """An element type the fragment path has a texture format for."""
    return t.is_bool() or (t.is_float() and t.bits == 32) or (t.is_integral() and t.bits <= 32)


def joint_iir(f: Func):
    """The two dims of f's filters when tile_iir(a, b, na, nb) applies: every update a filter,
    those along one dim first, each dim's filters over one range; else None."""
    ups = f.updates
    if not ups or any(u.iir is None for u in ups):
        return None
    dims = [u.iir[0] for u in ups]
    if len(set(dims)) != 2:
        return None
    m = next(i for i, d in enumerate(dims) if d != dims[0])
    if any(d != dims[m] for d in dims[m:]):
        return None
    for run in (ups[:m], ups[m:]):
        if any(repr(u.iir[2:4]) != repr(run[0].iir[2:4]) for u in run):
            return None
    return f.args[dims[0]], f.args[dims[m]]


def generate(pi: PipelineInfo, ch: Chooser, max_directives: int = 4, exclude=(),
             output_sizes: dict[str, list[int]] | None = None, bound_box: tuple[int, int] | None = None,
             gpu: bool = False, gpu_valid: bool = False, gpu_wide: bool = False,
             fragment: bool = False) -> Generated:
    """A random valid schedule. `exclude` names directives (DIRECTIVES, "rfactor", "bound",
    "reorder_storage") or choices (AVOIDABLE) not to generate: only for hunting bugs past known
    ones, the tests exclude nothing. `output_sizes` (output name -> the size realized) and
    `bound_box` ((min, extent) for every dimension of an intermediate) allow `bound`; `gpu`
    adds GPU directives (the first materialised Func always gets one). `fragment` (with
    gpu_valid, for OpenGL): a pure 2-D Func of one 8/16/32-bit value at the root may instead be
    rendered by OpenGL's fragment path, `glsl(x, y)` as its only loop directive (nothing is
    computed inside its loops: a fragment has no shared memory). `gpu_valid` gives GPU
    schedules a GPU target runs, and `gpu_wide` with it wider ones (the CUDA fuzz's): 3-D
    gpu_tile, tail strategies on gpu_tile (round_up only on an intermediate, and only where
    `bound_box` says every input read has a boundary condition), and updates of GPU Funcs
    tiled over their pure vars (each point's reduction in its own thread)."""
    out = Generated()
    rendered: set[int] = set()               # id(Func) of the glsl(...) ones
    if gpu_valid:
        exclude = tuple(exclude) + ("vectorize", "unroll", "parallel", "rfactor", "tile_iir", "store")
    directives = tuple(d for d in DIRECTIVES if d not in exclude)
    # gpu_valid: where each materialised Func runs: "host", "block" (computed at a GPU Func's
    # innermost block loop: its own thread loops) or "thread" (inside a thread loop)
    ctx: dict[int, str] = {}

    def site_ctx(G: Func, v: str) -> str | None:
        """What a Func computed at loop v of G runs in (None: it may not be computed there)."""
        if ctx.get(id(G)) == "thread":
            return "thread"
        if id(G) in rendered:
            return None
        loops = pure_loops(G)
        kinds = [l.kind for l in loops]
        i = index(G, v)
        threads = [k for k, kind in enumerate(kinds) if kind == "gpu_thread"]
        blocks = [k for k, kind in enumerate(kinds) if kind == "gpu_block"]
        if threads and i <= max(threads):
            return "thread"
        if ctx.get(id(G)) == "block":
            return None
        if not blocks or i > max(blocks):
            return "host"
        return "block" if i == min(blocks) else None
    level: dict[int, Level] = {}
    stages: dict[int, list[Stage]] = {}       # the final loop lists of materialised Funcs
    rfactored: dict[int, set[int]] = {}       # id(Func) -> its stages (1 + update index) factored
    bounded: set[int] = set()                 # intermediates given the bound box
    # Funcs given tile_iir: apply_tile_iir moves a Func computed inside one, or read by its
    # stages (computed at the root), to the root, where what it reads must then be too
    tiled: set[int] = set()

    def materialised(g) -> bool:
        return level[id(g)].kind in ("root", "at")

    def transparent(h: Func) -> bool:
        """Inlined, or an unscheduled reduction computed innermost around uses in a single stage."""
        lv = level[id(h)].kind
        if lv == "inline":
            return True
        if lv == "innermost":
            u = uses(h)
            return len(u) == 1 and len(u[0][1]) == 1
        return False

    def reads(h: Func, f: Func) -> bool:
        """h's definitions read f, directly or through transparent Funcs."""
        return any(reads_in(callees, f) for callees in pi.info(h).stage_callees)

    def reads_in(callees: list[Func], f: Func) -> bool:
        # only Funcs downstream of f can read it (and they are all decided already)
        return any(c is f or (id(c) in pi.downstream[id(f)] and transparent(c) and reads(c, f))
                   for c in callees)

    def uses(f: Func) -> list[tuple[Func, set[int]]]:
        """The placed Funcs (materialised, or innermost but not transparent) that read f,
        each with the stages that read it."""
        found = []
        for g in pi.funcs:
            if id(g) not in pi.downstream[id(f)]:
                continue
            stages_reading = {s for s, callees in enumerate(pi.info(g).stage_callees) if reads_in(callees, f)}
            if stages_reading and not transparent(g):
                found.append((g, stages_reading))
        return found

    def loc(g: Func) -> list[tuple[Func, str]]:
        """Where g is computed: the (Func, loop) chain from the root inwards."""
        lv = level[id(g)]
        if lv.kind == "at":
            return loc(lv.func) + [(lv.func, lv.var)]
        return []

    def pure_loops(g: Func) -> list[Loop]:
        return stages[id(g)][0].loops

    def index(g: Func, var: str) -> int:
        return [l.name for l in pure_loops(g)].index(var)

    def inside(g: Func, G: Func, v: str) -> bool:
        """g is computed inside loop v of G (at v or at a loop within it)."""
        return any(H is G and index(G, w) <= index(G, v) for H, w in loc(g))

    def reads_output(f: Func) -> bool:
        """f reads an output, directly or not (a bound() on f would widen that output's region)."""
        return any(id(f) in pi.downstream[id(o)] for o in pi.funcs if pi.info(o).is_output)

    def compute_at_sites(f: Func) -> list[tuple[Func, str]]:
        us = uses(f)
        if not us or any(s & rfactored.get(id(g), set()) for g, s in us):
            return []      # (read by a factored update: by its intermediate, at the root)
        if any(id(g) in tiled for g, _ in us):
            return []      # (read by tile_iir's stages, which are computed at the root)
        sites = []
        for G in pi.funcs:
            if G is f or pi.info(G).sname is None or id(G) not in level or not materialised(G):
                continue
            if id(G) in tiled:
                continue   # (what is computed inside a tiled Func moves to the root)
            if "dollar_at" in exclude and "$" in G.name:
                continue
            for l in pure_loops(G):
                if l.nameable and all((g is G and s == {0}) or inside(g, G, l.name) for g, s in us):
                    where = site_ctx(G, l.name) if gpu_valid else "host"
                    if where is None or (where == "block" and (pi.info(f).has_updates or not f.args)):
                        continue
                    sites.append((G, l.name))
        return sites

    def store_sites(G: Func, v: str) -> list[tuple[Func | None, str | None]]:
        """Storage levels enclosing compute_at(G, v) with no parallel loop in between."""
        chain = loc(G) + [(G, v)]
        sites = []
        options = [(None, None, 0)]
        for k, (H, u) in enumerate(chain):
            for l in pure_loops(H)[index(H, u):]:
                if (H, l.name) != (G, v) and l.nameable:
                    options.append((H, l.name, k))
        for H, w, k in options:
            between = []
            for j, (Hj, uj) in enumerate(chain[k:], start=k):
                lo = index(Hj, uj)
                hi = index(Hj, w) if (H is not None and j == k) else len(pure_loops(Hj))
                between += pure_loops(Hj)[lo:hi]
            if not any(l.kind == "parallel" for l in between):
                sites.append((H, w))
        return sites

    for f in reversed(pi.funcs):
        inf = pi.info(f)
        if inf.is_output:
            lv = Level("root")
        elif inf.sname is None:
            lv = Level("innermost" if inf.has_updates else "inline")
        else:
            options = ["root"]
            if not inf.has_updates and inf.sname not in pi.no_inline:
                options.append("inline")
            if inf.has_updates and "innermost" not in exclude:
                options.append("innermost")      # left unscheduled
            sites = compute_at_sites(f) if not (inf.has_updates and "update_at" in exclude) else []
            if sites:
                options += ["at", "at"]
            kind = ch.choice(options)
            if kind == "at":
                G, v = ch.choice(sites)
                lv = Level("at", G, v)
            else:
                lv = Level(kind)
        level[id(f)] = lv
        ctx[id(f)] = site_ctx(lv.func, lv.var) if gpu_valid and lv.kind == "at" else "host"
        if inf.sname is None or lv.kind in ("inline", "innermost"):
            continue
        # stage directives
        sts = [Stage(inf.sname, -1, [Loop(a) for a in f.args])]
        for i, u in enumerate(f.updates):
            loops = []
            if u.rdom is not None:
                loops = [Loop(RVar(u.rdom, k).name, ((k,),)) for k in range(len(u.rdom.bounds))]
            loops += [Loop(a.name) for a in u.args if isinstance(a, Var)]
            sts.append(Stage(inf.sname, i, loops))
        if (fragment and ctx[id(f)] == "host" and lv.kind == "root" and not inf.has_updates
                and len(f.args) == 2 and len(f.values) == 1 and _renderable(f.values[0].type) and ch.bool(50)):
            rendered.add(id(f))
            sts[0].lines = [f"glsl({f.args[0]}, {f.args[1]})"]
            for l in sts[0].loops:
                l.kind = "gpu_block"
            out.lines += [f"{sts[0].prefix()}.{d}" for d in sts[0].lines]
            stages[id(f)] = sts
            if lv.kind == "root" and not inf.is_output:
                out.lines.append(f"{inf.sname}.compute_root()")
            continue
        for st in sts:
            st.exclude = exclude
            for _ in range(ch.int(0, max_directives)):
                st.random_directive(ch, directives)
            if gpu and st.index < 0 and (not stages or ch.bool(30)):
                st.gpu(ch)
            tails = ()
            if gpu_wide:
                tails = ("guard_with_if", "shift_inwards") + \
                    (("round_up",) if not inf.is_output and bound_box is not None else ())
            if gpu_valid and st.index < 0:
                if ctx[id(f)] == "block":
                    if ch.bool(70):       # (else one thread of the block computes it)
                        st.threads_only(ch)
                elif ctx[id(f)] == "host" and (inf.is_output or ch.bool(50)):
                    st.gpu_valid(ch, tails)
            elif gpu_valid and gpu_wide and ctx[id(f)] == "host" and ch.bool(40):
                # an update on the GPU: its pure vars' loops only (an update reads its Func at
                # the same values of its pure vars, so their iterations never race)
                st.gpu_valid(ch, ("guard_with_if",))
            if st.index >= 0 and "rfactor" not in exclude:
                u = f.updates[st.index]
                dims = rfactor_dims(f, u)
                if dims and ch.bool(40):
                    # the stage's only directive: hdsl's rfactor factors the update as written
                    # (directives before it would name loops the factored update no longer has)
                    st.lines = [f"rfactor({RVar(u.rdom, ch.choice(dims)).name}, {st.fresh()})"]
                    rfactored.setdefault(id(f), set()).add(st.index + 1)
            out.lines += [f"{st.prefix()}.{d}" for d in st.lines]
        stages[id(f)] = sts
        if "reorder_storage" not in exclude and not inf.is_output and len(f.args) >= 2 and ch.bool(25):
            out.lines.append(f"{inf.sname}.reorder_storage({', '.join(ch.subset_permutation(f.args, len(f.args)))})")
        if "bound" not in exclude and ch.bool(30):
            size = (output_sizes or {}).get(f.name) if inf.is_output else None
            for d, a in enumerate(f.args):
                if size is not None and ch.bool(60):
                    out.lines.append(f"{inf.sname}.bound({a}, 0, {size[d]})")
                elif (lv.kind == "root" and not inf.is_output and len(f.args) <= 2 and bound_box is not None
                      and not reads_output(f) and not pi.downstream[id(f)] & bounded and ch.bool(60)):
                    out.lines.append(f"{inf.sname}.bound({a}, {bound_box[0]}, {bound_box[1]})")
                    bounded.add(id(f))
        iir_dims = sorted({u.iir[0] for u in f.updates if u.iir is not None})
        if joint_iir(f) and "tile_iir" not in exclude and ch.bool(30):
            # both dims tiled together (lower/tile_iir2d.py): f is computed on its filters'
            # box, which its consumers must not read past (the corpus' iir reads rf on the
            # image), and its filters' stages and bounds are not its own to schedule
            a, b = joint_iir(f)
            out.lines = [ln for ln in out.lines
                         if not ln.startswith((f"{inf.sname}.update(", f"{inf.sname}.bound("))]
            out.lines.append(f"{inf.sname}.tile_iir({a}, {b}, {ch.int(1, 9)}, {ch.int(1, 9)})")
            tiled.add(id(f))
        elif iir_dims and "tile_iir" not in exclude and ch.bool(40):
            # the tiled filters replace their update stages (their directives are dropped)
            d = ch.choice(iir_dims)
            out.lines.append(f"{inf.sname}.tile_iir({f.args[d]}, {ch.int(1, 9)})")
            tiled.add(id(f))
            if ch.bool(40):
                # a stage it makes of one of the filters along d, named (update k: .lastK,
                # .finalK; their loops over the tiles run in any order)
                k = ch.choice([i for i, u in enumerate(f.updates) if u.iir is not None and u.iir[0] == d])
                tile = f"{f.args[d]}_tile"
                out.lines.append(ch.choice([f"{inf.sname}.last{k}.parallel({tile})",
                                            f"{inf.sname}.final{k}.update(0).parallel({tile})",
                                            f"{inf.sname}.final{k}.compute_root().parallel({tile})"]))
        if lv.kind == "root" and not inf.is_output:
            out.lines.append(f"{inf.sname}.compute_root()")
        elif lv.kind == "at":
            out.lines.append(f"{inf.sname}.compute_at({pi.info(lv.func).sname}, {lv.var})")
            if ch.bool(35) and "store" not in exclude:
                sites = store_sites(lv.func, lv.var)
                if sites:
                    H, w = ch.choice(sites)
                    out.lines.append(f"{inf.sname}.store_root()" if H is None
                                     else f"{inf.sname}.store_at({pi.info(H).sname}, {w})")
    return out


def _nameable(name: str) -> bool:
    return Loop(name).nameable
