"""OpenGL's fragment path: the kernels of Funcs scheduled `glsl(x, y, c)` are marked so that
hdsl/codegen/glsl.py renders them as fragment shaders (one fragment per (x, y), the channels c
in one RGBA texel) instead of compute shaders. The loop nest is the GPU lowering's own: the
directive makes x and y block loops with c the innermost loop (lower/loops.py), and the
outlined kernel is the same as gpu_blocks(x, y) would give."""
from __future__ import annotations

from dataclasses import replace

from hdsl.ir.stmt import For, LaunchKernel, Stmt, children, with_children


def glsl_directives(sched) -> dict:
    """{Func name: its glsl Directive} of a schedule."""
    out = {}
    if sched is None:
        return out
    for fid, ds in sched.directives.items():
        for d in ds:
            if d.name == "glsl":
                out[sched.funcs[fid].name] = d
    return out


def kernel_func(body: Stmt) -> str | None:
    """The Func whose block loops a kernel's body starts with (loop vars are FUNC.sN.VAR)."""
    s = body
    while s is not None and not isinstance(s, For):
        kids = children(s)
        s = kids[0] if len(kids) == 1 else None
    if s is None or s.kind != "gpu_block" or ".s" not in s.var:
        return None
    return s.var.rsplit(".s", 1)[0]


def check_storage(sched) -> None:
    """The fragment path copies rows of the rendered texture into the Func's buffer: x must be
    its innermost storage dim (a reorder_storage that moves it is an error at the directive)."""
    from hdsl.diagnostics import HdslError
    for fid, ds in sched.directives.items():
        glsl = next((d for d in ds if d.name == "glsl"), None)
        order = next((d for d in ds if d.name == "reorder_storage"), None)
        if glsl is not None and order is not None and order.args[0] != glsl.args[0]:
            raise HdslError(f"the fragment path stores rows of x, so '{glsl.args[0]}' must stay the innermost "
                            f"storage dim of '{sched.funcs[fid].name}'", order.span,
                            f"start the reorder_storage with {glsl.args[0]}, or leave it out")


def mark_fragments(stmt: Stmt, sched) -> Stmt:
    """Each kernel of a glsl-scheduled Func, with `fragment` = (Func, its channel loop var)."""
    marks = glsl_directives(sched)
    if not marks:
        return stmt
    check_storage(sched)

    def visit(s):
        if isinstance(s, LaunchKernel):
            f = kernel_func(s.kernel.body)
            d = marks.get(f)
            if d is not None:
                c = f"{f}.s0.{d.args[2]}" if len(d.args) == 3 else ""
                return replace(s, kernel=replace(s.kernel, fragment=(f, c)))
            return s
        kids = children(s)
        new = [visit(k) for k in kids]
        return s if all(a is b for a, b in zip(new, kids)) else with_children(s, new)
    return visit(stmt)
