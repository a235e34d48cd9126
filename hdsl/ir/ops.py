"""Building typed expressions with Halide's coercion rules.

Every constructor here either returns a well-typed node or raises
`TypeRuleError`, which the front end turns into a positioned diagnostic.
The rules (Halide's `match_types`, `IROperator.cpp`):
- an unsuffixed integer literal takes the other operand's type, and must be
  representable in it;
- float beats int; the wider float wins;
- two unsigned: the wider; otherwise signed of the wider width;
- bitwise `& | ^` need operands of the same signedness;
- shifts keep the first operand's signedness, at the wider width;
- bool takes part in arithmetic as a 1-bit unsigned integer.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from hdsl.ir.expr import (BIT_OPS, CMP_OPS, LOGIC_OPS, SHIFT_OPS, BinOp, Cast, Const,
                          Expr, Intrinsic, Select, Unary)
from hdsl.ir.types import BOOL, ERROR, F32, I32, Type


class TypeRuleError(Exception):
    def __init__(self, message: str, hint: str | None = None, operand: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.operand = operand      # which argument is at fault, when one is


def is_literal(e: Expr) -> bool:
    return isinstance(e, Const) and e.literal


def is_error(*es: Expr) -> bool:
    return any(e.type.is_error() for e in es)


def poison() -> Const:
    return Const(ERROR, 0)


def cast(t: Type, e: Expr) -> Expr:
    if e.type == t and not is_literal(e):
        return e
    if isinstance(e, Const) and not e.type.is_error():
        return Const(t, convert_scalar(t, e.value))
    return Cast(t, e)


def convert_scalar(t: Type, v):
    """The value of `cast(t, v)` for a compile-time scalar."""
    arr = np.asarray(v)
    with np.errstate(all="ignore"):
        if t.is_bool():
            return bool(arr != 0)
        if t.is_float():
            return float(arr.astype(t.dtype))
        if arr.dtype.kind == "f":
            return int(np.trunc(arr).astype(np.int64).astype(t.dtype)) if np.isfinite(arr) else 0
        return int(np.array(int(v) & ((1 << 64) - 1), dtype=np.uint64).astype(t.dtype))


def coerce_literal(lit: Const, t: Type, operand: int | None = None) -> Expr:
    if t.is_float():
        # Halide's check_representable: the float must hold the integer exactly
        v = convert_scalar(t, lit.value)
        if v != int(lit.value):
            raise TypeRuleError(
                f"integer constant {lit.value} is not exactly representable in {t}: it would become {v:g}",
                f"write it as a float literal, e.g. {lit.value}.0, or cast the other operand", operand)
        return Const(t, float(lit.value))
    if not t.can_represent(int(lit.value)):
        wrapped = convert_scalar(t, lit.value)
        if t.is_bool():
            raise TypeRuleError(
                f"integer constant {lit.value} does not fit in bool: it would become {str(wrapped).lower()}",
                f"a condition is a 1-bit value: convert it first, e.g. u8(cond) * {lit.value}, "
                f"or write select(cond, {lit.value}, 0)", operand)
        raise TypeRuleError(
            f"integer constant {lit.value} does not fit in {t}: it would become {wrapped}",
            "cast the other operand to a wider type, e.g. i32(...)", operand)
    return Const(t, int(lit.value) if not t.is_bool() else bool(lit.value))


def match_types(a: Expr, b: Expr, what: str = "") -> tuple[Expr, Expr]:
    if is_error(a, b):
        return a, b
    la, lb = is_literal(a), is_literal(b)
    if la and not lb:
        return coerce_literal(a, b.type, 0), b
    if lb and not la:
        return a, coerce_literal(b, a.type, 1)
    ta, tb = a.type, b.type
    if ta == tb:
        return a, b
    if ta.is_float() or tb.is_float():
        if not ta.is_float():
            return cast(tb, a), b
        if not tb.is_float():
            return a, cast(ta, b)
        t = ta if ta.bits > tb.bits else tb
        return cast(t, a), cast(t, b)
    ua = ta.is_uint() or ta.is_bool()
    ub = tb.is_uint() or tb.is_bool()
    bits = max(ta.bits, tb.bits)
    if ua and ub:
        t = Type("uint", bits) if bits > 1 else BOOL
    else:
        t = Type("int", max(bits, 8))
    return cast(t, a), cast(t, b)


def _fold(op: str, a: Const, b: Const) -> Const | None:
    """Fold an operation on two integer literals (Halide rules, i32 wrap-around)."""
    from hdsl.interp.scalar import binop_values
    v = binop_values(op, np.array(a.value, np.int32), np.array(b.value, np.int32), I32)
    if op in CMP_OPS:
        return Const(BOOL, bool(v))
    return Const(I32, int(v), literal=True)


def binop(op: str, a: Expr, b: Expr) -> Expr:
    if is_error(a, b):
        return poison()
    if op in LOGIC_OPS:
        for i, e in enumerate((a, b)):
            if not e.type.is_bool():
                raise TypeRuleError(f"operands of '{op}' must be bool, not {e.type}",
                                    "compare with '!= 0' to get a bool", i)
        return BinOp(op, a, b, BOOL)
    if is_literal(a) and is_literal(b) and op not in SHIFT_OPS:
        return _fold(op, a, b)
    if op in SHIFT_OPS:
        for i, e in enumerate((a, b)):
            if not e.type.is_integral() or e.type.is_bool():
                raise TypeRuleError(f"operands of '{op}' must be integers, not {e.type}", None, i)
        if is_literal(a) and is_literal(b):
            return _fold(op, a, b)
        if is_literal(b):
            return BinOp(op, a, coerce_shift_amount(b, a.type), a.type)
        if is_literal(a):
            a = Const(I32, a.value)
        t = Type(a.type.code, max(a.type.bits, b.type.bits))
        bt = Type(b.type.code, t.bits)
        return BinOp(op, cast(t, a), cast(bt, b), t)
    if op in BIT_OPS:
        a, b = match_bitwise(a, b, op)
        return BinOp(op, a, b, a.type)
    a, b = match_types(a, b, op)
    if op in CMP_OPS:
        return BinOp(op, a, b, BOOL)
    if a.type.is_bool():
        raise TypeRuleError(f"arithmetic '{op}' on bool values", "cast to an integer type first, e.g. u8(c)")
    return BinOp(op, a, b, a.type)


def coerce_shift_amount(b: Const, t: Type) -> Expr:
    v = int(b.value)
    if abs(v) >= t.bits:
        raise TypeRuleError(f"shift by {v} is out of range for {t}", f"shift amounts must be below {t.bits}", 1)
    return Const(t if v >= 0 or not t.is_uint() else Type("int", t.bits), v)


def match_bitwise(a: Expr, b: Expr, op: str) -> tuple[Expr, Expr]:
    for i, e in enumerate((a, b)):
        if e.type.is_float():
            raise TypeRuleError(f"operands of '{op}' must be integers or bools, not {e.type}", None, i)
    if is_literal(a) and is_literal(b):
        return Const(I32, a.value), Const(I32, b.value)
    if is_literal(a):
        return coerce_literal(a, b.type, 0), b
    if is_literal(b):
        return a, coerce_literal(b, a.type, 1)
    ta, tb = a.type, b.type
    if ta == tb:
        return a, b
    sa, sb = ta.is_int(), tb.is_int()
    if sa != sb:
        raise TypeRuleError(f"operands of '{op}' must both be signed or both unsigned ({ta} and {tb})",
                            "cast one of them explicitly")
    t = ta if ta.bits >= tb.bits else tb
    return cast(t, a), cast(t, b)


def unary(op: str, a: Expr) -> Expr:
    if is_error(a):
        return poison()
    if op == "+":
        return a
    if op == "!":
        if not a.type.is_bool():
            raise TypeRuleError(f"'!' needs a bool, not {a.type}", "compare with '== 0' instead", 0)
        return Unary("!", a, BOOL)
    if op == "~":
        if a.type.is_float():
            raise TypeRuleError(f"'~' needs an integer, not {a.type}", None, 0)
        if is_literal(a):
            return Const(I32, ~int(a.value), literal=True)
        return Unary("~", a, a.type)
    if op == "-":
        if isinstance(a, Const) and not a.type.is_bool():
            if a.literal:
                return Const(I32, int(np.int32(-(int(a.value))) if -(int(a.value)) < 2**31 else -(2**31)), literal=True)
            if a.type.is_float():
                return Const(a.type, -a.value)
        if a.type.is_bool():
            raise TypeRuleError("cannot negate a bool", "use '!' for logical not", 0)
        return Unary("-", a, a.type)
    raise TypeRuleError(f"unknown operator {op}")


def select(c: Expr, t: Expr, f: Expr) -> Expr:
    if is_error(c, t, f):
        return poison()
    if not c.type.is_bool():
        raise TypeRuleError(f"the condition of select must be bool, not {c.type}",
                            "compare with '!= 0' to get a bool", 0)
    if is_literal(t) and not is_literal(f):
        t = coerce_literal(t, f.type, 1)
    elif is_literal(f) and not is_literal(t):
        f = coerce_literal(f, t.type, 2)
    elif is_literal(t) and is_literal(f):
        t, f = Const(I32, t.value), Const(I32, f.value)
    if t.type != f.type:
        raise TypeRuleError(f"the values of select have different types, {t.type} and {f.type}",
                            f"cast one of them explicitly, e.g. {t.type}(...)", 2)
    return Select(c, t, f, t.type)


def _float_type(e: Expr) -> Type:
    return e.type if e.type.is_float() else F32


def _to_float(e: Expr) -> Expr:
    return e if e.type.is_float() and not is_literal(e) else cast(_float_type(e), e)


def intrinsic(name: str, args: list[Expr]) -> Expr:
    """Math and other built-ins with Halide's argument rules."""
    if is_error(*args):
        return poison()
    if name in ("sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan",
                "sinh", "cosh", "tanh"):
        a = _to_float(args[0])
        return Intrinsic(name, (a,), a.type)
    if name in ("floor", "ceil", "round", "trunc"):
        a = _to_float(args[0])
        return Intrinsic(name, (a,), a.type)
    if name in ("pow", "atan2"):
        a, b = args
        if name == "pow" and is_literal(b) and not a.type.is_float() and not is_literal(a):
            n = int(b.value)
            return integer_power(a, n)
        # Halide: the first argument's float type decides (f64, f16, else
        # f32) and the second is cast to it, even when it is wider
        a = _to_float(a)
        b = cast(a.type, b)
        return Intrinsic(name, (a, b), a.type)
    if name in ("is_nan", "is_inf", "is_finite"):
        a = args[0]
        if not a.type.is_float():
            raise TypeRuleError(f"{name} needs a float argument, not {a.type}", None, 0)
        return Intrinsic(name, (a,), BOOL)
    if name == "abs":
        a = args[0]
        if is_literal(a):
            return Const(I32, abs(int(a.value)), literal=True)
        t = Type("uint", a.type.bits) if a.type.is_int() else a.type
        return Intrinsic("abs", (a,), t)
    if name == "absd":
        a, b = match_types(args[0], args[1])
        t = Type("uint", a.type.bits) if a.type.is_int() else a.type
        return Intrinsic("absd", (a, b), t)
    if name in ("min", "max"):
        return binop(name, args[0], args[1])
    if name == "clamp":
        a, lo, hi = args
        if is_literal(a):
            a = Const(I32, a.value)
        lo = coerce_literal(lo, a.type, 1) if is_literal(lo) else lo
        hi = coerce_literal(hi, a.type, 2) if is_literal(hi) else hi
        bounds = []
        for i, e in ((1, lo), (2, hi)):
            # Halide: lossless_cast(a.type, bound) must succeed
            converted = lossless_cast(a.type, e)
            if converted is None:
                raise TypeRuleError(f"clamp's bounds must have the type of its first argument ({a.type}), "
                                    f"not {e.type}", f"write {a.type}(...) around the bound", i)
            bounds.append(converted)
        lo, hi = bounds
        # Halide's order: max(min(a, hi), lo), so lo wins when lo > hi
        return BinOp("max", BinOp("min", a, hi, a.type), lo, a.type)
    if name == "lerp":
        z, o, w = args
        # Halide: an int literal end takes the other end's type, otherwise the
        # two ends must already have the same type (no match_types)
        if is_literal(z) and not is_literal(o):
            z = coerce_literal(z, o.type, 0)
        elif is_literal(o) and not is_literal(z):
            o = coerce_literal(o, z.type, 1)
        elif not is_literal(z) and z.type != o.type:
            raise TypeRuleError(f"lerp's ends have different types, {z.type} and {o.type}",
                                f"cast one of them explicitly, e.g. {z.type}(...)", 1)
        if is_literal(z):
            z, o = Const(I32, z.value), Const(I32, o.value)
        if is_literal(w):
            w = Const(F32, float(w.value))
        if not (w.type.is_float() or w.type.is_uint()):
            raise TypeRuleError(f"lerp's weight must be float or unsigned, not {w.type}", None, 2)
        if z.type.bits == 64 and not z.type.is_float():
            raise TypeRuleError("lerp of 64-bit integers is not supported", None, 0)
        if z.type.is_float() and w.type.is_float() and w.type != z.type:
            w = cast(z.type, w)
        return Intrinsic("lerp", (z, o, w), z.type)
    raise TypeRuleError(f"unknown built-in {name}")


def can_represent(t: Type, o: Type) -> bool:
    """Halide's Type::can_represent(Type): every value of o is a value of t."""
    if t == o:
        return True
    o_uint = o.is_uint() or o.is_bool()
    if t.is_int():
        return (o.is_int() and o.bits <= t.bits) or (o_uint and o.bits < t.bits)
    if t.is_uint():
        return o_uint and o.bits <= t.bits
    if t.is_float():
        return (o.is_float() and o.bits <= t.bits) or (not o.is_float() and (
            (t.bits == 64 and o.bits <= 32) or (t.bits == 32 and o.bits <= 16) or (t.bits == 16 and o.bits <= 8)))
    return False


def lossless_cast(t: Type, e: Expr) -> Expr | None:
    """Halide's lossless_cast for the cases decidable from types and constants
    (Halide also tries bounds analysis, which hdsl does not): `e` as a `t`, or
    None when some value of `e` may not survive the conversion."""
    if e.type == t:
        return e
    if can_represent(t, e.type):
        return cast(t, e)
    if isinstance(e, Const) and not e.type.is_error():
        if convert_scalar(e.type, convert_scalar(t, e.value)) == e.value:
            return Const(t, convert_scalar(t, e.value))
        return None
    if isinstance(e, Cast) and not e.saturate and can_represent(e.type, e.value.type):
        return lossless_cast(t, e.value)
    return None


def integer_power(a: Expr, n: int) -> Expr:
    """pow(int, literal n): Halide expands it into multiplications."""
    if n < 0:
        return binop("/", coerce_literal(Const(I32, 1, True), a.type), integer_power(a, -n))
    if n == 0:
        return Const(a.type, 1)
    result, base = None, a
    while n:
        if n & 1:
            result = base if result is None else BinOp("*", result, base, a.type)
        n >>= 1
        if n:
            base = BinOp("*", base, base, a.type)
    return result


def saturating_cast(t: Type, e: Expr) -> Expr:
    if is_error(e):
        return poison()
    if is_literal(e):
        e = Const(I32, e.value)
    if e.type == t:
        return e
    return Cast(t, e, saturate=True)


def float_literal(v: float, text: str) -> Const:
    return Const(F32, _nearest_f32(v, text))


def _nearest_f32(v: float, text: str) -> float:
    """The f32 nearest to the literal's exact decimal value (ties to even), as a C compiler
    reads `1.00000005960464477539062500000001f`. Rounding the text to f64 first and then to
    f32 is wrong when the f64 lands exactly halfway between two f32s."""
    f = np.float32(v)
    try:
        exact = Fraction(text.rstrip("fF"))
    except ValueError:
        return float(f)
    if not np.isfinite(f) or Fraction(float(f)) == exact:
        return float(f)
    with np.errstate(over="ignore"):
        candidates = [c for c in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf)))
                      if np.isfinite(c)]
    def key(c):
        mantissa_odd = int(np.array(c, dtype=np.float32).view(np.uint32)) & 1
        return (abs(Fraction(float(c)) - exact), mantissa_odd)
    return float(min(candidates, key=key))


def fold_const_int(e: Expr) -> int | None:
    """The value of an integer expression made of constants (exact: no wrap-around), or None.
    (A literal of 2^31 or more is an i64 Const, and arithmetic on those is not folded as built.)"""
    if isinstance(e, Const) and (e.type.is_int() or e.type.is_uint()):
        return int(e.value)
    if isinstance(e, Unary) and e.op == "-":
        a = fold_const_int(e.a)
        return None if a is None else -a
    if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
        a, b = fold_const_int(e.a), fold_const_int(e.b)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b
    return None


def is_const_int(e: Expr) -> int | None:
    if isinstance(e, Const) and (e.type.is_int() or e.type.is_uint()):
        return int(e.value)
    return None

