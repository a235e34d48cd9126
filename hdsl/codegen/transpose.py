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

An access may also step by minus one (an anticausal filter's scan runs down its row): its
block is the same n x n square, its columns in reverse order. The same elements are read, so
nothing outside what the loop reads is touched; the store is blocked only where its lanes
are n or more elements apart (checked at run time for a run-time stride), so its writes
reach the same elements with the same values. A block whose loads read the stored buffer (a
scan: a recursive filter along o) keeps its stores until its end: a load at a constant
distance d behind the store takes iteration k - d's computed vector (memory where k - d
lies before the block), one at the stored point or ahead reads memory (not yet written by
the block), and any other load of that buffer leaves the loop alone. o's dependence on lets
may go through `min(a(o), b)` and `max(a(o), b)` clamps (a split's tail, ShiftInwards, a
filter's edge): a block is transposed when the clamps are no-ops over its n iterations
(checked at run time), else it runs one by one, as do the last e mod n iterations (the tail).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from hdsl.ir.expr import BinOp, Const, Expr, Intrinsic, Var, free_vars, subst_vars, substitute, walk
from hdsl.ir.simplify import simplify
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
    conds: list = field(default_factory=list)   # ("le"/"ge", a, b, at_last): a <= / >= b must hold at
    #                                             o's last (at_last) or first iteration of the block;
    #                                             ("far", d): |d| >= lanes (the store's lanes apart)
    steps: dict = field(default_factory=dict)   # id(access) -> +1 or -1: how its index moves with o
    forwards: list = field(default_factory=list)  # (Load, d): reads what iteration o - d stored


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
        if not isinstance(c, int) or c == 0:
            return None
        # (a clamp is a no-op over the block where its argument is at its largest for min, at
        # its smallest for max: the last iteration or the first, by the sign of c)
        conds.append(("le", dep, other, c > 0) if e.op == "min" else ("ge", dep, other, c < 0))
        return c
    return None


def _unclamped(e: Expr, v: str) -> Expr:
    """e with each min / max of which one side depends on v replaced by that side (what e is
    where the block's conditions hold)."""
    def go(n):
        if isinstance(n, BinOp) and n.op in ("min", "max"):
            fa, fb = v in free_vars(n.a), v in free_vars(n.b)
            if fa != fb:
                return n.a if fa else n.b
        return None
    return substitute(e, go)


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

    steps: dict = {}

    def transposed(node, index, dense_ok=(1, -1)):
        e = exp(index)
        if vec.var not in free_vars(e):
            return False
        trial: list = []
        c = _coef(e, s.var, trial)
        if c not in (1, -1):
            return False
        if _coef(e, vec.var, None) in dense_ok + (0,):
            return False
        conds.extend(trial)
        steps[id(node)] = c
        return True

    store_blocked = transposed(st, st.index)
    loads, forwards, own = [], [], []
    seen = set()
    for n in walk(st.value):
        if isinstance(n, Load) and id(n) not in seen:
            seen.add(id(n))
            if n.buffer == st.buffer:
                own.append(n)
            elif not n.type.is_bool() and transposed(n, n.index):
                loads.append(n)
    if own:
        # A scan (a recursive filter along o): the block's stores wait until its end, so a load
        # of the stored buffer at a constant distance d behind the store reads, in iteration k,
        # what iteration k - d computed (forwarded), or memory where k - d is before the block
        # (stored by an earlier block); at the store's own point or ahead, memory, which the
        # block has not written yet. The store's lanes must be n or more elements apart
        # (checked at run time), so that no other lane's block writes what a lane reads.
        if not store_blocked:
            return None
        step = steps[id(st)]
        s_index = _unclamped(exp(st.index), s.var)
        for n in own:
            diff = simplify(BinOp("-", _unclamped(exp(n.index), s.var), s_index, I32))
            if not isinstance(diff, Const):
                return None
            d = -int(diff.value) * step
            if d >= 1:
                trial: list = []
                if _coef(exp(n.index), s.var, trial) != step:
                    return None
                conds.extend(trial)
                forwards.append((n, d))
            elif not n.type.is_bool() and transposed(n, n.index):
                loads.append(n)
        e = exp(st.index)
        if _coef(e, vec.var, None) is None:
            return None          # (lanes behind a clamp may share a point: one vector at a time)
        apart = simplify(BinOp("-", subst_vars(e, {vec.var: Const(I32, 1)}), subst_vars(e, {vec.var: Const(I32, 0)}), I32))
        if vec.var in free_vars(apart) or s.var in free_vars(apart):
            return None
        conds.append(("far", apart))
    if not loads and not store_blocked:
        return None
    for cond in conds:
        if any(vec.var in free_vars(x) for x in cond[1:3] if isinstance(x, Expr)):
            return None
    return TransposePlan(outer, vec, inner, st, int(vec.extent.value), loads, store_blocked, conds, steps, forwards)


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
