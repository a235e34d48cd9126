"""GPU lowering: from loops marked gpu_block / gpu_thread to kernels and launches.

Five passes (their places in lower.py's PASSES):

- `check_gpu_loops`, right after schedule_functions: the nesting rules, as errors at the
  directive. Thread loops lie inside block loops; block loops are not inside thread
  loops, nor inside a parallel, vectorized or unrolled CPU loop; at most 3 block and 3
  thread dims; at most 1024 threads per block when the thread loops' extents are
  constants; a kernel with thread loops stores only inside them (a Func computed at a
  block loop needs its own gpu_threads, else every thread would run its loops); a Func's
  thread loops do not nest inside another Func's thread loop (the barrier between its
  writes and the outer loop's reads would lie inside a thread loop).
- `gpu_memory`, after flatten: the storage of a Func computed inside a kernel is
  "gpu_shared" at block level (one allocation per block) and "gpu_local" inside a
  thread loop; code at block level outside any thread loop (a Func computed at a block
  loop without gpu_threads of its own) runs in one thread, in a thread loop of extent 1
  (Halide's gpu_single_thread); a GpuBarrier separates sibling thread-loop nests of a
  block (a producer's nest and its consumers'), and ends each iteration of a serial loop
  at block level whose body holds thread loops (the next iteration rewrites what this
  one read).
- `outline_kernels`, last, for a GPU target: each outermost gpu_block loop nest
  becomes a Kernel (hdsl/ir/kernel.py) and a LaunchKernel on the target's device. Its
  args come from the closure analysis parallel-loop outlining shares
  (hdsl/ir/closure.py); its block size is, per dim, an upper bound of its thread loops'
  extents over the whole grid, and its shared memory an upper bound of its gpu_shared
  allocations, both expressions of its scalar args (hdsl/lower/symbolic.py bounds
  them; a difference of two mins sharing a bound, `min(a + 15, m) - min(a, m)`, the
  extent of a clamped tile, is bounded by `15` first; where no closed form is free of
  the block variables, a host loop over the grid takes the maximum before the launch).

- `check_block_limits`, after outlining, for a target with a shared-memory limit (cuda):
  each kernel's shared bytes against it, an error at the directive where constant, else an
  Assert before the launch (ERR_SHARED_MEMORY, reported by the runtime at the directive);
  a block's threads where their count is a run-time value (ERR_BLOCK_THREADS); and CUDA's
  limits per dim (MAX_GRID blocks, MAX_BLOCK threads: y and z grids of at most 65535 blocks,
  a z of at most 64 threads), an error at the Func's GPU directive where constant, else an
  Assert before the launch (ERR_GRID_LIMIT). cuda-emulate checks them too, so that CI finds
  a launch a GPU would refuse ("invalid argument").

- `device_copies`, after outlining: DeviceSync statements where host code touches a
  buffer that kernels use (see its docstring).

GPU dims come from nesting: in a nest, the innermost block loop is dim x (0), the next
outer y (1), then z (2); likewise thread loops.
"""
from __future__ import annotations

import re

from hdsl.diagnostics import HdslError
from hdsl.ir.closure import mentioned
from hdsl.ir.expr import BinOp, Cast, Const, Expr, Var, free_vars, substitute
from hdsl.ir.func import Schedule
from hdsl.ir.kernel import Kernel, KernelArg
from hdsl.ir.simplify import simplify
from hdsl.ir.stmt import (GPU_BLOCK, GPU_THREAD, Allocate, Block, DeviceSync, For, GpuBarrier, LaunchKernel, LetStmt,
                          Stmt, block, children, own_exprs, with_children)
from hdsl.ir.types import I32, I64
from hdsl.lower.symbolic import expr_bounds

MAX_GPU_DIMS = 3
MAX_THREADS = 1024
GPU_DIRECTIVES = ("gpu_blocks", "gpu_threads", "gpu_tile")


# ------------------------------------------------------------------ nesting checks
def _loop_parts(var: str) -> tuple[str, str]:
    """(Func name, dim) of a loop named `<func>.s<stage>.<dim>` (with `$n` versions)."""
    base = var.split("$")[0]
    head, _, dim = base.rpartition(".")
    func = head.rsplit(".s", 1)[0] if ".s" in head else head
    return func, dim


def _stage(var: str) -> str:
    """`<func>.s<stage>` of a loop named `<func>.s<stage>.<dim>`: loops of one stage nest freely."""
    return var.split("$")[0].rpartition(".")[0]


def _pretty(var: str) -> str:
    func, dim = _loop_parts(var)
    return f"'{dim}' of '{func}'"


def _directive(sched: Schedule | None, var: str, names=GPU_DIRECTIVES):
    """The directive that made loop `var` what it is (for an error's position)."""
    if sched is None:
        return None
    func, dim = _loop_parts(var)
    for fid, ds in sched.directives.items():
        if sched.funcs[fid].name != func:
            continue
        for d in ds:
            if d.name in names and dim in [str(a) for a in d.args]:
                return d
        for d in ds:
            if d.name in names:
                return d
    return None


def _error(msg: str, sched, var: str, hint: str, names=GPU_DIRECTIVES) -> HdslError:
    d = _directive(sched, var, names)
    return HdslError(msg, d.span if d is not None else None, hint)


def check_gpu_loops(stmt: Stmt, sched: Schedule | None) -> Stmt:
    """The nesting rules (see the module docstring); `stmt` is returned unchanged."""

    def visit(s: Stmt, blocks: int, threads: int, cpu: str | None, thread_size: int, kernel_has_threads: bool,
              top_block: str | None, in_block_chain: bool = False, outer_thread: str | None = None):
        if isinstance(s, For):
            if s.kind == GPU_BLOCK:
                if threads:
                    raise _error(f"GPU block loop {_pretty(s.var)} is inside a GPU thread loop", sched, s.var,
                                 "mark the outer loops gpu_blocks and the inner ones gpu_threads")
                if cpu is not None:
                    raise _error(f"GPU loop {_pretty(s.var)} is inside a {cpu} loop", sched, s.var,
                                 "a kernel is launched from the host: leave the loops around it serial")
                if blocks and not in_block_chain:
                    raise _error(f"GPU block loop {_pretty(s.var)} is inside the kernel of GPU block loop "
                                 f"{_pretty(top_block)}", sched, s.var,
                                 "a Func computed inside a kernel takes gpu_threads only, or compute it at the root")
                if blocks >= MAX_GPU_DIMS:
                    raise _error(f"more than {MAX_GPU_DIMS} GPU block dims at loop {_pretty(s.var)}", sched, s.var,
                                 "fuse loops first (fuse(x, y, xy)), or keep some serial")
                if blocks == 0:
                    kernel_has_threads = _has_kind(s.body, GPU_THREAD)
                    top_block = s.var
                return visit(s.body, blocks + 1, threads, cpu, thread_size, kernel_has_threads, top_block, True,
                             outer_thread)
            if s.kind == GPU_THREAD:
                if not blocks:
                    raise _error(f"GPU thread loop {_pretty(s.var)} is not inside a GPU block loop", sched, s.var,
                                 "mark an outer loop gpu_blocks (gpu_tile does both)")
                if outer_thread is not None and _stage(outer_thread) != _stage(s.var):
                    # the inner nest's threads write what the outer loop's thread reads: a
                    # barrier inside a thread loop, which not every thread reaches
                    raise _error(f"GPU thread loop {_pretty(s.var)} is inside GPU thread loop "
                                 f"{_pretty(outer_thread)}: the block's threads would need a barrier inside a "
                                 "thread loop", sched, s.var,
                                 f"compute '{_loop_parts(s.var)[0]}' at a block loop (in shared memory, the "
                                 "block's threads share the work), or drop its gpu_threads (each thread computes "
                                 "what it reads, in local memory)", names=("gpu_threads", "gpu_tile"))
                if threads >= MAX_GPU_DIMS:
                    raise _error(f"more than {MAX_GPU_DIMS} GPU thread dims at loop {_pretty(s.var)}", sched,
                                 s.var, "fuse loops first (fuse(x, y, xy)), or keep some serial")
                n = _const(s.extent)
                size = thread_size * n if n is not None else thread_size
                if n is not None and size > MAX_THREADS:
                    raise _error(f"a GPU block of {size} threads (at loop {_pretty(s.var)}): at most {MAX_THREADS} "
                                 "threads per block", sched, s.var, "use smaller tiles")
                return visit(s.body, blocks, threads + 1, cpu, size, kernel_has_threads, top_block, False,
                             outer_thread or s.var)
            if s.kind == "parallel" and blocks:
                raise _error(f"parallel loop {_pretty(s.var)} is inside a GPU kernel (of block loop "
                             f"{_pretty(top_block)})", sched, s.var,
                             "inside a kernel, use gpu_threads (the block's threads) instead of parallel",
                             names=("parallel",))
            if s.kind in ("parallel", "vectorized", "unrolled") and _has_kind(s.body, GPU_BLOCK):
                inner = _first_of_kind(s.body, GPU_BLOCK)
                raise _error(f"GPU loop {_pretty(inner)} is inside {s.kind} loop {_pretty(s.var)}", sched, inner,
                             "a kernel is launched from the host: leave the loops around it serial")
        for k in children(s):
            # (lets may lie between the block loops of one nest)
            visit(k, blocks, threads, cpu, thread_size, kernel_has_threads, top_block,
                  in_block_chain and isinstance(s, LetStmt), outer_thread)
    visit(stmt, 0, 0, None, 1, False, None)
    return stmt


def _const(e: Expr) -> int | None:
    e = simplify(e)
    return int(e.value) if isinstance(e, Const) else None


def _stores(s: Stmt) -> bool:
    from hdsl.ir.stmt import Store
    return isinstance(s, Store) or any(_stores(k) for k in children(s))


def _has_kind(s: Stmt, kind: str) -> bool:
    return _first_of_kind(s, kind) is not None


def _first_of_kind(s: Stmt, kind: str) -> str | None:
    if isinstance(s, For) and s.kind == kind:
        return s.var
    for k in children(s):
        v = _first_of_kind(k, kind)
        if v is not None:
            return v
    return None


# ------------------------------------------------------------------ memory and barriers
def gpu_memory(stmt: Stmt) -> Stmt:
    """Allocate.memory inside kernels, and barriers between thread-loop nests of a block."""

    singles = [0]

    def visit(s: Stmt, where: str) -> Stmt:
        if where == "block" and _stores(s) and not _has_kind(s, GPU_THREAD) and \
                not (isinstance(s, For) and s.kind == GPU_BLOCK):
            singles[0] += 1
            return For(f"gpu.single_thread.{singles[0]}", Const(I32, 0), Const(I32, 1), GPU_THREAD,
                       visit(s, "thread"))
        if isinstance(s, For):
            inner = {GPU_BLOCK: "block", GPU_THREAD: "thread"}.get(s.kind, where)
            body = visit(s.body, inner)
            if where == "block" and s.kind not in (GPU_BLOCK, GPU_THREAD) and _has_kind(body, GPU_THREAD):
                # the next iteration's thread loops rewrite what this one's read
                body = block(body, GpuBarrier())
            return For(s.var, s.min, s.extent, s.kind, body)
        if isinstance(s, Allocate):
            memory = {"block": "gpu_shared", "thread": "gpu_local"}.get(where, s.memory)
            return Allocate(s.name, s.type, s.size, visit(s.body, where), memory)
        if isinstance(s, Block) and where == "block":
            out: list[Stmt] = []
            threaded_before = False
            for x in s.stmts:
                x = visit(x, where)
                threaded = _has_kind(x, GPU_THREAD)
                if threaded and threaded_before:
                    out.append(GpuBarrier())
                threaded_before = threaded_before or threaded
                out.append(x)
            return Block(tuple(out))
        kids = children(s)
        if not kids:
            return s
        return with_children(s, [visit(k, where) for k in kids])
    return visit(stmt, "host")


# ------------------------------------------------------------------ kernel outlining
def outline_kernels(stmt: Stmt, device: str | None, entry: set[str], pipeline_name: str = "p") -> Stmt:
    """Each outermost gpu_block loop nest as a Kernel launched on `device` (None: no GPU
    target, nothing to do). `entry`: the names bound on entry (buffers, params, their
    mins/extents/strides)."""
    if device is None:
        return stmt
    counter = [0]

    def visit(s: Stmt, scope: frozenset) -> Stmt:
        if isinstance(s, For) and s.kind == GPU_BLOCK:
            return _launch(s, scope, device, counter)
        if isinstance(s, LetStmt):
            return LetStmt(s.name, s.value, visit(s.body, scope | {s.name}))
        if isinstance(s, For):
            return For(s.var, s.min, s.extent, s.kind, visit(s.body, scope | {s.var}))
        if isinstance(s, Allocate):
            return Allocate(s.name, s.type, s.size, visit(s.body, scope | {s.name}), s.memory)
        kids = children(s)
        if not kids:
            return s
        return with_children(s, [visit(k, scope) for k in kids])
    return visit(stmt, frozenset(entry))


def _launch(loop: For, scope: frozenset, device: str, counter: list) -> Stmt:
    """The launch of the kernel of block loop nest `loop` (inside the host loop that takes the
    maxima of its launch bounds over the grid, where they vary with the block)."""
    # the block loops: a chain of directly nested gpu_block loops (x innermost)
    blocks = []
    s: Stmt = loop
    while isinstance(s, For) and s.kind == GPU_BLOCK:
        blocks.append(s)
        s = s.body
    for b in blocks:
        if not (free_vars(b.min) | free_vars(b.extent)) <= scope:
            raise HdslError(f"the extent of GPU block loop '{b.var}' depends on an outer block loop: the grid "
                            "must be known when the kernel is launched", None,
                            "split the dims with constant factors (gpu_tile) rather than nesting block loops "
                            "of varying extent")
    grid = tuple(b.extent for b in reversed(blocks))
    uses = mentioned(loop)
    args = []
    for name, u in uses.items():
        if name not in scope:
            continue
        if u.kind == "buffer":
            args.append(KernelArg(name, u.type, "buffer", u.access))
        else:
            args.append(KernelArg(name, u.type, "scalar"))
    scalars = {a.name for a in args if a.kind == "scalar"}
    ranges = {b.var: (b.min, simplify(BinOp("-", BinOp("+", b.min, b.extent, I32), Const(I32, 1), I32)))
              for b in blocks}
    lets: dict[str, Expr] = {}
    thread_extents: dict[int, list[Expr]] = {}
    shared: list[Expr] = []
    _collect(loop, lets, ranges, thread_extents, shared)
    counter[0] += 1
    name = "kernel_" + re.sub(r"\W", "_", _loop_parts(loop.var)[0]) + f"_{counter[0] - 1}"   # (a C/PTX name)
    block_vars = frozenset(b.var for b in blocks)
    extra: set[str] = set()
    per_block: list[Expr] = []        # bounds that vary with the block: maximized on the host

    def host_bound(e: Expr, t) -> Expr:
        if not free_vars(e) & block_vars:
            return e
        per_block.append(e)
        v = Var(f"{name}.bound.{len(per_block) - 1}", I64)
        return v if t == I64 else Cast(I32, v)
    threads = []
    for dim in range(max(thread_extents) + 1 if thread_extents else 1):
        bounds = [_upper(e, lets, ranges, scope, extra, I32, block_vars)
                  for e in thread_extents.get(dim, [Const(I32, 1)])]
        t = bounds[0]
        for b2 in bounds[1:]:
            t = simplify(BinOp("max", t, b2, I32))
        threads.append(host_bound(simplify(BinOp("max", t, Const(I32, 1), I32)), I32))
    total: Expr = Const(I64, 0)
    for e in shared:
        total = BinOp("+", total, _upper(e, lets, ranges, scope, extra, I64, block_vars), I64)
    shared_bytes = host_bound(simplify(total), I64)
    for n in sorted(extra - scalars):
        t = next((v.type for e in (*threads, shared_bytes, *per_block) for v in _vars(e) if v.name == n), I32)
        args.append(KernelArg(n, t, "scalar"))
    args += [KernelArg(f"{name}.bound.{i}", I64, "scalar") for i in range(len(per_block))]
    kernel = Kernel(name, tuple(args), loop, tuple(threads), shared_bytes)
    launch = LaunchKernel(kernel, device, grid)
    if not per_block:
        return launch
    return _grid_max(f"{name}.bound", per_block, blocks, launch)


def _vars(e: Expr):
    from hdsl.ir.expr import walk
    return [n for n in walk(e) if isinstance(n, Var)]


def _collect(s: Stmt, lets, ranges, thread_extents, shared, depth_of=None):
    """Lets bound inside the kernel, the ranges of its loop variables, its thread loops'
    extents by dim, and its gpu_shared allocations' sizes in bytes."""
    if isinstance(s, LetStmt):
        lets[s.name] = s.value
    elif isinstance(s, For):
        last = simplify(BinOp("-", BinOp("+", s.min, s.extent, I32), Const(I32, 1), I32))
        ranges.setdefault(s.var, (s.min, last))
        if s.kind == GPU_THREAD:
            thread_extents.setdefault(_thread_depth(s.body), []).append(s.extent)
    elif isinstance(s, Allocate) and s.memory == "gpu_shared":
        shared.append(simplify(BinOp("*", s.size, Const(I64, max(1, s.type.bits // 8)), I64)))
    for k in children(s):
        _collect(k, lets, ranges, thread_extents, shared)


def _thread_depth(s: Stmt) -> int:
    """How many thread loops nest inside s (its deepest chain): a thread loop's dim."""
    own = 1 if isinstance(s, For) and s.kind == GPU_THREAD else 0
    return own + max((_thread_depth(k) for k in children(s)), default=0)


def _upper(e: Expr, lets, ranges, scope, extra: set, t=I32, blocks=frozenset()) -> Expr:
    """An upper bound of e over the kernel, in names bound on the host (added to `extra`);
    with `blocks` (the block loops' variables), one that may also depend on them (the
    caller takes its maximum over the grid on the host)."""
    for _ in range(64):         # lets inside the kernel, substituted (they may chain)
        inner = [n for n in free_vars(e) if n in lets and n not in scope]
        if not inner:
            break
        e = substitute(e, lambda n: lets.get(n.name) if isinstance(n, Var) and n.name in inner else None)
    e = simplify(_cancel_mins(simplify(e)))
    if free_vars(e) <= scope | blocks:
        extra |= set(free_vars(e)) - blocks
        return e
    sc = {v: r for v, r in ranges.items() if v not in scope and v not in blocks}
    hi = _symbolic_upper(e, sc)
    if hi is not None and blocks and free_vars(hi) <= scope | blocks:
        extra |= set(free_vars(hi)) - blocks
        return simplify(hi)
    sc = {v: r for v, r in ranges.items() if v not in scope}
    hi = _symbolic_upper(e, sc)
    if hi is None or not free_vars(hi) <= scope:
        raise HdslError("cannot bound a GPU kernel's thread count or shared memory from the host", None,
                        "use constant tile sizes (gpu_tile(x, y, xi, yi, 16, 16)) for the thread loops")
    extra |= set(free_vars(hi))
    return simplify(hi)


def _grid_max(name: str, bounds: list[Expr], blocks: list[For], launch: Stmt) -> Stmt:
    """`launch` inside lets `name.0`, `name.1`, ... bound to the maxima of `bounds` (i64
    expressions of the block loops' variables and host names) over the grid: a host loop
    over the blocks (a clamped tile's extent is smaller at the image's edge than inside,
    which no closed form of hdsl's bounds sees)."""
    from hdsl.ir.stmt import Load, Store
    buf = f"{name}.max"
    body: Stmt = Block(tuple(Store(buf, Const(I32, i), BinOp("max", Load(buf, Const(I32, i), I64),
                                                           _cast(b, I64), I64))
                             for i, b in enumerate(bounds)))
    for b in blocks:                      # x innermost
        body = For(b.var, b.min, b.extent, "serial", body)
    lets = launch
    for i in reversed(range(len(bounds))):
        lets = LetStmt(f"{name}.{i}", Load(buf, Const(I32, i), I64), lets)
    init = [Store(buf, Const(I32, i), Const(I64, 0)) for i in range(len(bounds))]
    return Allocate(buf, I64, Const(I64, len(bounds)), block(*init, body, lets))


def _symbolic_upper(e: Expr, scope: dict) -> Expr | None:
    """An upper bound of e over the loop variables' ranges (symbolic.expr_bounds, which
    bounds i32 expressions): an i64 size, a product of non-negative extents cast from i32,
    is bounded factor by factor."""
    from hdsl.ir.expr import Cast
    if e.type == I64:
        if isinstance(e, BinOp) and e.op == "*":
            a, b = _symbolic_upper(e.a, scope), _symbolic_upper(e.b, scope)
            return None if a is None or b is None else BinOp("*", a, b, I64)
        if isinstance(e, Cast) and e.value.type == I32:
            hi = _symbolic_upper(e.value, scope)
            return None if hi is None else Cast(I64, BinOp("max", hi, Const(I32, 0), I32))
        if isinstance(e, Const):
            return e
        return None
    _, hi = expr_bounds(e, scope)
    return hi


def _cast(e: Expr, t):
    from hdsl.ir.expr import Cast
    return e if e.type == t else Cast(t, e)


def _terms(e: Expr, sign: int, out: list):
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        _terms(e.a, sign, out)
        _terms(e.b, sign if e.op == "+" else -sign, out)
    else:
        out.append((sign, e))


def _cancel_mins(e: Expr) -> Expr:
    """_cancel_sum at every sum in e, innermost first (under casts and products)."""
    from hdsl.ir.expr import rebuild
    kids = e.children()
    if kids:
        new = [_cancel_mins(k) for k in kids]
        if any(a is not b for a, b in zip(new, kids)):
            e = rebuild(e, new)
    return simplify(_cancel_sum(e))


def _cancel_sum(e: Expr) -> Expr:
    """Replace `min(a, m) - min(b, m)` (likewise max) in a sum by an upper bound of it,
    `max(a - b, 0)`, when a - b has a constant one: a clamped tile's extent."""
    if not (isinstance(e, BinOp) and e.op in ("+", "-")):
        return e
    terms: list = []
    _terms(e, 1, terms)
    used = [False] * len(terms)
    out: list = []
    for i, (si, ti) in enumerate(terms):
        if used[i] or si != 1 or not (isinstance(ti, BinOp) and ti.op in ("min", "max")):
            continue
        for j, (sj, tj) in enumerate(terms):
            if used[j] or j == i or sj != -1 or not (isinstance(tj, BinOp) and tj.op == ti.op):
                continue
            for a, m, b, m2 in ((ti.a, ti.b, tj.a, tj.b), (ti.b, ti.a, tj.b, tj.a), (ti.a, ti.b, tj.b, tj.a),
                                (ti.b, ti.a, tj.a, tj.b)):
                if m is m2 or _const(BinOp("-", m, m2, m.type)) == 0:
                    hi = _const_upper(simplify(BinOp("-", a, b, a.type)))
                    if hi is not None:
                        used[i] = used[j] = True
                        out.append((1, Const(e.type, max(hi, 0))))
                        break
            if used[i]:
                break
    rest = [(s, t) for k, (s, t) in enumerate(terms) if not used[k]] + out
    acc: Expr | None = None
    for s, t in rest:
        if acc is None:
            acc = t if s == 1 else BinOp("-", Const(e.type, 0), t, e.type)
        else:
            acc = BinOp("+" if s == 1 else "-", acc, t, e.type)
    return acc if acc is not None else Const(e.type, 0)


# ------------------------------------------------------------------ host and device copies
def device_copies(stmt: Stmt, outputs: list[str]) -> Stmt:
    """DeviceSync statements around host code that touches a buffer some kernel uses:
    "to_host" before it (the device's copy may be newer), "host_written" after it when it
    writes the buffer; and at the end each such output back to the host. Launches make
    their own buffers current on the device (codegen), so a pipeline whose stages all
    run on the GPU copies each input in once and each output out once."""
    on_device = {a.name for k in kernels_of(stmt) for a in k.kernel.buffers()}
    if not on_device:
        return stmt

    def host_part(s: Stmt) -> Stmt:
        uses = {n: u for n, u in mentioned(s).items() if n in on_device and u.kind == "buffer"}
        if not uses:
            return s
        before = [DeviceSync(n, "to_host") for n in uses]
        after = [DeviceSync(n, "host_written") for n, u in uses.items() if u.written]
        return block(*before, s, *after)

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, LaunchKernel):
            return s
        if not _has_launch(s):
            return host_part(s)
        own = {n for e in own_exprs(s) for n in (x.buffer for x in _loads(e)) if n in on_device}
        kids = children(s)
        new = with_children(s, [visit(k) for k in kids]) if kids else s
        return block(*[DeviceSync(n, "to_host") for n in sorted(own)], new)
    out = visit(stmt)
    return block(out, *[DeviceSync(n, "to_host") for n in outputs if n in on_device])


def _has_launch(s: Stmt) -> bool:
    return isinstance(s, LaunchKernel) or any(_has_launch(k) for k in children(s))


def _loads(e: Expr):
    from hdsl.ir.expr import walk
    from hdsl.ir.stmt import Load
    return [n for n in walk(e) if isinstance(n, Load)]


def _const_upper(e: Expr) -> int | None:
    """A constant upper bound of e, where its shape gives one (a tile's clamped extent
    `min(7, max(n, 0))`): constants, min (either side's), max and + (both sides')."""
    if isinstance(e, Const) and not e.type.is_float():
        return int(e.value)
    if isinstance(e, BinOp) and e.op in ("min", "max", "+"):
        a, b = _const_upper(e.a), _const_upper(e.b)
        if e.op == "min":
            return min(v for v in (a, b) if v is not None) if a is not None or b is not None else None
        if a is None or b is None:
            return None
        return max(a, b) if e.op == "max" else a + b
    return None


def kernels_of(stmt: Stmt) -> list[LaunchKernel]:
    """The launches in a lowered pipeline, in order."""
    out = []

    def visit(s):
        if isinstance(s, LaunchKernel):
            out.append(s)
        for k in children(s):
            visit(k)
    visit(stmt)
    return out



# ------------------------------------------------------------------ shared memory limit
ERR_SHARED_MEMORY = 8       # run-time error codes (hdsl/lower/loops.py has 1 .. 6, 10 and 11, runtime/device.py 7)
ERR_BLOCK_THREADS = 9
ERR_GRID_LIMIT = 12
# CUDA's limits per dim, x first (the CUDA C++ Programming Guide's table of compute
# capabilities: the same for every architecture from 3.0 on)
MAX_GRID = (2 ** 31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)


def check_block_limits(stmt: Stmt, p, sched: Schedule | None, target) -> Stmt:
    """Each kernel's shared memory against what a block of the target may have
    (Target.shared_memory_limit): where its bound is a constant, an error at the directive
    that puts the (largest) Func in shared memory when it is over; where the bound depends on
    run-time sizes (a parameter, the input's size), an Assert before the launch whose failure
    the runtime reports at that directive (shared_memory_error). Likewise a block's threads
    where their count is a run-time value (check_gpu_loops refuses a constant one over 1024):
    an Assert before the launch, reported at the kernel's Func's GPU directive."""
    limit = target.shared_memory_limit
    if limit is None:
        return stmt
    from hdsl.ir.func import topo_order
    from hdsl.ir.stmt import Assert
    from hdsl.ir.types import BOOL
    order = {f.name: i for i, f in enumerate(topo_order(p.outputs))}

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, LaunchKernel):
            k, grid = s.kernel, s.grid
            count: Expr = Const(I64, 1)
            for t in k.threads:
                count = BinOp("*", count, _cast(t, I64), I64)
            count = simplify(count)
            kfunc = _loop_parts(k.body.var)[0]
            if not isinstance(count, Const):
                ok = BinOp("<=", count, Const(I64, MAX_THREADS), BOOL)
                s = block(Assert(ok, ERR_BLOCK_THREADS, (Const(I64, order.get(kfunc, -1)), count)), s)
            for what, sizes, limits in ((0, grid, MAX_GRID), (1, k.threads, MAX_BLOCK)):
                for dim, (n, most) in enumerate(zip(sizes, limits)):
                    n = simplify(_cast(n, I64))
                    if isinstance(n, Const):
                        if n.value > most:
                            raise grid_limit_error(kfunc, what, dim, n.value, sched)
                    elif (what == 0 and dim > 0) or dim == 2:
                        # (an i32 grid along x is within 2^31 - 1; threads along x or y within
                        # the 1024 in all, checked above)
                        ok = BinOp("<=", n, Const(I64, most), BOOL)
                        s = block(Assert(ok, ERR_GRID_LIMIT, (Const(I64, order.get(kfunc, -1)), Const(I64, what),
                                                              Const(I64, dim), n)), s)
            funcs = _shared_funcs(k.body)
            if not funcs:
                return s
            total = _const(k.shared_bytes)
            func = max(funcs, key=lambda f: funcs[f] if funcs[f] is not None else -1)
            if total is not None:
                if total > limit:
                    raise shared_memory_error(func, total, limit, target, sched, p, kernel=k.name,
                                              others=[f for f in funcs if f != func])
                return s
            ok = BinOp("<=", k.shared_bytes, Const(I64, limit), BOOL)
            return block(Assert(ok, ERR_SHARED_MEMORY, (Const(I64, order.get(func, -1)), k.shared_bytes,
                                                        Const(I64, limit))), s)
        kids = children(s)
        if not kids:
            return s
        return with_children(s, [visit(k) for k in kids])
    return visit(stmt)


def _shared_funcs(s: Stmt) -> dict:
    """The Funcs in a kernel's shared memory: name -> their constant bytes, or None."""
    out: dict = {}
    if isinstance(s, Allocate) and s.memory == "gpu_shared":
        n = _const(BinOp("*", _cast(s.size, I64), Const(I64, max(1, s.type.bits // 8)), I64))
        out[s.name] = n
    for k in children(s):
        for name, n in _shared_funcs(k).items():
            out[name] = n if name not in out else None
    return out


def shared_memory_error(func: str, nbytes: int, limit: int, target, sched: Schedule | None, p=None,
                        kernel: str | None = None, others=(), at_run_time: bool = False) -> HdslError:
    """'func' in shared memory takes a kernel over the target's limit: an error at the
    directive that puts it there (its store_at, else its compute_at)."""
    d = None
    if sched is not None:
        for fid, ds in sched.directives.items():
            if sched.funcs[fid].name == func:
                d = next((x for x in ds if x.name == "store_at"), None) or \
                    next((x for x in ds if x.name == "compute_at"), None)
    sm = target.sm
    also = f" (with {', '.join(repr(o) for o in others)})" if others else ""
    when = " at these sizes" if at_run_time else ""
    msg = (f"'{func}' in GPU shared memory{also} needs {nbytes} bytes per block{when}"
           f"{f' (kernel {kernel})' if kernel else ''}, more than the {limit} ({limit // 1024} KB) a block "
           f"may have on sm_{sm}")
    hint = ("compute it at a block loop of smaller tiles (gpu_tile sizes), or at a thread loop (local memory), "
            "or compute_root()")
    if at_run_time:
        hint = ("its size depends on run-time values: bound it with constant tiles (gpu_tile, split) or bound() "
                "on the dims whose extent depends on the input or a parameter; or " + hint)
    bigger = [f"cuda-sm_{a} ({b // 1024} KB)" for a, b in sorted(_limits().items()) if b > limit]
    if bigger:
        hint += "; or a target with more: " + ", ".join(bigger)
    return HdslError(msg, d.span if d is not None else None, hint)


def block_threads_error(func: str, count: int, sched: Schedule | None) -> HdslError:
    """A kernel of 'func' launched with more threads per block than CUDA allows (their
    count a run-time value): an error at the Func's GPU directive."""
    d = None
    if sched is not None:
        for fid, ds in sched.directives.items():
            if sched.funcs[fid].name == func:
                d = next((x for x in ds if x.name in GPU_DIRECTIVES), d)
    return HdslError(f"a GPU block of {count} threads at these sizes (the kernel of '{func}'): at most "
                     f"{MAX_THREADS} threads per block", d.span if d is not None else None,
                     "its thread loops' extents are run-time values: give them constant sizes (gpu_tile, or "
                     "split before gpu_threads)")


def grid_limit_error(func: str, what: int, dim: int, count: int, sched: Schedule | None,
                     at_run_time: bool = False) -> HdslError:
    """A kernel of 'func' launched with more blocks (what 0) or threads (what 1) along one dim
    than CUDA allows there (MAX_GRID, MAX_BLOCK): an error at the Func's GPU directive."""
    d = None
    if sched is not None:
        for fid, ds in sched.directives.items():
            if sched.funcs[fid].name == func:
                d = next((x for x in ds if x.name in GPU_DIRECTIVES), d)
    axis = "xyz"[dim]
    most = (MAX_GRID, MAX_BLOCK)[what][dim]
    when = " at these sizes" if at_run_time else ""
    if what == 0:
        msg = f"a GPU grid of {count} blocks along {axis}{when} (the kernel of '{func}'): CUDA allows at most {most}"
        hint = (f"use larger tiles along the loop that becomes the grid's {axis} (gpu_tile sizes), or make the "
                "longest block loop the innermost one (x: up to 2^31 - 1 blocks)")
    else:
        msg = f"a GPU block {count} threads long along {axis}{when} (the kernel of '{func}'): CUDA allows at most {most}"
        hint = "make the longest thread loop the innermost one (x), or use smaller tiles"
    return HdslError(msg, d.span if d is not None else None, hint)


def _limits() -> dict:
    from hdsl.target import SHARED_MEMORY_LIMIT
    return SHARED_MEMORY_LIMIT
