"""IR -> IR rewrites for semantics GLSL does not have natively (../design: "Growing to several
targets", item 2), applied to a kernel's body just before GLSL code generation.

What GLSL gives (GLSL 4.50 sections 5.9 and 8): 32-bit `int`/`uint` arithmetic that wraps;
`/` on integers whose result for a negative operand is the truncated quotient on every driver we
know of but whose `%` is undefined for negative operands; shifts undefined for amounts outside
0..31; float -> int conversion undefined outside the integer's range. What hdsl means
(hdsl/interp/scalar.py, which follows Halide): Euclidean division and modulus with x / 0 ==
x % 0 == 0, shifts by any amount (a negative one shifting the other way), saturating casts, and a
float -> int cast giving the type's minimum when out of range or NaN.

The rewrites express hdsl's meaning with operations that are defined everywhere in GLSL. They
introduce four intrinsics only the GLSL generator knows, each defined on a restricted domain
that the rewrite guarantees:
- `glsl_tdiv(a, b)`, `glsl_tmod(a, b)`: C's truncating quotient and remainder, b != 0 and not
  (a == min and b == -1) for every value computed, taken or not (the generator computes both
  sides of a select, and on a CPU such as llvmpipe's a division by zero or of the minimum by -1
  traps);
- `glsl_shl(a, n)`, `glsl_shr(a, n)`: shifts by 0 <= n < bits of a's type (arithmetic right
  shift for signed types), the left shift wrapping in a's type; outside that range (only on the
  untaken side of a select) the value is unspecified but nothing traps.
tests/opengl/test_glsl_rewrites.py evaluates every rewritten form against scalar.py.

Wrapping of 8- and 16-bit integers is not a rewrite: GLSL has only 32-bit integers, and the
generator keeps every narrow value in canonical form (sign- or zero-extended), normalizing after
each operation that can leave it.
"""
from __future__ import annotations

from hdsl.ir.expr import CMP_OPS, LOGIC_OPS, BinOp, Cast, Const, Expr, Intrinsic, Select, substitute
from hdsl.ir.stmt import Stmt, map_exprs
from hdsl.ir.types import BOOL, Type

GLSL_INTRINSICS = ("glsl_tdiv", "glsl_tmod", "glsl_shl", "glsl_shr")


def rewrite_stmt(s: Stmt) -> Stmt:
    memo: dict = {}
    return map_exprs(s, lambda e: rewrite_expr(e, memo))


def rewrite_expr(e: Expr, memo: dict | None = None) -> Expr:
    return substitute(e, _rewrite, memo)


def _rewrite(e: Expr) -> Expr | None:
    if isinstance(e, BinOp):
        t = e.a.type
        if e.op in ("/", "%") and t.is_integral() and not t.is_bool():
            return _divmod(e.op, e.a, e.b, t)
        if e.op in ("<<", ">>"):
            return _shift(e.op, e.a, e.b)
    if isinstance(e, Cast):
        src = e.value.type
        if e.saturate:
            return _saturating_cast(e.type, e.value)
        if src.is_float() and e.type.is_integral() and not e.type.is_bool():
            return _float_to_int(e.type, e.value)
    return None


# --- small builders (typed like hdsl.ir.ops, without its literal coercions) ---------------

def k(t: Type, v) -> Const:
    return Const(t, float(v) if t.is_float() else bool(v) if t.is_bool() else int(v))


def op(o: str, a: Expr, b: Expr) -> Expr:
    return BinOp(o, a, b, BOOL if o in CMP_OPS or o in LOGIC_OPS else a.type)


def sel(c: Expr, a: Expr, b: Expr) -> Expr:
    return Select(c, a, b, a.type)


def call(name: str, t: Type, *args: Expr) -> Expr:
    return Intrinsic(name, tuple(args), t)


def _const(e: Expr) -> int | None:
    return int(e.value) if isinstance(e, Const) and not e.type.is_float() else None


# --- Euclidean division -------------------------------------------------------------------

def _divmod(o: str, a: Expr, b: Expr, t: Type) -> Expr:
    kb = _const(b)
    zero, one = k(t, 0), k(t, 1)
    if t.is_uint():
        if kb:
            return call("glsl_tdiv" if o == "/" else "glsl_tmod", t, a, b)
        is_zero = op("==", b, zero)
        safe = sel(is_zero, one, b)
        return sel(is_zero, zero, call("glsl_tdiv" if o == "/" else "glsl_tmod", t, a, safe))
    if kb is not None and kb > 0:
        if kb & (kb - 1) == 0:
            # floor division by 2^s is an arithmetic shift; the non-negative remainder a mask
            s = kb.bit_length() - 1
            return (call("glsl_shr", t, a, k(t, s)) if s else a) if o == "/" else op("&", a, k(t, kb - 1))
        q, r = call("glsl_tdiv", t, a, b), call("glsl_tmod", t, a, b)
        neg = op("<", r, zero)
        return sel(neg, op("-", q, one), q) if o == "/" else sel(neg, op("+", r, b), r)
    # any divisor: 0 and -1 apart (x / 0 == 0; x / -1 == -x, which wraps for the minimum,
    # where C's division is undefined), then the truncated results moved to the Euclidean ones
    is_zero = op("==", b, zero)
    is_m1 = op("==", b, k(t, -1))
    safe = sel(op("||", is_zero, is_m1), one, b)
    q, r = call("glsl_tdiv", t, a, safe), call("glsl_tmod", t, a, safe)
    neg = op("<", r, zero)
    pos = op(">", safe, zero)
    if o == "/":
        fixed = sel(neg, sel(pos, op("-", q, one), op("+", q, one)), q)
        return sel(is_zero, zero, sel(is_m1, op("-", zero, a), fixed))
    fixed = sel(neg, sel(pos, op("+", r, safe), op("-", r, safe)), r)
    return sel(op("||", is_zero, is_m1), zero, fixed)


# --- shifts -------------------------------------------------------------------------------

def _shift(o: str, a: Expr, b: Expr) -> Expr:
    t, bt = a.type, b.type
    bits = t.bits
    kb = _const(b)

    def left(n: Expr, kn: int | None) -> Expr:
        if kn is not None:
            return k(t, 0) if kn >= bits else call("glsl_shl", t, a, k(n.type, kn)) if kn else a
        # (n >= 0 here: the amount's type is unsigned, or the caller chose this side for it)
        return sel(op(">=", n, k(n.type, bits)), k(t, 0), call("glsl_shl", t, a, n))

    def right(n: Expr, kn: int | None) -> Expr:
        if kn is not None:
            if kn >= bits:
                return call("glsl_shr", t, a, k(n.type, bits - 1)) if t.is_int() else k(t, 0)
            return call("glsl_shr", t, a, k(n.type, kn)) if kn else a
        if t.is_int():
            return call("glsl_shr", t, a, op("min", n, k(n.type, bits - 1)))
        return sel(op(">=", n, k(n.type, bits)), k(t, 0), call("glsl_shr", t, a, n))

    forward, backward = (left, right) if o == "<<" else (right, left)
    if kb is not None:
        return forward(b, kb) if kb >= 0 else backward(b, min(-kb, bits))
    if bt.is_uint():
        return forward(b, None)
    # a negative amount shifts the other way: -max(b, -bits) cannot overflow
    back = op("-", k(bt, 0), op("max", b, k(bt, -bits)))
    return sel(op(">=", b, k(bt, 0)), forward(b, None), backward(back, None))


# --- casts --------------------------------------------------------------------------------

def _float_range(t: Type) -> tuple[float, float]:
    """[lo, hi) of the integers t holds, both exact powers of two (or 0) in any float type."""
    return float(t.min_value()), 2.0 ** (t.bits if t.is_uint() else t.bits - 1)


def _float_to_int(t: Type, v: Expr) -> Expr:
    """Toward zero; out of t's range or NaN: t's minimum (scalar.cast_values)."""
    src = v.type
    tv = call("trunc", src, v)
    lo, hi = _float_range(t)
    ok = op("&&", op(">=", tv, k(src, lo)), op("<", tv, k(src, hi)))
    return sel(ok, Cast(t, tv), k(t, t.min_value()))


def _saturating_cast(t: Type, v: Expr) -> Expr:
    """scalar._saturate: clamp into t's range, then the ordinary cast."""
    src = v.type
    if t.is_float():
        return Cast(t, v)            # a float's range is [-inf, inf]: an ordinary cast
    if src.is_float():
        if t.is_bool():
            return op(">=", v, k(src, 1))         # NaN -> false, (0, 1) truncates to false
        lo, hi = t.min_value(), t.max_value()
        # (hi rounded to the float type compares the same as hi itself: no float lies between)
        inner = sel(op(">=", v, k(src, hi)), k(t, hi),
                    sel(op("<=", v, k(src, lo)), k(t, lo), Cast(t, call("trunc", src, v))))
        return sel(call("is_nan", BOOL, v), k(t, 0), inner)
    if t.is_bool():
        return op(">", v, k(src, 0)) if src.is_int() else op("!=", v, k(src, 0))
    if src.is_bool():
        return Cast(t, v)
    lo_s, hi_s = src.min_value(), src.max_value()
    lo_t, hi_t = t.min_value(), t.max_value()
    x = v
    if hi_t < hi_s:
        x = op("min", x, k(src, hi_t))
    if lo_t > lo_s:
        x = op("max", x, k(src, lo_t))
    return Cast(t, x)


# --- 64-bit index arithmetic ----------------------------------------------------------------

def narrow_64bit(s: Stmt) -> Stmt:
    """Lowering computes sizes and strides in i64 (`i32(i64(a) * i64(b))`, `allocate f[(i64)...]`)
    so that the host never overflows; GLSL has no 64-bit integers. A 64-bit value that is cast
    to 32 bits or fewer, and made only of + - * of values widened from 32 bits or fewer, has
    the same low 32 bits when computed in 32 bits (arithmetic modulo 2^32 is a ring
    homomorphism): such trees are computed in i32/u32 instead. 64-bit lets are substituted
    into their uses first. Allocation sizes become i32 the same way (a shader's memory is far
    below 2^31 bytes). Whatever 64-bit arithmetic is left is the generator's positioned error."""
    from hdsl.ir.stmt import Allocate, LetStmt, children, with_children
    from hdsl.ir.expr import Var

    def is64(e: Expr) -> bool:
        return e.type.is_integral() and not e.type.is_bool() and e.type.bits == 64

    def go(s: Stmt, lets: dict) -> Stmt:
        def fix(e: Expr) -> Expr:
            if lets:
                e = substitute(e, lambda n: lets.get(n.name) if isinstance(n, Var) and n.name in lets else None)
            return _narrow_casts(e)
        if isinstance(s, LetStmt) and is64(s.value):
            return go(s.body, {**lets, s.name: fix(s.value)})
        if isinstance(s, Allocate):
            size = fix(s.size)
            if is64(size):
                size = to32(size, Type("int", 32)) or size
            return Allocate(s.name, s.type, size, go(s.body, lets), s.memory)
        s = map_exprs_shallow(s, fix)
        return with_children(s, [go(k, lets) for k in children(s)])
    return go(s, {})


def map_exprs_shallow(s: Stmt, fn) -> Stmt:
    """s with fn applied to its own expressions (not those of the statements inside it)."""
    from hdsl.ir.stmt import Assert, Evaluate, For, IfThenElse, LetStmt, Store
    if isinstance(s, For):
        return For(s.var, fn(s.min), fn(s.extent), s.kind, s.body)
    if isinstance(s, LetStmt):
        return LetStmt(s.name, fn(s.value), s.body)
    if isinstance(s, IfThenElse):
        return IfThenElse(fn(s.cond), s.then, s.otherwise)
    if isinstance(s, Store):
        return Store(s.buffer, fn(s.index), fn(s.value))
    if isinstance(s, Assert):
        return Assert(fn(s.cond), s.code, tuple(fn(i) for i in s.info))
    if isinstance(s, Evaluate):
        return Evaluate(fn(s.value))
    return s


def _narrow_casts(e: Expr) -> Expr:
    def visit(n: Expr):
        if isinstance(n, Cast) and not n.saturate and n.type.is_integral() and not n.type.is_bool() \
                and n.type.bits <= 32 and n.value.type.is_integral() and n.value.type.bits == 64:
            t32 = Type(n.type.code, 32)
            inner = to32(n.value, t32)
            if inner is not None:
                return inner if n.type == t32 else Cast(n.type, inner)
        return None
    return substitute(e, visit)


def to32(e: Expr, t32: Type) -> Expr | None:
    """e (64-bit, + - * of widened narrow values and constants) computed in t32, or None."""
    if isinstance(e, Const):
        v = int(e.value) & 0xFFFFFFFF
        return Const(t32, v - (1 << 32) if t32.is_int() and v >= 1 << 31 else v)
    if isinstance(e, Cast) and not e.saturate and e.value.type.is_integral() and e.value.type.bits <= 32:
        return e.value if e.value.type == t32 else Cast(t32, e.value)
    if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
        a, b = to32(e.a, t32), to32(e.b, t32)
        return BinOp(e.op, a, b, t32) if a is not None and b is not None else None
    return None
