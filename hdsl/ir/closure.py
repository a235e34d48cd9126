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

from hdsl.ir.expr import BinOp, Cast, Const, Expr, Intrinsic, Param, Select, Unary, Var, walk
from hdsl.ir.stmt import (Allocate, Assert, Block, Evaluate, For, IfThenElse, LaunchKernel, Let, LetStmt, Load,
                          Store, Stmt, children, own_exprs)
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


def shape_key(s: Stmt, first: tuple[str, ...] = (), keep_suffix: str | None = None) -> tuple | None:
    """A key equal for two statements exactly when each is the other with its names consistently
    renamed (an alpha-equivalence class, up to the sharing of subexpressions), with the names
    it gives index i: (key, names). The names in `first` get the first indices (an outlined
    loop's var), the rest their order of first use. A name ending in `keep_suffix` keeps that
    property in the key (code generation reads it). None for a statement with nodes only
    lowering or a GPU host has (Realize, Provide, calls of Funcs, kernel launches).

    Two tasks with the same key generate the same code up to the names of their values, so
    one outlined function serves both (hdsl/codegen/cpu.py, parallel_for): the local
    Laplacian's pyramid levels are one loop nest each, over different buffers."""
    index: dict[str, int] = {}
    names: list[str] = []
    out: list = []
    nodes: dict[int, int] = {}          # id(expr) -> its number (expressions are DAGs)
    keep: list = []                     # the expressions numbered (their ids stay theirs meanwhile)

    def name(n: str):
        i = index.get(n)
        if i is None:
            i = index[n] = len(names)
            names.append(n)
        return (i, keep_suffix is not None and n.endswith(keep_suffix))

    for n in first:
        name(n)

    def ex(e: Expr) -> int:
        k = nodes.get(id(e))
        if k is not None:
            return k
        kids = tuple(ex(c) for c in e.children())
        cls = type(e)
        if cls is Const:
            d = ("C", e.type, repr(e.value), e.literal)
        elif cls is Var:
            d = ("V", name(e.name), e.type)
        elif cls is Param:
            d = ("P", name(e.name), e.type)
        elif cls is Load:
            d = ("L", name(e.buffer), e.type, kids)
        elif cls is Let:
            d = ("let", name(e.name), e.type, kids)
        elif cls is Intrinsic:
            d = ("I", e.name, e.type, e.extra, kids)
        elif cls is BinOp:
            d = ("B", e.op, e.type, kids)
        elif cls is Unary:
            d = ("U", e.op, e.type, kids)
        elif cls is Select:
            d = ("S", e.type, kids)
        elif cls is Cast:
            d = ("X", e.type, e.saturate, kids)
        else:
            raise _NoKey
        out.append(d)
        k = nodes[id(e)] = len(keep)
        keep.append(e)
        return k

    def visit(x: Stmt):
        cls = type(x)
        if cls is Block:
            out.append(("block", len(x.stmts)))
            for y in x.stmts:
                visit(y)
        elif cls is For:
            out.append(("for", name(x.var), x.kind, ex(x.min), ex(x.extent)))
            visit(x.body)
        elif cls is LetStmt:
            out.append(("let", name(x.name), ex(x.value)))
            visit(x.body)
        elif cls is IfThenElse:
            out.append(("if", ex(x.cond), x.otherwise is not None))
            visit(x.then)
            if x.otherwise is not None:
                visit(x.otherwise)
        elif cls is Store:
            out.append(("store", name(x.buffer), ex(x.index), ex(x.value)))
        elif cls is Allocate:
            out.append(("alloc", name(x.name), x.type, x.memory, ex(x.size)))
            visit(x.body)
        elif cls is Assert:
            out.append(("assert", x.code, ex(x.cond), tuple(ex(i) for i in x.info)))
        elif cls is Evaluate:
            out.append(("eval", ex(x.value)))
        else:
            raise _NoKey
    try:
        visit(s)
    except _NoKey:
        return None
    return tuple(out), names


class _NoKey(Exception):
    pass
