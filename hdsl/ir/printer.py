"""Readable pseudocode for expressions and loop nests (golden tests compare it)."""
from __future__ import annotations

import threading

from hdsl.ir.expr import (BinOp, BufferProp, Cast, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar,
                          Select, Unary, Var)
from hdsl.ir.stmt import (Allocate, Assert, Block, DeviceSync, Evaluate, For, GpuBarrier, IfThenElse, LaunchKernel, Let, LetStmt, Load, Provide, Realize,
                          RuntimeFold, Stmt, Store, own_exprs)

_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "|": 4, "^": 5, "&": 6,
         "<<": 7, ">>": 7, "+": 8, "-": 8, "*": 9, "/": 9, "%": 9}


class _Names(threading.local):
    """id(node) -> the name a large statement's shared subexpression is printed under (see
    _shared); per thread, as statements printed on two threads at once name their own."""
    def __init__(self):
        self.names: dict[int, str] = {}


_NAMES_LOCAL = _Names()

# a statement whose expressions would print as more nodes than this (expressions are DAGs: an
# inlined pipeline shares subtrees, and printed as trees they can grow exponentially) is
# printed with its shared subexpressions as `let tN = …` lines first, like Halide's stmt files
_TREE_LIMIT = 4000


def expr_str(e: Expr, prec: int = 0) -> str:
    name = _NAMES_LOCAL.names.get(id(e))
    if name is not None:
        return name
    if isinstance(e, Const):
        if e.type.is_bool():
            return "true" if e.value else "false"
        if e.type.is_float():
            s = repr(float(e.value))
            return s + ("f" if e.type.bits == 32 else "") if e.type.bits != 64 else s
        return str(e.value) if e.type.name in ("i32",) or e.literal else f"({e.type}){e.value}"
    if isinstance(e, (Var, RVar)):
        return e.name
    if isinstance(e, Param):
        return e.name
    if isinstance(e, BufferProp):
        return f"{e.buffer.name}.dim({e.dim}).{e.what}"
    if isinstance(e, Cast):
        return f"{e.type}{'_sat' if e.saturate else ''}({expr_str(e.value)})"
    if isinstance(e, BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
        p = _PREC[e.op]
        s = f"{expr_str(e.a, p)} {e.op} {expr_str(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Unary):
        return f"{e.op}{expr_str(e.a, 10)}"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, FuncCall):
        idx = f"[{e.index}]" if len(e.func.values or []) > 1 else ""
        return f"{e.func.name}({', '.join(expr_str(a) for a in e.args)}){idx}"
    if isinstance(e, InputCall):
        return f"{e.buffer.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, Intrinsic):
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, Load):
        return f"{e.buffer}[{expr_str(e.index)}]"
    if isinstance(e, Let):
        return f"(let {e.name} = {expr_str(e.value)} in {expr_str(e.body)})"
    return repr(e)


_DIMS = "xyc"


def _last(lo: Expr, extent: Expr) -> str:
    """The inclusive upper end lo + extent - 1, simplified."""
    from hdsl.ir.simplify import simplify
    from hdsl.ir.types import I32
    return expr_str(simplify(BinOp("-", BinOp("+", lo, extent, I32), Const(I32, 1), I32)))


def _tree_size(roots) -> int:
    memo: dict[int, int] = {}

    def size(n):
        hit = memo.get(id(n))
        if hit is None:
            hit = memo[id(n)] = 1 + sum(size(k) for k in n.children())
        return hit
    return sum(size(r) for r in roots)


def _shared(roots) -> list[Expr]:
    """The non-leaf nodes reached by more than one edge of the DAG, children before parents."""
    refs: dict[int, int] = {}
    order: list[Expr] = []

    def visit(n):
        refs[id(n)] = refs.get(id(n), 0) + 1
        if refs[id(n)] > 1:
            return
        for k in n.children():
            visit(k)
        order.append(n)
    for r in roots:
        visit(r)
    names = _NAMES_LOCAL.names
    return [n for n in order if refs[id(n)] > 1 and n.children() and id(n) not in names]


def stmt_str(s: Stmt, indent: int = 0) -> str:
    exprs = own_exprs(s)
    if exprs and _tree_size(exprs) > _TREE_LIMIT:
        pad = "  " * indent
        added, lines = [], []
        names = _NAMES_LOCAL.names
        try:
            for n in _shared(exprs):
                text = expr_str(n)
                name = f"t{len(names)}"
                names[id(n)] = name
                added.append(id(n))
                lines.append(f"{pad}let {name} = {text}\n")
            return "".join(lines) + _stmt_str(s, indent)
        finally:
            for k in added:
                del names[k]
    return _stmt_str(s, indent)


def _stmt_str(s: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else s.kind + " "
        return (f"{pad}{kind}for {s.var} in {expr_str(s.min)} .. {_last(s.min, s.extent)}:\n"
                + stmt_str(s.body, indent + 1))
    if isinstance(s, LetStmt):
        return f"{pad}let {s.name} = {expr_str(s.value)}\n" + stmt_str(s.body, indent)
    if isinstance(s, Block):
        return "".join(stmt_str(x, indent) for x in s.stmts)
    if isinstance(s, IfThenElse):
        out = f"{pad}if {expr_str(s.cond)}:\n" + stmt_str(s.then, indent + 1)
        if s.otherwise is not None:
            out += f"{pad}else:\n" + stmt_str(s.otherwise, indent + 1)
        return out
    if isinstance(s, Realize):
        b = ", ".join(f"{expr_str(m)} .. {_last(m, e)}" for m, e in s.bounds)
        folds = "".join(f" folded {_DIMS[d] if d < 3 else d} mod "
                        + (str(k) if not isinstance(k, RuntimeFold) else
                           f"(power of two >= max {expr_str(k.window)} over {k.var} in "
                           f"{expr_str(k.min)} .. {_last(k.min, k.extent)})")
                        for d, k in s.folds)
        return f"{pad}realize {s.func.name}({b}){folds}:\n" + stmt_str(s.body, indent + 1)
    if isinstance(s, Provide):
        vals = ", ".join(expr_str(v) for v in s.values)
        if len(s.values) > 1:
            vals = f"({vals})"
        return f"{pad}{s.func.name}({', '.join(expr_str(a) for a in s.args)}) = {vals}\n"
    if isinstance(s, Allocate):
        where = "" if s.memory == "heap" else f" in {s.memory}"
        return f"{pad}allocate {s.name}: {s.type}[{expr_str(s.size)}]{where}\n" + stmt_str(s.body, indent)
    if isinstance(s, GpuBarrier):
        return f"{pad}gpu_barrier\n"
    if isinstance(s, DeviceSync):
        return f"{pad}device_sync {s.buffer} {s.op}\n"
    if isinstance(s, LaunchKernel):
        k = s.kernel
        args = ", ".join(f"{a.name}" + (f" ({a.access})" if a.kind == "buffer" else "") for a in k.args)
        return (f"{pad}launch {k.name} on {s.device}: grid ({', '.join(expr_str(g) for g in s.grid)}), "
                f"threads ({', '.join(expr_str(t) for t in k.threads)}), shared {expr_str(k.shared_bytes)} bytes\n"
                f"{pad}  args: {args}\n" + stmt_str(k.body, indent + 1))
    if isinstance(s, Store):
        return f"{pad}{s.buffer}[{expr_str(s.index)}] = {expr_str(s.value)}\n"
    if isinstance(s, Assert):
        return f"{pad}assert {expr_str(s.cond)}, error {s.code}\n"
    if isinstance(s, Evaluate):
        return f"{pad}{expr_str(s.value)}\n"
    return f"{pad}{s!r}\n"
