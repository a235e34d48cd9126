"""Symbolic interval arithmetic over loop nests (bounds inference's engine).

`expr_bounds(e, scope)` returns (lo, hi) Exprs — or None for an unbounded
side — such that lo <= e <= hi whenever every var in `scope` lies in its
interval; vars not in `scope` are treated as single points. `box_of(stmt,
target)` is the box of `target` (a Func or an input buffer) read or written
anywhere in `stmt`, in terms of the vars defined outside `stmt`.
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager

from hdsl.ir.expr import (BinOp, BufferProp, Cast, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar,
                          Select, Unary, Var, called, free_vars, intern, is_canonical, memo_table,
                          subst_vars, substitute, walk)
from hdsl.ir.simplify import const_value, simplify
from hdsl.ir.stmt import Block, Evaluate, For, IfThenElse, LetStmt, Provide, Realize, Stmt
from hdsl.ir.types import BOOL, I32, Type

Bound = Expr | None

# The run-time conditions under which the bounds of float -> i32 conversions hold (a
# float range inside +-2^30, never NaN), collected while `float_coordinate_checks()`
# is active: lower() checks each before anything runs. Outside it such conversions
# are unbounded, as before (a pass that runs after the checks are written must not
# rely on a condition nobody checks). lower() turns it on only for a pipeline that
# cannot be bounded without it. Per thread: pipelines lowered on other threads at the
# same time must neither use these rules nor add their checks to this one's list.
_float_state = threading.local()


def _float_checks_list() -> list | None:
    return getattr(_float_state, "checks", None)


@contextmanager
def float_coordinate_checks(enabled: bool = True):
    """Collect (condition, conversion) pairs for bounds derived through float arithmetic
    (enabled=False: none are derived, as outside the context)."""
    old = _float_checks_list()
    _float_state.checks = [] if enabled else None
    try:
        yield _float_state.checks
    finally:
        _float_state.checks = old


def _i(op, a, b):
    return simplify(BinOp(op, a, b, I32))


def _min(a: Bound, b: Bound) -> Bound:
    if a is None or b is None:
        return None
    return _i("min", a, b)


def _max(a: Bound, b: Bound) -> Bound:
    if a is None or b is None:
        return None
    return _i("max", a, b)


def expr_bounds(e: Expr, scope: dict) -> tuple[Bound, Bound]:
    # memoized per scope: call arguments share subexpressions (a DAG after inlining)
    memo = scope.get("__memo__")
    if memo is None:
        memo = scope["__memo__"] = {}
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    out = _expr_bounds(e, scope)
    memo[id(e)] = (e, out)
    return out


def _expr_bounds(e: Expr, scope: dict) -> tuple[Bound, Bound]:
    if e.type == I32 and isinstance(e, BinOp) and e.op in ("+", "-"):
        # floor(x / c) * c inside a sum: replace it by x (upper) or x - (c - 1) (lower)
        # before bounding, so the sum's terms can cancel symbolically first
        up, down = _relax(e, True, scope), _relax(e, False, scope)
        if up is not e or down is not e:
            return (_bounds(simplify(down), scope)[0], _bounds(simplify(up), scope)[1])
    return _bounds(e, scope)


def _relax(e: Expr, upper: bool, scope: dict) -> Expr:
    if isinstance(e, BinOp) and e.type == I32:
        if e.op in ("+", "-"):
            a = _relax(e.a, upper, scope)
            b = _relax(e.b, upper if e.op == "+" else not upper, scope)
            return e if a is e.a and b is e.b else BinOp(e.op, a, b, I32)
        k = const_value(e.b)
        # (not when x is a run-time constant: floor(x / c) * c is then its own exact bound, a
        # rounded-up split's last point, which x would overstate by up to c - 1)
        if e.op == "*" and k is not None and k > 0 and isinstance(e.a, BinOp) and e.a.op == "/" \
                and const_value(e.a.b) == k and not _fixed(e.a.a, scope):
            x = e.a.a
            return x if upper else BinOp("-", x, Const(I32, k - 1), I32)
    return e


def _bounds(e: Expr, scope: dict) -> tuple[Bound, Bound]:
    t = e.type
    if t == I32 and isinstance(e, (Cast, Unary, Select, Intrinsic)) and _fixed(e, scope):
        # the same value wherever the ranged vars are (`i32(ceil(3.0f * sigma))`, a radius
        # from a param): a single point, kept whole rather than widened to the type's range
        return (e, e)
    if t.is_float():
        return _float_bounds(e, scope)
    if isinstance(e, Const):
        if t.is_float() or t.is_bool():
            return (e, e) if not t.is_bool() else (Const(I32, int(e.value)), Const(I32, int(e.value)))
        c = Const(I32, int(e.value))        # one object: a point (the point rules test `lo is hi`)
        return (c, c) if t.bits <= 32 else (None, None)
    if isinstance(e, (Var, RVar)):
        name = e.name if isinstance(e, Var) else e.name
        if isinstance(e, RVar):
            key = ("rvar", id(e.rdom), e.index)
            if key in scope:
                return scope[key]
            return (None, None)
        if name in scope:
            return scope[name]
        return (e, e)
    if isinstance(e, (Param, BufferProp)):
        if t == I32 or isinstance(e, BufferProp):
            return (e, e)
        if t.is_int() or t.is_uint():
            return (Cast(I32, e), Cast(I32, e)) if t.bits < 32 or (t.is_int() and t.bits == 32) else (None, None)
        return (e, e)
    if isinstance(e, Cast):
        lo, hi = expr_bounds(e.value, scope)
        src = e.value.type
        if t.is_float() or t.is_bool():
            return (None, None)
        if src.is_integral() and not src.is_bool() and _fits(src, t):
            return (lo, hi)
        if src.is_float() and src.bits >= 32 and not e.saturate and t == I32:
            return _float_to_int(e, lo, hi, scope)
        return _type_bounds(t)
    if isinstance(e, Unary):
        if e.op == "-" and t == I32:
            lo, hi = expr_bounds(e.a, scope)
            return (None if hi is None else _i("-", Const(I32, 0), hi), None if lo is None else _i("-", Const(I32, 0), lo))
        return _type_bounds(t)
    if isinstance(e, Select):
        a = expr_bounds(e.t, scope)
        b = expr_bounds(e.f, scope)
        if e.type == I32 and a[0] is not None and a[0] is a[1] and b[0] is not None and b[0] is b[1] \
                and not _mentions_ranged(e.cond, scope):
            v = simplify(Select(_at_points(e.cond, scope), a[0], b[0], I32))
            return (v, v)
        return (_min(a[0], b[0]), _max(a[1], b[1]))
    if isinstance(e, BinOp):
        return _binop(e, scope)
    if isinstance(e, Intrinsic) and e.name == "print":
        return expr_bounds(e.args[0], scope)
    return _type_bounds(t)


def _fixed(e: Expr, scope: dict) -> bool:
    """e depends on nothing scope ranges, no reduction var and no memory: a run-time constant."""
    if free_vars(e) & {k for k in scope if isinstance(k, str)}:
        return False
    return not any(isinstance(n, (RVar, FuncCall, InputCall)) or type(n).__name__ == "Load" for n in walk(e))


def _as_i32(e: Expr) -> Expr:
    if isinstance(e, Const):
        return Const(I32, int(e.value))
    return Cast(I32, e)


def _at_points(e: Expr, scope: dict) -> Expr:
    """e with each var that scope pins to a single point replaced by that point (a loop of
    one iteration, bounded over, still has to leave no trace of its var)."""
    def visit(n):
        if isinstance(n, Var) and n.name in scope:
            lo, hi = scope[n.name]
            if lo is not None and lo is hi and not (isinstance(lo, Var) and lo.name == n.name):
                return lo
        return None
    return substitute(e, visit)


def _mentions_ranged(e: Expr, scope: dict) -> bool:
    """Does e use a var that scope gives a range (rather than a point)?"""
    for n in walk(e):
        if isinstance(n, Var) and n.name in scope:
            lo, hi = scope[n.name]
            if lo is None or lo is not hi:
                return True
        if isinstance(n, RVar):
            return True
    return False


def _fits(src, t) -> bool:
    if t.is_int():
        return (src.is_int() and src.bits <= t.bits) or (src.is_uint() and src.bits < t.bits)
    return src.is_uint() and src.bits <= t.bits


def _type_bounds(t) -> tuple[Bound, Bound]:
    if (t.is_int() or t.is_uint()) and t.bits <= 16:
        return (Const(I32, int(t.min_value())), Const(I32, int(t.max_value())))
    return (None, None)


def _binop(e: BinOp, scope):
    op = e.op
    if e.type != I32:
        if e.type.is_bool():
            return (Const(I32, 0), Const(I32, 1))
        t = e.type
        if (t.is_int() or t.is_uint()) and t.bits <= 16 and op in ("+", "-", "*", "/", "%", "min", "max"):
            # narrow integers: the i32 rules, kept when the result provably stays in range
            lo, hi = _binop(BinOp(op, _as_i32(e.a), _as_i32(e.b), I32), scope)
            tlo, thi = _type_bounds(t)
            if const_value(lo) is not None and const_value(hi) is not None \
                    and const_value(lo) >= const_value(tlo) and const_value(hi) <= const_value(thi):
                return (lo, hi)
        return _type_bounds(t)
    a = expr_bounds(e.a, scope)
    b = expr_bounds(e.b, scope)
    if a[0] is not None and a[0] is a[1] and b[0] is not None and b[0] is b[1] and op in ("/", "%", "*"):
        # both operands are single points: so is the result, kept exact (a loop var
        # bounded later sees the whole expression, e.g. the a % b = a rule)
        v = simplify(BinOp(op, a[0], b[0], I32))
        return (v, v)
    if op == "+":
        return (None if a[0] is None or b[0] is None else _i("+", a[0], b[0]),
                None if a[1] is None or b[1] is None else _i("+", a[1], b[1]))
    if op == "-":
        return (None if a[0] is None or b[1] is None else _i("-", a[0], b[1]),
                None if a[1] is None or b[0] is None else _i("-", a[1], b[0]))
    if op == "min":
        lo = _min(a[0], b[0])
        hi = a[1] if b[1] is None else b[1] if a[1] is None else _i("min", a[1], b[1])
        return (lo, hi)
    if op == "max":
        hi = _max(a[1], b[1])
        lo = a[0] if b[0] is None else b[0] if a[0] is None else _i("max", a[0], b[0])
        return (lo, hi)
    kb = const_value(b[0]) if b[0] is not None and b[0] is b[1] or (
        b[0] is not None and b[1] is not None and const_value(b[0]) is not None
        and const_value(b[0]) == const_value(b[1])) else None
    if op == "*":
        if kb is not None and kb > 0 and isinstance(e.a, BinOp) and e.a.op == "/" and const_value(e.a.b) == kb \
                and not _fixed(e.a.a, scope):
            # floor(x / c) * c lies in [x - (c - 1), x]
            x = expr_bounds(e.a.a, scope)
            return (None if x[0] is None else _i("-", x[0], Const(I32, kb - 1)), x[1])
        if kb is not None:
            if kb >= 0:
                return (None if a[0] is None else _i("*", a[0], Const(I32, kb)),
                        None if a[1] is None else _i("*", a[1], Const(I32, kb)))
            return (None if a[1] is None else _i("*", a[1], Const(I32, kb)),
                    None if a[0] is None else _i("*", a[0], Const(I32, kb)))
        ka = const_value(a[0]) if a[0] is not None and a[1] is not None and const_value(a[0]) is not None \
            and const_value(a[0]) == const_value(a[1]) else None
        if ka is not None:
            return _binop(BinOp("*", e.b, e.a, I32), scope)
        if a[0] is not None and a[1] is not None and b[0] is not None and b[1] is not None:
            c = [_i("*", x, y) for x in a for y in b]
            lo, hi = c[0], c[0]
            for v in c[1:]:
                lo, hi = _i("min", lo, v), _i("max", hi, v)
            return (lo, hi)
        return (None, None)
    if op == "/":
        if kb is not None and kb > 0:
            return (None if a[0] is None else _i("/", a[0], Const(I32, kb)),
                    None if a[1] is None else _i("/", a[1], Const(I32, kb)))
        if kb is not None and kb < 0:
            return (None if a[1] is None else _i("/", a[1], Const(I32, kb)),
                    None if a[0] is None else _i("/", a[0], Const(I32, kb)))
        return (None, None)
    if op == "%":
        if kb is not None and kb != 0:
            if kb > 0 and a[0] is not None and a[1] is not None and const_value(a[0]) is not None \
                    and const_value(a[1]) is not None and 0 <= const_value(a[0]) and const_value(a[1]) < kb:
                return a
            return (Const(I32, 0), Const(I32, abs(kb) - 1))
        if b[1] is not None and b[0] is not None:
            whole = (Const(I32, 0), _i("max", _i("-", _i("max", b[1], _i("-", Const(I32, 0), b[0])), Const(I32, 1)),
                                       Const(I32, 0)))
            if a[0] is not None and a[1] is not None:
                # a % b is a itself when 0 <= a < b: decided at run time, like the evaluator
                inside = simplify(BinOp("&&", BinOp(">=", a[0], Const(I32, 0), BOOL),
                                        BinOp("<", a[1], b[0], BOOL), BOOL))
                if isinstance(inside, Const) and inside.value:
                    # provably a itself (a fused loop's `min + t % extent` over t in
                    # 0 .. extent - 1): exactly a's bounds, which later cancel against the
                    # loop's (min + (max - min) is max); the min with the whole range below
                    # would keep both sides and widen once they are bounded apart
                    return a
                # (kept within the whole range too, so that bounding the select later,
                # as the union of its sides, never widens past [0, |b| - 1])
                # (and the lower bound at most |b| - 1: bounded over an outer loop, the
                # select's sides are bounded apart, and a[0] alone may exceed it)
                return (simplify(BinOp("min", BinOp("max", Select(inside, a[0], whole[0], I32), whole[0], I32),
                                       whole[1], I32)),
                        simplify(BinOp("min", Select(inside, a[1], whole[1], I32), whole[1], I32)))
            return whole
        return (None, None)
    return (None, None)


def merge_monotone(a: Expr, b: Expr, want_min: bool) -> Expr | None:
    """min(a, b) (or max) as one expression when a and b differ only by a constant at one
    leaf reached through non-decreasing operations: min(F(x + 1), F(x - 1)) = F(x - 1).
    None when no such single expression is found."""
    from hdsl.ir.simplify import _offset, _same
    if _same(a, b):
        return a
    ba, ca = _offset(a)
    bb, cb = _offset(b)
    if (ba is None and bb is None) or (ba is not None and bb is not None and _same(ba, bb)):
        return a if (ca <= cb) == want_min else b
    if isinstance(a, BinOp) and isinstance(b, BinOp) and a.op == b.op and a.type == b.type == I32:
        op = a.op
        if op in ("+", "min", "max"):
            if _same(a.b, b.b):
                r = merge_monotone(a.a, b.a, want_min)
                return None if r is None else intern(BinOp(op, r, a.b, I32))
            if _same(a.a, b.a):
                r = merge_monotone(a.b, b.b, want_min)
                return None if r is None else intern(BinOp(op, a.a, r, I32))
        if op == "-":
            if _same(a.b, b.b):
                r = merge_monotone(a.a, b.a, want_min)
                return None if r is None else intern(BinOp(op, r, a.b, I32))
            if _same(a.a, b.a):
                r = merge_monotone(a.b, b.b, not want_min)
                return None if r is None else intern(BinOp(op, a.a, r, I32))
        if op in ("*", "/") and _same(a.b, b.b) and (const_value(a.b) or 0) > 0:
            r = merge_monotone(a.a, b.a, want_min)
            return None if r is None else intern(BinOp(op, r, a.b, I32))
    return None


class _Candidates:
    """A running min (or max) kept as a short list of expressions no two of which merge."""

    def __init__(self, want_min: bool):
        self.want_min = want_min
        self.items: list[Expr] = []
        self.unbounded = False

    def add(self, e: Bound):
        if e is None:
            self.unbounded = True
            return
        # (a bounded search: past 32 candidates new ones are simply kept)
        for i, old in enumerate(self.items[:32]):
            m = merge_monotone(old, e, self.want_min)
            if m is not None:
                self.items[i] = m
                return
        self.items.append(e)

    def copy(self) -> "_Candidates":
        out = _Candidates(self.want_min)
        out.items, out.unbounded = list(self.items), self.unbounded
        return out

    def value(self) -> Bound:
        if self.unbounded or not self.items:
            return None
        items = list(self.items)
        while len(items) > 1:          # a balanced tree keeps the expression shallow
            items = [_i("min" if self.want_min else "max", items[k], items[k + 1]) if k + 1 < len(items)
                     else items[k] for k in range(0, len(items), 2)]
        return items[0]


class _Box:
    def __init__(self, dims):
        self._lo = [_Candidates(True) for _ in range(dims)]
        self._hi = [_Candidates(False) for _ in range(dims)]
        self.empty = True

    def copy(self) -> "_Box":
        out = _Box(0)
        out._lo, out._hi = [c.copy() for c in self._lo], [c.copy() for c in self._hi]
        out.empty = self.empty
        return out

    def add(self, bounds):
        for d, (lo, hi) in enumerate(bounds):
            self._lo[d].add(lo)
            self._hi[d].add(hi)
        self.empty = False

    @property
    def lo(self) -> list[Bound]:
        return [c.value() for c in self._lo]

    @property
    def hi(self) -> list[Bound]:
        return [c.value() for c in self._hi]


def box_of(stmt: Stmt, target, dims: int, scope: dict | None = None, reads=True, writes=True,
           record: dict | None = None, known: dict | None = None, required: "Required | None" = None):
    """The (lo, hi) per dim of `target` touched in stmt; None if not touched.

    record: a dict that keeps what was found in stmt and, for a Block, in each of its
    statements; known: such a dict from an earlier call with the same target and scope, whose
    statements are not walked again where this stmt holds them. (Lowering finds a Func's
    region in its consumers, then its storage in its production and the same consumers:
    lower.py's compute and LoopBuilder.realize. Reads and writes count alike there, since
    the consumers do not write the Func; the result is the same as walking them again.)

    As in Halide, the box is first found in terms of the innermost symbols and
    each binder is eliminated on the way out: a let by substituting its value
    (exact), a loop by bounding over its range. Keeping lets symbolic until
    then preserves the correlation between a region's min and max (a split
    loop's footprint `min + ((max - min + n) / n) * n` simplifies to about
    `max + n` instead of the difference of two unrelated intervals).

    required: the region the points a stage must compute need (Required), instead of what
    its loops touch: the lets that Required names take their bounds-only values."""
    scope = dict(scope or {})
    if record is not None and isinstance(stmt, Block):
        box = None
        for x in stmt.stmts:
            got = _walk(x, target, dims, scope, reads, writes, known, required)
            record[id(x)] = (x, got.copy() if got is not None else None)
            box = _union(box, got)
    else:
        box = _walk(stmt, target, dims, scope, reads, writes, known, required)
    if record is not None:
        record[id(stmt)] = (stmt, box.copy() if box is not None else None)
    if box is None:
        return None
    return list(zip(box.lo, box.hi))


def _union(a: "_Box | None", b: "_Box | None"):
    if a is None:
        return b
    if b is None:
        return a
    for d in range(len(a._lo)):
        for src, dst in ((b._lo[d], a._lo[d]), (b._hi[d], a._hi[d])):
            if src.unbounded:
                dst.unbounded = True
            for e in src.items:
                dst.add(e)
    return a


def _calls_box(e: Expr, target, dims, scope):
    box = None
    if id(target) not in called(e):
        return None
    for n in walk(e):
        if (isinstance(n, FuncCall) and n.func is target) or (isinstance(n, InputCall) and n.buffer is target):
            if box is None:
                box = _Box(dims)
            box.add([expr_bounds(a, scope) for a in n.args])
    return box


def _eliminate(box: "_Box | None", name: str, interval, exact: Expr | None = None):
    """Remove symbol `name` from the box: substitute `exact`, or bound over `interval`."""
    if box is None:
        return None
    # one scope (expr_bounds' memo) and one substitution memo for the whole box: its
    # candidates share subexpressions (the same index expression in many dims' lo and hi),
    # bounded or substituted once (the results are the same as one call per candidate)
    scope, mapping, memo = {name: interval}, {name: exact}, {}
    # and one table for the whole lowering: the boxes of the Funcs a loop nest reads hold the
    # same candidates, eliminated through the same lets and loops once per Func (the local
    # Laplacian: 2118 eliminations, 824 distinct). Keyed by canonical nodes only
    binder = (exact,) if exact is not None else interval
    shared = memo_table("eliminate") if all(x is None or is_canonical(x) for x in binder) else None
    binder_key = (name,) + tuple(id(x) for x in binder)

    def fix(e: Expr, lower: bool) -> Bound:
        if not _mentions(e, name):
            return e
        key = (id(e),) + binder_key if shared is not None and is_canonical(e) else None
        hit = shared.get(key) if key is not None else None
        if hit is None:
            out = simplify(subst_vars(e, mapping, memo)) if exact is not None else expr_bounds(e, scope)
            if key is not None:
                shared[key] = (e, binder, out)          # (what the ids name, kept alive)
        else:
            out = hit[2]
        if exact is not None:
            return out
        return out[0] if lower else out[1]
    out = _Box(len(box._lo))
    for d in range(len(box._lo)):
        for src, dst, lower in ((box._lo[d], out._lo[d], True), (box._hi[d], out._hi[d], False)):
            dst.unbounded = src.unbounded
            for e in src.items:
                dst.add(fix(e, lower))
    out.empty = box.empty
    return out


def _mentions(e: Expr, name: str) -> bool:
    return name in free_vars(e)


class Required:
    """Bounds-only facts, for the region a Func must compute (Halide's rule for
    TailStrategy::RoundUp: a rounded-up stage's producers are computed over what the stage's
    region needs, not over its rounded loops; its extra lanes read their producers' storage,
    which covers every point the loops touch, and are never used).

    alt: key -> (fact, loops), taken where every loop of `loops` lies inside the walked
    statement: for a let's name, its bounds-only value (a rounded-up split's point clamped
    to its region's end, where the split's outer loop is walked: within one iteration of
    it, the stage computes a whole tile, and so must its producers computed there); for
    ("range", name), a (lo, hi) range that a Func's coordinate (a loop's var or a let) is
    clamped to (a Func computed per tile of a rounded-up stage: the part of the tile that
    the stage's region needs).
    force: take every fact whatever the loops (what a producer computed inside such a tile
    needs for the stage's region alone, kept for walks from further out); `outside` then
    collects the loops of the facts taken that way. used: set when any fact was taken;
    skipped: when one was not, its loops not all walked."""

    def __init__(self, alt: dict, force: bool = False):
        self.alt, self.force = alt, force
        self.outside: set = set()
        self.used = False
        self.skipped = False

    def take(self, name: str, inside: frozenset):
        hit = self.alt.get(name)
        if hit is None:
            return None
        fact, loops = hit
        if not loops <= inside:
            if not self.force:
                self.skipped = True
                return None
            self.outside |= loops - inside
        self.used = True
        return fact


def _walk(s: Stmt, target, dims, scope, reads, writes, known=None, req=None, inside=frozenset()):
    if known is not None:
        hit = known.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1].copy() if hit[1] is not None else None
    if isinstance(s, For):
        inner = _walk(s.body, target, dims, scope, reads, writes, known, req,
                      inside | {s.var} if req is not None else inside)
        if inner is None:
            return None
        lo = simplify(s.min)
        hi = simplify(BinOp("-", BinOp("+", s.min, s.extent, I32), Const(I32, 1), I32))
        fact = req.take(("range", s.var), inside) if req is not None else None
        if fact is not None:
            lo, hi = simplify(BinOp("max", lo, fact[0], I32)), simplify(BinOp("min", hi, fact[1], I32))
        return _eliminate(inner, s.var, (lo, hi))
    if isinstance(s, LetStmt):
        box = _calls_box(s.value, target, dims, scope) if reads else None
        inner = _walk(s.body, target, dims, scope, reads, writes, known, req, inside)
        if s.value.type == I32:
            value = s.value
            if req is not None and inner is not None:
                alt = req.take(s.name, inside)
                value = value if alt is None else alt
                fact = req.take(("range", s.name), inside)
                if fact is not None:
                    value = simplify(BinOp("max", BinOp("min", value, fact[1], I32), fact[0], I32))
            inner = _eliminate(inner, s.name, None, exact=value)
        else:
            inner = _eliminate(inner, s.name, expr_bounds(s.value, scope))
        return _union(box, inner)
    if isinstance(s, Block):
        box = None
        for x in s.stmts:
            box = _union(box, _walk(x, target, dims, scope, reads, writes, known, req, inside))
        return box
    if isinstance(s, IfThenElse):
        box = _calls_box(s.cond, target, dims, scope) if reads else None
        box = _union(box, _walk(s.then, target, dims, scope, reads, writes, known, req, inside))
        if s.otherwise is not None:
            box = _union(box, _walk(s.otherwise, target, dims, scope, reads, writes, known, req, inside))
        return box
    if isinstance(s, Realize):
        return _walk(s.body, target, dims, scope, reads, writes, known, req, inside)
    if isinstance(s, Provide):
        box = None
        if writes and s.func is target:
            box = _Box(dims)
            box.add([expr_bounds(a, scope) for a in s.args])
        if reads:
            for e in list(s.args) + list(s.values):
                box = _union(box, _calls_box(e, target, dims, scope))
        return box
    if isinstance(s, Evaluate):
        return _calls_box(s.value, target, dims, scope) if reads else None
    return None


# --- float bounds -------------------------------------------------------------------------
#
# A float expression's bounds are (lo, hi) Exprs of its type, either side None when
# unknown; (None, None) says nothing, not even that the value is a number. A bound side
# that is present is a claim that holds whenever every present side evaluates to a
# finite number at run time: then the value is not NaN and lies within the present
# sides. So any doubt (an operand that may be NaN or infinite, a divisor that may be 0)
# is written into the bounds as a NaN or an infinity, which the conversion to an integer
# (the one consumer) checks for. The ops are IEEE operations rounded to nearest, each
# monotone in each operand over a sign-definite range, so the same operations on the
# ends of the ranges (the corners, for * and /) bound the result, as Halide's
# Bounds.cpp bounds them.

def _fconst(t: Type, v: float) -> Const:
    return Const(t, v)


def _ffinite(e: Expr) -> bool:
    return isinstance(e, Const) and math.isfinite(float(e.value))


def _fmin(a: Expr, b: Expr, want_min: bool = True) -> Expr:
    """min(a, b) (or max) that is NaN when either is (hdsl's min(NaN, 1) is 1)."""
    if isinstance(a, Const) and isinstance(b, Const) and _ffinite(a) and _ffinite(b):
        return a if (float(a.value) <= float(b.value)) == want_min else b
    if a is b:
        return a
    pick = BinOp("<" if want_min else ">", a, b, BOOL)
    nan_a = Intrinsic("is_nan", (a,), BOOL)
    return simplify(Select(BinOp("||", pick, nan_a, BOOL), a, b, a.type))


def _poison(sides: list, inputs: list, t: Type) -> list:
    """Each present side, NaN unless every present input side is finite (the claim of a
    result whose sides do not themselves carry an operand's infinity or NaN)."""
    uniq = {id(s): s for s in inputs if s is not None and not _ffinite(s)}
    conds = [Intrinsic("is_finite", (s,), BOOL) for s in uniq.values()]
    if not conds:
        return sides
    cond = conds[0]
    for c in conds[1:]:
        cond = BinOp("&&", cond, c, BOOL)
    nan = _fconst(t, math.nan)
    return [None if s is None else simplify(Select(cond, s, nan, t)) for s in sides]


def _f(op: str, a: Expr, b: Expr, t: Type) -> Expr:
    return simplify(BinOp(op, a, b, t))


def _float_bounds(e: Expr, scope: dict) -> tuple[Bound, Bound]:
    t = e.type
    if t.bits < 32:
        return (None, None)            # (f16: rounding through f32 is not modelled)
    if isinstance(e, Const):
        return (e, e)
    if isinstance(e, Var) and e.name in scope:
        return scope[e.name]
    if not isinstance(e, (FuncCall, InputCall)) and _fixed(e, scope):
        # a run-time constant (a param, 1 / r_sigma): a point; a NaN there is NaN in both sides
        return (e, e)
    if isinstance(e, Cast):
        src = e.value.type
        lo, hi = expr_bounds(e.value, scope)
        if src.is_float():
            # widening is exact, narrowing rounds monotonically (an overflow is an infinity)
            return (None if lo is None else simplify(Cast(t, lo)), None if hi is None else simplify(Cast(t, hi)))
        if src.is_bool() or not src.is_integral() or (lo is None and hi is None):
            return (None, None)
        # an integer is never NaN; its conversion rounds monotonically and is finite
        return (None if lo is None else simplify(Cast(t, lo)), None if hi is None else simplify(Cast(t, hi)))
    if isinstance(e, Unary) and e.op == "-":
        lo, hi = expr_bounds(e.a, scope)
        return (None if hi is None else simplify(Unary("-", hi, t)), None if lo is None else simplify(Unary("-", lo, t)))
    if isinstance(e, Select):
        a, b = expr_bounds(e.t, scope), expr_bounds(e.f, scope)
        if None in a or None in b:
            return (None, None)
        return tuple(_poison([_fmin(a[0], b[0]), _fmin(a[1], b[1], False)], [*a, *b], t))
    if isinstance(e, Intrinsic) and e.name in ("floor", "ceil", "trunc", "round") and len(e.args) == 1:
        lo, hi = expr_bounds(e.args[0], scope)
        return (None if lo is None else simplify(Intrinsic(e.name, (lo,), t)),
                None if hi is None else simplify(Intrinsic(e.name, (hi,), t)))
    if isinstance(e, BinOp) and e.op in ("+", "-", "*", "/", "min", "max"):
        return _float_binop(e, scope)
    return (None, None)


def _float_binop(e: BinOp, scope: dict) -> tuple[Bound, Bound]:
    t, op = e.type, e.op
    a, b = expr_bounds(e.a, scope), expr_bounds(e.b, scope)
    if op in ("+", "-"):
        # an infinite or NaN end makes the matching result end infinite or NaN: no poison
        # needed while both ends are kept (inf + -inf is NaN)
        bl, bh = (b[0], b[1]) if op == "+" else (b[1], b[0])
        lo = None if a[0] is None or bl is None else _f(op, a[0], bl, t)
        hi = None if a[1] is None or bh is None else _f(op, a[1], bh, t)
        if lo is not None and hi is not None:
            return (lo, hi)
        return tuple(_poison([lo, hi], [*a, *b], t))
    if op in ("min", "max"):
        want_min = op == "min"
        # hdsl's min(a, b) is a < b ? a : b: a NaN a gives b; a NaN b gives NaN
        if a == (None, None):
            if None in b:
                return (None, None)
            # the result is b, or an a beyond it on the min's (max's) side
            side = b[1] if want_min else b[0]
            out = [None, side] if want_min else [side, None]
            return tuple(_poison(out, list(b), t))
        if None in b:
            return (None, None)
        # both operands are numbers within their bounds (a's ends may be one-sided)
        if want_min:
            lo = None if a[0] is None else _fmin(a[0], b[0])
            hi = b[1] if a[1] is None else _fmin(a[1], b[1])
        else:
            lo = b[0] if a[0] is None else _fmin(a[0], b[0], False)
            hi = None if a[1] is None else _fmin(a[1], b[1], False)
        return tuple(_poison([lo, hi], [*a, *b], t))
    if None in a or None in b:
        return (None, None)
    ok = None
    if op == "/" and b[0] is not b[1]:
        # the divisor's range must not hold 0 (checked at run time: NaN ends otherwise; a
        # single divisor needs no check: x / 0 is infinite or NaN at the corners themselves)
        pos, neg = BinOp(">", b[0], _fconst(t, 0.0), BOOL), BinOp("<", b[1], _fconst(t, 0.0), BOOL)
        ok = simplify(BinOp("||", pos, neg, BOOL))
    corners = []
    for x in dict.fromkeys(a):
        for y in dict.fromkeys(b):
            corners.append(_f(op, x, y, t))
    lo, hi = corners[0], corners[0]
    for c in corners[1:]:
        lo, hi = _fmin(lo, c), _fmin(hi, c, False)
    if ok is not None:
        nan = _fconst(t, math.nan)
        lo, hi = simplify(Select(ok, lo, nan, t)), simplify(Select(ok, hi, nan, t))
    # (no poison needed: an infinite or NaN operand end makes a corner infinite or NaN -
    # inf * 0 is NaN - and _fmin carries it into lo or hi)
    return (lo, hi)


# conversions beyond 2^30 in magnitude are refused at run time: index arithmetic on the
# result (z - 2, extents) must not wrap in i32
FLOAT_COORDINATE_LIMIT = 2 ** 30
# fast_math contracts a * b + c into one rounding and may take x / y as x * (1 / y): a
# value can then differ from the bounds, which are computed apart, by a few units in
# the last place. Each end is widened by 2^-16 of itself, far more than that.
_MARGIN = 2.0 ** -16


def _float_to_int(e: Cast, lo: Bound, hi: Bound, scope: dict) -> tuple[Bound, Bound]:
    """Bounds of i32(float) (truncation toward zero, NaN and out-of-range values giving
    i32's minimum). (Narrower conversions keep their type's range: always bounded, they
    never need these rules.)"""
    t = e.type
    checks = _float_checks_list()
    if lo is None or hi is None or checks is None:
        # (outside float_coordinate_checks, as before these rules: unbounded)
        return _type_bounds(t)
    ft = e.value.type
    m = _fconst(ft, _MARGIN)

    def widen(v, sign):
        mag = Intrinsic("abs", (v,), ft)
        return simplify(BinOp("+" if sign > 0 else "-", v, BinOp("*", mag, m, ft), ft))
    lo_w, hi_w = widen(lo, -1), widen(hi, 1)
    lim_lo, lim_hi = -FLOAT_COORDINATE_LIMIT, FLOAT_COORDINATE_LIMIT
    # (NaN fails both comparisons; lo_w <= hi_w whenever the claim holds)
    ok = simplify(BinOp("&&", BinOp(">=", lo_w, _fconst(ft, float(lim_lo)), BOOL),
                        BinOp("<=", hi_w, _fconst(ft, float(lim_hi)), BOOL), BOOL))
    blo, bhi = simplify(Cast(I32, lo_w)), simplify(Cast(I32, hi_w))
    if isinstance(ok, Const):
        if ok.value:
            return (blo, bhi)
        return _type_bounds(t)
    if any(isinstance(n, (Var, RVar, FuncCall, InputCall)) or type(n).__name__ == "Load" for n in walk(ok)):
        # (only a condition on params and buffer sizes can be checked before the pipeline runs)
        return _type_bounds(t)
    checks.append((ok, e))
    return (blo, bhi)
