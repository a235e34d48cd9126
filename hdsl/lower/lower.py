"""The lowering pipeline: algorithm + schedule → a flat loop nest. Read top to bottom."""
from __future__ import annotations

import os
import time

from hdsl.diagnostics import HdslError
from hdsl.ir.expr import BinOp, Const, FuncCall, InputCall, RVar, Var, clear_interned, free_vars, memo_table, walk
from hdsl.ir.func import Directive, Pipeline, Schedule, topo_order
from hdsl.ir.printer import stmt_str
from hdsl.ir.simplify import simplify
from hdsl.ir.verify import entry_symbols, verify
from hdsl.ir.stmt import Assert, Block, For, LetStmt, RuntimeFold, Stmt, block, children
from hdsl.ir.types import BOOL, I32
from hdsl.lower.flatten import flatten
from hdsl.lower.gpu import check_gpu_loops, check_block_limits, device_copies, gpu_memory, outline_kernels
from hdsl.lower.rfactor import apply_rfactor
from hdsl.lower.tile_iir import apply_tile_iir
from hdsl.lower.inline import inline_definitions
from hdsl.lower.partition import partition_loops
from hdsl.lower import loops
from hdsl.lower.hoist import hoist_invariants
from hdsl.lower.loops import (ERR_FLOAT_COORDINATE, ERR_INPUT_BOUNDS, ERR_OUTPUT_BOUNDS, LoopBuilder, compute_site, fix_extents,
                              func_schedules, inject_at_loop, innermost_loop_using, lane_dim,
                              loop_names, strip_region_clamps)
from hdsl.lower.symbolic import box_of, float_coordinate_checks
from hdsl.schedule.record import refuse_unsupported
from hdsl.target import Target, parse_target

PASSES = ("schedule_functions", "check_gpu_loops", "bounds_checks", "strip_region_clamps", "flatten", "gpu_memory",
          "partition_loops", "hoist_invariants", "outline_kernels", "check_block_limits", "device_copies")


def choose_schedule(p: Pipeline, name: str | None, target: "str | Target" = "host") -> Schedule | None:
    """The schedule block named, else the target's own (`schedule cuda` for the CUDA targets and
    cuda-emulate, `schedule opengl` for opengl), else `schedule avx2` on a CPU target with AVX2's
    256-bit vectors (x86-64-avx2, a host without AVX-512), else `schedule cpu`, else the unnamed
    one. (A Schedule itself is taken as it is: the automatic scheduler lowers its candidates.)"""
    if isinstance(name, Schedule):
        return name
    if name == "auto":
        # the automatic scheduler's (whether or not the file has a `schedule auto` block)
        from hdsl.schedule.auto import auto_schedule
        return auto_schedule(p, parse_target(target).name)
    if name is not None:
        if name not in p.schedules:
            names = ", ".join(n for n in p.schedules if n) or "(none)"
            raise HdslError(f"pipeline '{p.name}' has no schedule '{name}'", None, f"its named schedules: {names}")
        return p.schedules[name]
    own = parse_target(target).schedule
    if own is not None and own in p.schedules:
        return p.schedules[own]
    if "avx2" in p.schedules and cpu_vector_bits(parse_target(target)) == 256:
        # the schedule written for AVX2's vectors (the natural vector size a Halide app asks
        # its target for): on x86-64-avx2, and on a host without AVX-512
        return p.schedules["avx2"]
    if "cpu" in p.schedules:
        return p.schedules["cpu"]
    return p.schedules.get(None)


def cpu_vector_bits(target) -> int:
    """The width of the CPU vectors target's host code is compiled for: 512 on x86-64-avx512
    and on an AVX-512 host, else 256."""
    if target.cpu == "x86-64-avx512":
        return 512
    if target.cpu == "host":
        import llvmlite.binding as llvm
        return 512 if llvm.get_host_cpu_features().get("avx512bw", False) else 256
    return 256


class Lowered:
    def __init__(self, stmt: Stmt, pipeline: Pipeline, stages: dict[str, Stmt], timings: dict[str, float],
                 nontemporal: frozenset = frozenset()):
        self.stmt, self.pipeline, self.stages, self.timings = stmt, pipeline, stages, timings
        # the buffers whose dense vector stores are non-temporal (`store_nontemporal()`)
        self.nontemporal = nontemporal


def schedule_functions(p: Pipeline, sched: Schedule | None, shift_outputs: bool = False,
                       info: dict | None = None) -> Stmt:
    funcs = topo_order(p.outputs)
    scheds = func_schedules(funcs, p.outputs, sched)
    inlined = {id(f) for f in funcs if scheds[id(f)].compute.kind == "inline" and f not in p.outputs}
    defs = inline_definitions(funcs, inlined)
    # rfactor adds intermediate Funcs (after inlining, so they see inlined definitions)
    funcs = apply_rfactor(funcs, defs, scheds)
    # tile_iir replaces filters by the Funcs of their tiled form
    funcs = apply_tile_iir(funcs, defs, scheds, sched, p.outputs)
    if info is not None:
        # the storage orders tile_iir gives the Funcs it makes (a schedule's reorder_storage
        # names Funcs of the program: lower() reads those from the schedule)
        for g in funcs:
            for d in scheds[id(g)].stages.get(-1, []):
                if d.name == "reorder_storage" and g.implicit:
                    order = [g.args.index(a) for a in d.args]
                    info.setdefault("storage_orders", {})[id(g)] = order + [i for i in range(g.dims)
                                                                           if i not in order]
    lb = LoopBuilder(defs, scheds, p.outputs)
    lb.shift_outputs = shift_outputs
    stmt: Stmt = Block(())
    # consumers first, outputs among the rest: each production wraps what follows it, so
    # every Func (an output read by another Func too) is produced before its consumers
    for f in reversed(funcs):
        if id(f) in inlined:
            continue
        if f in p.outputs:
            # an output's region is its buffer (what other Funcs read of it is checked
            # against the buffer by bounds_checks)
            required = [(Var(f"{f.name}.min.{d}", I32),
                         simplify(BinOp("-", BinOp("+", Var(f"{f.name}.min.{d}", I32),
                                                   Var(f"{f.name}.extent.{d}", I32), I32), Const(I32, 1), I32)))
                        for d in range(f.dims)]
            stmt = lb.wrap_compute(f, stmt, required)
            continue
        fs = scheds[id(f)]
        level = fs.compute
        site = None
        if level.kind == "at":
            g, v = level.func, level.var
            site = compute_site(stmt, g, _stage_count(g, defs), v, f)
            if site is None:
                raise HdslError(f"'{f.name}' is computed at loop '{v}' of '{g.name}', but '{g.name}' has no such "
                                "loop (is it computed inline?)", level.span,
                                f"schedule '{g.name}' too, e.g. compute_root()")
        elif level.kind == "innermost":
            site, vector, skipped = innermost_loop_using(stmt, f)
            if vector is not None and _computed_within(f, defs, scheds, skipped):
                # a Func f reads is computed inside the loops f would leave: stay inside
                site, vector, _ = innermost_loop_using(stmt, f, above_vectors=False)
            if f.implicit and f.dims == 0 and not _computed_within(f, defs, scheds, loop_names(stmt)):
                # a scalar inline reduction (a kernel's norm, sum(w(r))) depends on no loop:
                # computed once, at the root, not per vector or per row
                site, vector = None, None
            if vector is not None and f.implicit and not any(fs.stages.values()):
                # an inline reduction (sum(...)) read by vector code: computed just outside
                # the vector loop, over its lanes, and vectorized the same way (its update
                # with the lanes' dim innermost: each point reduces into itself)
                d = lane_dim(vector, f)
                lanes = vector.extent.value if isinstance(vector.extent, Const) else None
                if d is not None and lanes:
                    v = f.args[d]
                    fs.stages[-1] = [Directive("vectorize", [v, lanes])]
                    for k, u in enumerate(defs[id(f)].updates):
                        rvars = [RVar(u.rdom, i).name for i in range(len(u.rdom.bounds))] if u.rdom else []
                        # lanes outside the reduction: each vector of points sums over the
                        # whole domain while its partial sums stay in registers
                        order = rvars + [v + "_i", v] + [a for a in f.args if a != v]
                        fs.stages[k] = [Directive("vectorize", [v, lanes]), Directive("reorder", order)]

        slides = fs.store != fs.compute and level.kind == "at"
        # a producer reshaped along the folded dim may compute past its window (rounded-up
        # splits): folding its storage could overwrite rows still to be read, so the fold's
        # dim is folded only when no loop of it is split (x may be: vectorize(x, 8) computes
        # the window's rows and no others)
        reshaping = [d for d in fs.stages.get(-1, [])
                     if d.name in ("split", "tile", "fuse", "vectorize", "unroll", "parallel", "gpu_tile")]

        def foldable(dim, f=f, reshaping=reshaping):
            if not loops.BOUNDED_FOLDS:
                return not reshaping
            return not any(f.args[dim] in d.args for d in reshaping)
        explicit = explicit_fold(f, fs) if fs.folds else None
        if explicit is not None:
            lb.fold_checks[id(f)] = explicit

        # f's region in its consumers, kept for its storage's (realize: the consumers again,
        # which do not write f, beside its production)
        seen: dict = {}

        slid_at: list = []      # (dim, loop, window) of each sliding-window rewrite of f

        def compute(body, loop=None, f=f, slides=slides, explicit=explicit, seen=seen, slid_at=slid_at):
            required, outer = lb.required_region(f, body, seen)
            if required is None:
                return body
            slide = loop if slides and loop is not None and loop.kind == "serial" else None
            lb.slid = None
            out = lb.wrap_compute(f, body, required, slide, outer)
            if lb.slid is not None:
                slid_at.append((lb.slid[0], lb.slid_loop, lb.slid_window))
            if explicit is not None and lb.slid is None:
                dim, n, d = explicit
                raise HdslError(f"fold_storage({f.args[dim]}, {n}): the storage of '{f.name}' does not slide "
                                f"along {f.args[dim]} inside a serial loop", d.span,
                                "fold the storage of a Func stored outside a serial loop (store_at) and computed "
                                "inside it (compute_at), whose region moves along one dimension with that loop")
            return lb.realize(f, out, known=seen) if fs.store == fs.compute or fs.compute.kind == "innermost" \
                else out
        if site is None:
            stmt = compute(stmt)
        else:
            stmt, _ = inject_at_loop(stmt, site, compute)
        if fs.store != fs.compute and fs.compute.kind != "innermost":
            # a sliding window whose footprint is a fixed number of slices is folded
            fold = lb.slid if lb.slid is not None and foldable(lb.slid[0]) else None
            if explicit is not None:
                fold = (explicit[0], None, explicit[1])
            elif (fold is None or fold[1] is None) and loops.RUNTIME_FOLDS and info is not None \
                    and info.get("cpu") and len(slid_at) == 1 and fold_refusal(f, fs, f.args[slid_at[0][0]]) is None:
                fold = ("runtime",) + slid_at[0]

            def store(b, fold=fold, f=f):
                if fold is not None and fold[0] == "runtime":
                    fold = runtime_fold(b, *fold[1:])
                return lb.realize(f, b, fold, known=seen)
            st = fs.store
            if st.kind == "root":
                stmt = store(stmt)
            else:
                loop = compute_site(stmt, st.func, _stage_count(st.func, defs), st.var, f)
                if loop is None:
                    raise HdslError(f"'{f.name}' is stored at loop '{st.var}' of '{st.func.name}', which has no "
                                    "such loop", st.span)
                stmt, _ = inject_at_loop(stmt, loop, lambda b, loop, store=store: store(b))
    if info is not None:
        info["shifted"] = lb.shifted    # (checked against shift_requirements by the runtime)
        info["region_clamps"] = lb.region_clamps
    return fix_extents(stmt, lb.deferred)


def explicit_fold(f, fs) -> tuple:
    """fold_storage(v, n) of f: (dim, n, directive), after checking what can be checked before
    the loops exist: one folded dim, a store level outside the compute level, and no loop of
    v fused or rounded up (fold_refusal)."""
    if len(fs.folds) > 1:
        d = list(fs.folds.values())[1]
        raise HdslError(f"'{f.name}' folds its storage along more than one dimension", d.span,
                        "fold one dimension: the one its sliding window moves along")
    var, d = next(iter(fs.folds.items()))
    n = d.args[1]
    if fs.store == fs.compute or fs.compute.kind != "at":
        raise HdslError(f"fold_storage({var}, {n}) of '{f.name}', which is stored where it is computed", d.span,
                        f"store it further out than it is computed: {f.name}.compute_at(g, y).store_at(g, yo) "
                        "(or store_root())")
    refused = fold_refusal(f, fs, var)
    if refused is not None:
        what, hint, span = refused
        raise HdslError(f"fold_storage({var}, {n}) of '{f.name}', {what}", span or d.span, hint)
    return f.args.index(var), n, d


def fold_refusal(f, fs, var: str) -> tuple | None:
    """Why f's storage cannot be folded along var, as (what, hint, span), or None: a loop of
    var fused, or rounded up (a rounded-up split computes rows beyond the window, which would
    overwrite rows still to be read; shift_inwards and guard_with_if stay inside it)."""
    derived = {var}
    for s in fs.stages.get(-1, []):
        a = s.args
        if s.name == "fuse" and (a[0] in derived or a[1] in derived):
            return (f"whose {var} loop is fused", "fold a dimension whose loop is not fused", None)
        if s.name == "split":
            split = [(a[0], a[1:3])]
        elif s.name in ("vectorize", "unroll", "parallel"):
            split = [(a[0], a[:1])]
        elif s.name == "tile":
            split = [(a[0], [a[2], a[4]] if len(a) == 8 else [a[2]]), (a[1], [a[3], a[5]] if len(a) == 8 else [a[3]])]
        else:
            split = []
        for old, new in split:
            if old in derived:
                if s.tail == "round_up":
                    return (f"whose {var} loop is rounded up (it computes rows past the window, over rows still "
                            "to be read)", "drop round_up from this split (shift_inwards, the default, stays inside)",
                            s.span)
                derived.update(x for x in new if isinstance(x, str))
    return None


def runtime_fold(body: Stmt, dim: int, loop, window) -> tuple | None:
    """The fold (dim, RuntimeFold) of a storage around `body` whose window along dim slides
    along `loop` and has no constant bound (loops.RUNTIME_FOLDS), or None where the window or
    the loop's bounds name something `body` binds (they are evaluated before body, at the
    storage) or read memory. Sound for any n >= the largest window, by fold_check's
    induction; the run-time loop that finds it costs a few integer operations per iteration
    of the sliding loop."""
    if window is None or loop is None:
        return None
    exprs = (window, loop.min, loop.extent)
    if any(isinstance(n, (FuncCall, InputCall)) for e in exprs for n in walk(e)):
        return None
    bound = _bound_names(body)
    names = set().union(*(free_vars(e) for e in exprs)) - {loop.var}
    if names & bound:
        return None
    return dim, RuntimeFold(loop.var, loop.min, loop.extent, window)


def _bound_names(s: Stmt) -> set[str]:
    """The names that lets and loops inside s bind."""
    out: set[str] = set()
    todo = [s]
    while todo:
        s = todo.pop()
        if isinstance(s, LetStmt):
            out.add(s.name)
        elif isinstance(s, For):
            out.add(s.var)
        todo += children(s)
    return out


def _stage_count(g, defs) -> int:
    """g's stages, its pure definition and updates (an inlined g is not in defs)."""
    return 1 + len(defs[id(g)].updates if id(g) in defs else g.updates)


def _computed_within(f, defs, scheds, loops: set[str]) -> bool:
    """Whether a Func that f reads is computed (or, unscheduled, may be) inside `loops`."""
    d = defs[id(f)]
    exprs = list(d.values) + [e for u in d.updates for e in list(u.values) + list(u.args)]
    for e in exprs:
        for n in walk(e):
            if isinstance(n, FuncCall) and n.func is not f:
                lv = scheds[id(n.func)].compute
                if lv.kind == "innermost":
                    return True
                # (loop names are `<func>.s<stage>.<var>` with `$n` versions: find_loop_var's rule)
                if lv.kind == "at" and any(l.split("$")[0].startswith(lv.func.name + ".s") and
                                           l.split("$")[0].endswith("." + lv.var) for l in loops):
                    return True
    return False


def _provides_in(s: Stmt):
    """Every Provide inside s."""
    from hdsl.ir.stmt import Provide, children
    todo = [s]
    while todo:
        x = todo.pop()
        if isinstance(x, Provide):
            yield x
        todo += children(x)


def _loop_owner(var: str, names: set) -> str | None:
    """The Func whose loop `var` is (`<func>.s<stage>.<var>`; Func names may hold dots, the
    standard library's `smooth.gauss_w`): the longest such name."""
    best = None
    for n in names:
        if var.startswith(n + ".s") and (best is None or len(n) > len(best)):
            best = n
    return best


def check_uses_in_scope(p: Pipeline, sched: Schedule | None, stmt: Stmt) -> None:
    """Every call of a Func lies inside the loops it is computed in: `g.compute_at(two, y)`
    while `out` also reads g outside two's loops is the user's mistake, said as such."""
    from hdsl.ir.expr import FuncCall, walk
    from hdsl.ir.stmt import For, Provide, Realize, children, own_exprs
    outputs = {id(f) for f in p.outputs}

    def where(f):
        for d in (sched.directives.get(id(f), []) if sched is not None else []):
            if d.name in ("compute_at", "store_at", "compute_inline"):
                return d.span
        return getattr(f, "span", None)

    provided: dict[int, frozenset] = {}
    names = {n.func.name for n in _provides_in(stmt)}

    def provides(s: Stmt) -> frozenset:
        """Names of the Funcs computed at s's level: a Provide, or a loop of the Func's own
        (`<func>.s<stage>.<var>`) around its Provides, and not one computed inside another
        Func's loops (compute_at(k, y) computes d per row of k: d exists for k's loops only)."""
        hit = provided.get(id(s))
        if hit is None:
            if isinstance(s, Provide):
                hit = frozenset({s.func.name})
            elif isinstance(s, For) and _loop_owner(s.var, names) is not None:
                hit = frozenset({_loop_owner(s.var, names)})
            else:
                hit = frozenset()
                for k in children(s):
                    hit |= provides(k)
            provided[id(s)] = hit
        return hit

    # scope: the Funcs stored around s (Realize); computed: those computed before s in a Block
    # that holds it (or s's own Func, for an update reading it). Both are needed: a Func stored
    # outside the loop it is computed in (store_root, store_at) is not yet computed where a
    # consumer outside that loop reads it
    def visit(s: Stmt, scope: frozenset, computed: frozenset, producer):
        if isinstance(s, Realize):
            scope = scope | {id(s.func)}
        if isinstance(s, Provide):
            producer = s.func
            computed = computed | {s.func.name}
        for e in own_exprs(s):
            for n in walk(e):
                if isinstance(n, FuncCall) and id(n.func) not in outputs and \
                        (id(n.func) not in scope or n.func.name not in computed):
                    user = f"'{producer.name}'" if producer is not None else "the pipeline"
                    raise HdslError(f"'{n.func.name}' is used by {user} outside the loops it is computed in",
                                    where(n.func),
                                    f"compute '{n.func.name}' at a loop that encloses every use of it "
                                    "(the consumers' common loop), or compute_root()")
        if isinstance(s, Block):
            for k in s.stmts:
                visit(k, scope, computed, producer)
                computed = computed | provides(k)
            return
        for k in children(s):
            visit(k, scope, computed, producer)
    visit(stmt, frozenset(), frozenset(), None)


def bounds_checks(p: Pipeline, stmt: Stmt) -> Stmt:
    """Before any memory is touched: every input covers what is read, every output what is written."""
    checks = []
    for idx, b in enumerate(p.inputs):
        box = box_of(stmt, b, b.dims, reads=True, writes=False)
        if box is None:
            continue
        for d, (lo, hi) in enumerate(box):
            if lo is None or hi is None:
                raise HdslError(f"cannot tell which part of input '{b.name}' is read", b.span,
                                "clamp data-dependent coordinates, or use a boundary condition")
            mn = Var(f"{b.name}.min.{d}", I32)
            mx = BinOp("-", BinOp("+", mn, Var(f"{b.name}.extent.{d}", I32), I32), Const(I32, 1), I32)
            ok = BinOp("&&", BinOp(">=", lo, mn, BOOL), BinOp("<=", hi, mx, BOOL), BOOL)
            checks.append(Assert(simplify(ok), ERR_INPUT_BOUNDS, (Const(I32, idx), Const(I32, d), lo, hi)))
    for idx, f in enumerate(p.outputs):
        box = box_of(stmt, f, f.dims, reads=True, writes=True)
        for d, (lo, hi) in enumerate(box or []):
            mn = Var(f"{f.name}.min.{d}", I32)
            mx = BinOp("-", BinOp("+", mn, Var(f"{f.name}.extent.{d}", I32), I32), Const(I32, 1), I32)
            ok = BinOp("&&", BinOp(">=", lo, mn, BOOL), BinOp("<=", hi, mx, BOOL), BOOL)
            checks.append(Assert(simplify(ok), ERR_OUTPUT_BOUNDS, (Const(I32, idx), Const(I32, d), lo, hi)))
    return block(*checks, stmt)


def float_checks(conds: list | None, stmt: Stmt) -> Stmt:
    """Before anything else: each condition under which a bound found through float
    arithmetic holds (the value not NaN, within +-2^30; symbolic._float_to_int)."""
    seen = {}
    for ok, _ in conds or ():
        seen.setdefault(id(ok), ok)
    return block(*(Assert(ok, ERR_FLOAT_COORDINATE, ()) for ok in seen.values()), stmt)


def lower(p: Pipeline, schedule: str | None = None, target: "str | Target" = "host",
          shift_outputs: bool = False) -> Lowered:
    """The loop nest of p under `schedule`. shift_outputs: the outputs' splits shift their
    last tile inwards (Halide's ShiftInwards) instead of guarding it; the result is then
    valid only for outputs at least as wide as the split factors (loops.shift_requirements)."""
    clear_interned()       # expressions are hash-consed per lowering
    target = parse_target(target)
    sched = choose_schedule(p, schedule, target)
    refuse_unsupported(sched, target)
    stages, timings = {}, {}

    check = os.environ.get("HDSL_VERIFY") == "1"

    def run(name, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        timings[name] = time.perf_counter() - t0
        stages[name] = out
        if check:       # tests and --debug: the verifier between passes
            verify(out, p, flat=(PASSES.index(name) >= PASSES.index("flatten")))
        return out

    def loop_nest(floats: bool, info: dict):
        # bounds inferred through float arithmetic (a histogram's bin i32(v / r_sigma + 0.5f))
        # hold under run-time conditions on params, all checked first (float_checks)
        with float_coordinate_checks(floats) as fchecks:
            stmt = run("schedule_functions", schedule_functions, p, sched, shift_outputs, info)
            stmt = run("check_gpu_loops", check_gpu_loops, stmt, sched)
            check_uses_in_scope(p, sched, stmt)
            return run("bounds_checks", lambda p, s: float_checks(fchecks, bounds_checks(p, s)), p, stmt)

    # (run-time folds: on the CPU only, whose code computes their factor before the loop)
    info: dict = {"cpu": target.device is None}
    try:
        stmt = loop_nest(False, info)
    except HdslError as e:
        # only a pipeline that cannot be bounded otherwise uses the float rules, so that
        # one whose coordinates are clamped gets no check that could refuse a param value
        if not any(d.message.startswith("cannot tell") for d in e.diagnostics):
            raise
        info = {"cpu": target.device is None}
        # (bounds inference's table of eliminations holds the first try's results, made
        # without the float rules: the second try must not reuse them, nor a later lowering
        # on this thread reuse the second's, which hold only under its run-time checks)
        memo_table("eliminate").clear()
        try:
            stmt = loop_nest(True, info)
        finally:
            memo_table("eliminate").clear()
    # every region and input check is written: the no-op clamps bounds inference needed on
    # split lets go before flattening and partitioning see them
    stmt = run("strip_region_clamps", strip_region_clamps, stmt, info.get("region_clamps", {}))
    orders, nontemporal = {}, set()
    if sched is not None:
        for fid, ds in sched.directives.items():
            for d in ds:
                if d.name == "store_nontemporal":
                    nontemporal.add(sched.funcs[fid].name)
                if d.name == "reorder_storage":
                    f = sched.funcs[fid]
                    order = [f.args.index(a) for a in d.args]
                    orders[fid] = order + [i for i in range(f.dims) if i not in order]
    orders.update(info.get("storage_orders", {}))
    stmt = run("flatten", flatten, stmt, orders)
    stmt = run("gpu_memory", gpu_memory, stmt)
    stmt = run("partition_loops", partition_loops, stmt)
    stmt = run("hoist_invariants", hoist_invariants, stmt)
    stmt = run("outline_kernels", outline_kernels, stmt, target.device, entry_symbols(p), p.name)
    stmt = run("check_block_limits", check_block_limits, stmt, p, sched, target)
    if target.device == "opengl":
        from hdsl.lower.fragment import mark_fragments
        stmt = mark_fragments(stmt, sched)
    stmt = run("device_copies", device_copies, stmt, [f.name for f in p.outputs])
    low = Lowered(stmt, p, stages, timings, frozenset(nontemporal))
    low.shifted = info.get("shifted", set())
    return low


def lowered_text(p: Pipeline, schedule: str | None = None, after: str = "schedule_functions") -> str:
    low = lower(p, schedule)
    if after not in low.stages:
        raise HdslError(f"unknown pass '{after}'", None, "passes: " + ", ".join(PASSES))
    return stmt_str(low.stages[after])
