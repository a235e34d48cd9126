"""The automatic scheduler's rules for a GPU target (`schedule auto` compiled for `cuda`,
`cuda-sm_80`, `cuda-sm_90`, `cuda-emulate`, or `opengl`'s compute path).

The CPU rules (hdsl/schedule/auto.py: `analyse`, `decide`) choose what is inlined, what is
computed at the root and what per tile of a consumer; these rules map that choice onto the
GPU, as Halide's GPU apps schedule by hand (apps/*/..._generator.cpp, the
`has_gpu_feature()` branches) and as the 2018 autoscheduler paper does (Li et al., section
5: every checkpointed stage a kernel of `gpu_tile`d 16x16 blocks):

- a stage computed at the root (or an output) is a kernel: `gpu_tile` 16x16 over its two
  innermost large (more than SMALL = 16 points wide) dims, a third large dim a third block
  dim, its channel-like small dims innermost inside each thread (`reorder(c, x, y)`, as
  the apps); one large dim: 1-D tiles of TILE_1D threads; none (a small table): on the host;
- an update whose pure vars include those two dims is tiled the same way (its reduction
  loops run inside each thread); other updates (scatters, histograms) run on the host;
- a producer the CPU rules compute per tile of a consumer (a small stencil) is computed at
  that consumer's block, in shared memory, by the block's threads (`gpu_threads` over its
  large dims): when its constant size fits the target's shared memory
  (Target.shared_memory_limit) and its thread loops fit a block (1024 threads). That is
  checked by lowering the candidate: a producer that does not fit (or whose size depends
  on run-time values) is computed at the root as a kernel of its own instead;
- cheap producers stay inlined (the CPU rules' choice).

On opengl the same rules with OpenGL's limits: a block's invocations and shared memory at
most the least every OpenGL 4.3 has (GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS 1024,
GL_MAX_COMPUTE_SHARED_MEMORY_SIZE 32 KB: the same schedule on every driver); a stage whose kernel GLSL cannot
compute (64-bit integers, f64, f16: found by generating the candidate's shaders) is computed
at the root on the host instead (one GLSL refuses though it is inlined into a kernel is
reported as GLSL's error); an update is tiled only where its reduction domain has a constant
size of at most GL_LOOP_BUDGET points per invocation (llvmpipe's loop limit), else it runs
on the host.
"""
from __future__ import annotations

from hdsl.diagnostics import HdslError
from hdsl.ir.func import Pipeline, pure_positions, topo_order
from hdsl.target import parse_target

TILE = (16, 16)
TILE_1D = 64
MAX_THREADS = 1024
# OpenGL 4.3's least GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS and GL_MAX_COMPUTE_SHARED_MEMORY_SIZE
GL_MIN_GROUP_INVOCATIONS = 1024
GL_MIN_SHARED_BYTES = 32 * 1024
# the reduction points one OpenGL invocation may take in an update kernel: well under
# llvmpipe's 65535 loop iterations per invocation (runtime/opengl.py LLVMPIPE_LOOP_LIMIT),
# leaving room for the loops of what is inlined into it
GL_LOOP_BUDGET = 4096


def gpu_genes(p: Pipeline, target: str) -> dict[str, list[str]]:
    """The automatic schedule's chains for a GPU target, by Func name (consumers first)."""
    from hdsl.schedule.auto import analyse, decide
    stages = analyse(p, "host")
    decide(p, stages)
    demoted: set[str] = set()          # computed at the root instead of in shared memory
    host: set[str] = set()             # (opengl) kept on the host: GLSL cannot compute them
    for _ in range(2 * len(stages) + 2):
        genes = _genes(p, stages, demoted, host, target)
        bad, refused = _misfits(p, genes, target, stages, demoted)
        if not bad and not refused:
            return genes
        demoted |= bad
        host |= refused
    return _genes(p, stages, {s.name for s in stages.values() if s.name}, host, target)


def _genes(p: Pipeline, stages, demoted: set, host: set, target: str) -> dict[str, list[str]]:
    from hdsl.schedule.auto import _large_dims, scheduled_stages
    genes: dict[str, list[str]] = {}
    for f, s in scheduled_stages(p, stages):
        lines, chain = [], []
        choice = s.choice
        if choice == "at" and (s.name in demoted or s.name in host or not _shared_site(s, stages, demoted, host)):
            choice = "root"
        if choice == "inline":
            if f.updates:
                continue
            chain.append("compute_inline()")
        elif choice == "root":
            chain.append("compute_root()")
            if s.name not in host:
                chain += _kernel(s)
        elif choice == "output":
            if s.name not in host:
                chain += _kernel(s)
        else:
            g, v = s.at
            chain.append(f"compute_at({p.names.get(id(g), g.name)}, {v})")
            chain += _threads(s)
        if chain:
            lines.append(f"{s.name}." + ".".join(chain))
        if choice in ("root", "output") and len(_large_dims(s)) >= 1 and s.name not in host:
            for i, u in enumerate(f.updates):
                tiles = _update_kernel(s, u, target)
                if tiles:
                    lines.append(f"{s.name}.update({i})." + ".".join(tiles))
        genes[s.name] = lines
    return genes


def _shared_site(s, stages, demoted, host) -> bool:
    """Whether the consumer s is computed at is a kernel tiled in 2-D (its first large dim
    the block loop s.at names): then s may go into its blocks' shared memory."""
    from hdsl.schedule.auto import _large_dims
    g = stages[id(s.at[0])]
    if g.choice not in ("root", "output") or g.f.updates or g.name in host:
        return False
    large = _large_dims(g)
    return len(large) >= 2 and g.f.args[large[0]] == s.at[1] and len(_large_dims(s)) in (1, 2)


def _order(s) -> list[str]:
    """reorder(...) putting the small (channel-like) dims innermost, where there are any."""
    from hdsl.schedule.auto import _large_dims
    f = s.f
    large = _large_dims(s)
    small = [d for d in range(len(f.args)) if d not in large]
    if not small or not large or small == list(range(len(small))):
        return []
    return [f"reorder({', '.join([f.args[d] for d in small] + [f.args[d] for d in large])})"]


def _kernel(s) -> list[str]:
    from hdsl.schedule.auto import _large_dims
    f = s.f
    large = _large_dims(s)
    if not large:
        return []                        # (a small table: computed on the host)
    out = _order(s)
    x = f.args[large[0]]
    if len(large) == 1:
        return out + [f"gpu_tile({x}, {x}_i, {TILE_1D})"]
    y = f.args[large[1]]
    out.append(f"gpu_tile({x}, {y}, {x}_i, {y}_i, {TILE[0]}, {TILE[1]})")
    if len(large) >= 3:
        out.append(f"gpu_blocks({f.args[large[2]]})")
    return out


def _threads(s) -> list[str]:
    """A producer computed at a consumer's block: its large dims the block's threads."""
    from hdsl.schedule.auto import _large_dims
    f = s.f
    large = _large_dims(s)
    return _order(s) + [f"gpu_threads({', '.join(f.args[d] for d in large)})"]


def _update_kernel(s, u, target: str) -> list[str]:
    """gpu_tile of an update over the dims its pure stage is tiled over, where both are pure
    vars of the update (each point's reduction then runs in its own thread). On opengl only
    where its reduction domain has a constant size of at most GL_LOOP_BUDGET points: llvmpipe
    ends an invocation's loops after 65535 iterations (docs/opengl.md), so a larger (or
    run-time sized) reduction per thread runs on the host instead."""
    from hdsl.schedule.auto import _large_dims
    if parse_target(target).arch == "opengl" and u.rdom is not None and not _fits_loop_budget(u.rdom):
        return []
    f = s.f
    large = _large_dims(s)
    pure = {a for _, a in pure_positions(f, u)}
    dims = [f.args[d] for d in large[:2]]
    if not dims or not all(a in pure for a in dims):
        return []
    if len(dims) == 1:
        return [f"gpu_tile({dims[0]}, {dims[0]}_i, {TILE_1D})"]
    x, y = dims
    return [f"gpu_tile({x}, {y}, {x}_i, {y}_i, {TILE[0]}, {TILE[1]})"]


def _fits_loop_budget(rdom) -> bool:
    from hdsl.ir.simplify import simplify
    from hdsl.schedule.auto import _const
    n = 1
    for _, extent in rdom.bounds:
        e = _const(simplify(extent))
        if e is None:
            return False
        n *= max(e, 0)
    return n <= GL_LOOP_BUDGET


def genes_text(p: Pipeline, genes: dict) -> str:
    from hdsl.schedule.auto import estimate_lines
    return "\n".join(estimate_lines(p) + [line for lines in genes.values() for line in lines]) + "\n"


def _misfits(p: Pipeline, genes: dict, target: str, stages, demoted: set) -> tuple[set[str], set[str]]:
    """(the Funcs the candidate puts in shared memory that do not fit: over the target's
    limit or a block's threads, or of a size only known at run time; on opengl, the Funcs
    whose kernels GLSL cannot compute: 64-bit or 16-bit values), told by lowering it."""
    from hdsl.ir.expr import Const
    from hdsl.ir.simplify import simplify
    from hdsl.lower.gpu import _shared_funcs, kernels_of
    from hdsl.lower.lower import lower
    t = parse_target(target)
    shared = {s.name for s in stages.values() if s.choice == "at" and s.name and s.name not in demoted}
    shared = {n for n in shared if any(line.startswith(f"{n}.compute_at(") for line in genes.get(n, []))}
    if not shared and t.arch != "opengl":
        return set(), set()
    most_threads, shared_limit = _block_limits(t)
    try:
        sched = p.record_text(genes_text(p, genes), "generated")
        low = lower(p, sched, t)
    except HdslError as e:
        named = {n for n in shared if f"'{n}'" in str(e)}
        if named or shared:
            return named or shared, set()
        raise
    bad, refused = set(), set()
    for launch in kernels_of(low.stmt):
        k = launch.kernel
        if t.arch == "opengl":
            refused |= _glsl_refused(p, k, stages)
        names = {p_name for f_name in _shared_funcs(k.body) for p_name in shared if _func_name(p, p_name) == f_name}
        if not names:
            continue
        threads = [simplify(t) for t in k.threads]
        n = 1
        for th in threads:
            n = n * th.value if isinstance(th, Const) and n is not None else None
        nbytes = simplify(k.shared_bytes)
        if not isinstance(nbytes, Const) or n is None or n > most_threads or \
                (shared_limit is not None and nbytes.value > shared_limit):
            bad |= names
    return bad, refused


def _block_limits(t) -> tuple[int, int | None]:
    """(threads a block may have, bytes of shared memory it may use) on target t: CUDA's 1024
    and the compute capability's (Target.shared_memory_limit); on OpenGL the least that every
    OpenGL 4.3 promises (GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS 1024,
    GL_MAX_COMPUTE_SHARED_MEMORY_SIZE 32 KB), not this driver's own: the automatic schedule
    is then the same on every machine, as the compile cache (keyed by the sources and the
    schedule's name) assumes."""
    if t.arch != "opengl":
        return MAX_THREADS, t.shared_memory_limit
    return GL_MIN_GROUP_INVOCATIONS, GL_MIN_SHARED_BYTES


def _glsl_refused(p: Pipeline, k, stages) -> set[str]:
    """The schedule names of the Funcs whose computation in kernel k GLSL cannot do (64-bit
    integers, f64, f16): they are kept on the host."""
    from hdsl.codegen.glsl import GlslUnsupported, kernel_source
    from hdsl.ir.expr import Const
    try:
        kernel_source(k, threads=tuple(int(t.value) if isinstance(t, Const) else 1 for t in k.threads),
                      shared_bytes=int(k.shared_bytes.value) if isinstance(k.shared_bytes, Const) else 0)
    except GlslUnsupported as e:
        names = {s.name for s in stages.values() if s.name and s.f.name == e.func}
        if not names:          # (no Func the schedule names: refused as GLSL refuses it)
            raise
        return names
    return set()


def _func_name(p: Pipeline, name: str) -> str | None:
    """The Func's own name (its allocations' name) of the Func a schedule calls `name`."""
    for f in topo_order(p.outputs):
        if p.names.get(id(f)) == name:
            return f.name
    return None
