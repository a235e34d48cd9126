"""Two-dimensional vectorization: blocks moved between row-major and lane-major layouts are
transposed in registers, not gathered or scattered element by element.

A loop nest

    for o in [m, m + e):                (serial or unrolled)
      let ...                           (lets of o)
      vectorized for l in [p, p + n):   (n = 4, 8 or 16 lanes)
        let ...
        B[S(o, l)] = value(..., A[I(o, l)], ...)

whose store or loads step by exactly one element as o steps by one (S(o + 1, l) ==
S(o, l) + 1) but not along the lanes (a row stride, a transposed tile's i*16, a `% 64`) is
run n iterations of o at a time. Each such access covers an n x n block of its buffer whose
columns are dense: a load reads the n dense vectors A[I(o0, j) .. I(o0, j) + n - 1] for
j = 0 .. n-1 and transposes them (log2(n) stages of two-input shuffles, which x86 lowers
to unpack, shufps and vpermt2ps) into the n vectors of lanes that iterations o0 .. o0+n-1
read; a store collects the n vectors the iterations compute and writes their transpose as n
dense vectors. Every other access, and the arithmetic, is what the iterations do one by one.

The same elements are read, so nothing outside what the loop reads is touched; the store
is blocked only where no load in the block reads its buffer and its lanes are n or more
elements apart (checked at run time for a run-time stride), so its writes reach the same
elements with the same values. o's dependence on lets may go through `min(a(o), b)` and
`max(a(o), b)` clamps (a split's tail, ShiftInwards): a block is transposed when the clamps
are no-ops over its n iterations (checked at run time), else it runs one by one, as do the
last e mod n iterations (the tail).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from hdsl.ir.expr import BinOp, Const, Expr, Intrinsic, Var, free_vars, subst_vars, walk
from hdsl.ir.stmt import For, Let, LetStmt, Load, Store
from hdsl.ir.types import I32

SYM = "sym"          # a coefficient that is not a constant (a buffer's run-time stride)
BLOCK_LANES = (4, 8, 16)


@dataclass
class TransposePlan:
    outer_lets: list          # LetStmts between o and the vectorized loop
    vec: For                  # the vectorized loop
    inner_lets: list          # LetStmts inside it
    store: Store
    lanes: int
    loads: list               # Load nodes (of store.value) read as transposed blocks
    store_blocked: bool       # the store is written as a transposed block
    conds: list = field(default_factory=list)   # (op, a, b): a op b must hold, op "le" at o's last, "ge" at its first


def _coef(e: Expr, v: str, conds: list | None):
    """The coefficient of Var v in e (an int), SYM when it is not a constant, None when e is not
    affine in v. With `conds` a list, min(a, b) / max(a, b) with a increasing in v and b free of v
    count as a, the condition that makes them so appended."""
    fv = free_vars(e)
    if v not in fv:
        return 0
    if isinstance(e, Var):
        return 1
    if not (isinstance(e, BinOp) and e.type == I32):
        return None
    if e.op in ("+", "-"):
        a, b = _coef(e.a, v, conds), _coef(e.b, v, conds)
        if a is None or b is None:
            return None
        if a == SYM or b == SYM:
            return SYM
        return a + b if e.op == "+" else a - b
    if e.op == "*":
        dep, other = (e.a, e.b) if v not in free_vars(e.b) else (e.b, e.a)
        if v in free_vars(other):
            return None
        c = _coef(dep, v, conds)
        if c is None or c == 0:
            return c
        k = other.value if isinstance(other, Const) else None
        return c * int(k) if isinstance(c, int) and k is not None else SYM
    if e.op in ("min", "max") and conds is not None:
        dep, other = (e.a, e.b) if v not in free_vars(e.b) else (e.b, e.a)
        if v in free_vars(other):
            return None
        c = _coef(dep, v, conds)
        if not isinstance(c, int) or c <= 0:
            return None
        conds.append(("le" if e.op == "min" else "ge", dep, other))
        return c
    return None


def plan(s: For) -> TransposePlan | None:
    """The plan for loop s, or None where no access of its body is worth blocking."""
    outer, body = [], s.body
    while isinstance(body, LetStmt):
        outer.append(body)
        body = body.body
    if not (isinstance(body, For) and body.kind == "vectorized" and isinstance(body.extent, Const)
            and int(body.extent.value) in BLOCK_LANES):
        return None
    vec, inner, st = body, [], body.body
    while isinstance(st, LetStmt):
        inner.append(st)
        st = st.body
    if not isinstance(st, Store):
        return None
    t = st.value.type
    if t.is_bool() or any(isinstance(n, Let) or (isinstance(n, Intrinsic) and n.name == "print")
                          for n in walk(st.value)):
        return None
    if any(isinstance(n, Load) and n.buffer == st.buffer for x in outer + inner for n in walk(x.value)) or \
            any(isinstance(n, Load) for n in walk(st.index)):
        return None              # (a data-dependent store, or one whose block reads its own buffer)
    lets = {}
    for x in outer + inner:
        lets[x.name] = subst_vars(x.value, lets) if lets else x.value
    if s.var in free_vars(vec.min) or any(x.name == s.var or x.name == vec.var for x in outer + inner):
        return None

    def exp(e):
        return subst_vars(e, lets) if lets else e

    conds: list = []

    def transposed(index, dense_ok=(1, -1)):
        e = exp(index)
        if vec.var not in free_vars(e):
            return False
        trial: list = []
        if _coef(e, s.var, trial) != 1:
            return False
        if _coef(e, vec.var, None) in dense_ok + (0,):
            return False
        conds.extend(trial)
        return True

    loads = []
    seen = set()
    for n in walk(st.value):
        if isinstance(n, Load) and id(n) not in seen:
            seen.add(id(n))
            if n.buffer == st.buffer:
                return None          # the block's stores and loads would be reordered
            if not n.type.is_bool() and transposed(n.index):
                loads.append(n)
    store_blocked = transposed(st.index)
    if not loads and not store_blocked:
        return None
    for _, a, c in conds:
        if vec.var in free_vars(a) or vec.var in free_vars(c):
            return None
    return TransposePlan(outer, vec, inner, st, int(vec.extent.value), loads, store_blocked, conds)


def transpose_vectors(b: ir.IRBuilder, rows: list) -> list:
    """The transpose of n vectors of n lanes: log2(n) stages, each swapping one bit of the row
    index with the same bit of the lane index through two-input shuffles."""
    n = len(rows)
    rows = list(rows)
    bit = 1
    while bit < n:
        out = list(rows)
        for i in range(n):
            if i & bit:
                continue
            lo = [j if not j & bit else n + j - bit for j in range(n)]
            hi = [j + bit if not j & bit else n + j for j in range(n)]
            mt = ir.VectorType(ir.IntType(32), n)
            out[i] = b.shuffle_vector(rows[i], rows[i | bit], ir.Constant(mt, lo))
            out[i | bit] = b.shuffle_vector(rows[i], rows[i | bit], ir.Constant(mt, hi))
        rows = out
        bit <<= 1
    return rows
