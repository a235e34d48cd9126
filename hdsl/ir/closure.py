"""What a statement needs from the code around it: the one closure analysis that
outlining uses (parallel loops in hdsl/codegen/llvm.py, GPU kernels in hdsl/lower/gpu.py).

`mentioned(s)` lists every variable, param and buffer name a statement mentions,
with its type and, for buffers, whether it is read and/or written. It is a superset
of the free names (names bound inside `s` are listed too): callers keep the names
bound where the outlined code is called from, which are exactly its free names
(the lowered IR never rebinds a name that is in scope with another meaning).
"""
from __future__ import annotations

from dataclasses import dataclass

from hdsl.ir.expr import Expr, Param, Var, walk
from hdsl.ir.stmt import LaunchKernel, Load, Store, Stmt, children, own_exprs
from hdsl.ir.types import Type


@dataclass
class Use:
    kind: str            # "scalar" | "buffer"
    type: Type | None    # a scalar's type, a buffer's element type
    read: bool = False
    written: bool = False

    @property
    def access(self) -> str:
        return ("r" if self.read else "") + ("w" if self.written else "") or "r"


def mentioned(s: Stmt) -> dict[str, Use]:
    """name -> its Use, in the order first met."""
    uses: dict[str, Use] = {}
    seen: set[int] = set()

    def scalar(name, t):
        if name not in uses:
            uses[name] = Use("scalar", t)

    def buffer(name, t, write):
        u = uses.get(name)
        if u is None or u.kind != "buffer":
            u = uses[name] = Use("buffer", t)
        if write:
            u.written = True
        else:
            u.read = True

    def ex(e: Expr):
        if id(e) in seen:
            return
        for n in walk(e):
            if isinstance(n, (Var, Param)):
                scalar(n.name, n.type)
            elif isinstance(n, Load):
                buffer(n.buffer, n.type, False)
        seen.add(id(e))

    def visit(x: Stmt):
        if isinstance(x, Store):
            buffer(x.buffer, x.value.type, True)
        if isinstance(x, LaunchKernel):
            for a in x.kernel.args:
                if a.kind == "buffer":
                    buffer(a.name, a.type, "w" in a.access)
                    if "r" in a.access:
                        buffer(a.name, a.type, False)
                else:
                    scalar(a.name, a.type)
        for e in own_exprs(x):
            ex(e)
        for k in children(x):
            visit(k)
    visit(s)
    return uses


def mentioned_names(s: Stmt) -> set[str]:
    """Every variable and buffer name a statement mentions (a superset of its free names)."""
    return set(mentioned(s))
