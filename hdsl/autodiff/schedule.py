"""Default schedules for gradient Funcs (Li et al. 2018, Sec. 5's simple rule).

Each adjoint Func that a schedule block does not mention is computed at the
root, its pure definition vectorized along the innermost dimension and run
in parallel along the outermost: adjoints are read by several gathers and
often have scatter updates, so inlining them would recompute whole sums.
A user schedules a gradient Func by binding it to a name
(`dimg = grad(img)`, then `dimg.compute_root()...` in a schedule block)."""
from __future__ import annotations

from hdsl.ir.func import Directive, Func, Schedule

GPU_SCHEDULES = ("cuda", "opengl")
VECTOR_WIDTH = 8


def default_directives(f: Func) -> list[Directive]:
    ds = [Directive("compute_root", [])]
    if f.dims >= 2:
        ds.append(Directive("parallel", [f.args[-1]]))
    if f.dims >= 1:
        ds.append(Directive("vectorize", [f.args[0], VECTOR_WIDTH]))
    return ds


def schedule_gradients(schedules: dict, funcs: list[Func]) -> None:
    """Add the default schedule of each gradient Func to every CPU schedule that leaves it out
    (and make a default schedule if the file has none)."""
    if None not in schedules:
        schedules[None] = Schedule(None)
    for name, sched in schedules.items():
        if sched.auto or name in GPU_SCHEDULES:
            continue
        for f in funcs:
            if f.implicit or sched.for_func(f):
                continue
            for d in default_directives(f):
                sched.add(f, d)
