"""Element-wise semantics of every operator, on NumPy arrays of one dtype.

These functions are the definition the back ends are tested against; each
follows Halide (see the table in hdsl/ir/expr.py).
"""
from __future__ import annotations

import numpy as np

from hdsl.ir.types import Type


def _int_div_mod(a: np.ndarray, b: np.ndarray, t: Type):
    """Euclidean division and modulus; x / 0 == x % 0 == 0."""
    zero = b == 0
    safe_b = np.where(zero, np.ones_like(b), b)
    if t.is_uint() or t.is_bool():
        q = a // safe_b
        r = a % safe_b
    else:
        # floor division in a wide type, then fix up for negative divisors
        wide = np.int64
        aw, bw = a.astype(wide), safe_b.astype(wide)
        q = np.floor_divide(aw, bw)
        r = aw - q * bw
        neg = r < 0
        q = np.where(neg, q + 1, q)
        r = np.where(neg, r - bw, r)
        q, r = q.astype(t.dtype), r.astype(t.dtype)
    return np.where(zero, np.zeros_like(q), q), np.where(zero, np.zeros_like(r), r)


def _shift(op: str, a: np.ndarray, b: np.ndarray, t: Type) -> np.ndarray:
    bits = t.bits
    amount = b.astype(np.int64)
    if op == ">>":
        amount = -amount
    # now a positive amount shifts left
    left = np.clip(amount, 0, 63).astype(np.uint64)
    right = np.clip(-amount, 0, 63).astype(np.uint64)
    if t.is_int():
        wide = a.astype(np.int64)
        shifted_left = (wide.astype(np.uint64) << left).astype(np.int64)
        shifted_right = wide >> np.minimum(right, bits - 1).astype(np.int64)
    else:
        wide = a.astype(np.uint64)
        shifted_left = wide << left
        shifted_right = np.where(right >= bits, np.uint64(0), wide >> right)
        shifted_left = np.where(left >= 64, np.uint64(0), shifted_left)
    out = np.where(amount >= 0, shifted_left, shifted_right)
    return out.astype(t.dtype)


def binop_values(op: str, a, b, t: Type):
    """`a op b` where both have type `t` (the operands' type, not the result's)."""
    a = np.asarray(a)
    b = np.asarray(b)
    with np.errstate(all="ignore"):
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            if t.is_bool():
                return a & b
            return a * b
        if op in ("/", "%"):
            if t.is_float():
                if op == "/":
                    return a / b
                return (a - b * np.floor(a / b)).astype(t.dtype)
            q, r = _int_div_mod(a, b, t)
            return q if op == "/" else r
        # Halide's codegen: min(a, b) = select(a < b, a, b), max with '>'
        # (CodeGen_LLVM::visit(Min/Max)); so a NaN operand yields b, and
        # min(-0.0, 0.0) is 0.0.  np.minimum would propagate the NaN.
        if op == "min":
            return np.where(a < b, a, b)
        if op == "max":
            return np.where(a > b, a, b)
        if op == "==":
            return a == b
        if op == "!=":
            return a != b
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        if op == ">=":
            return a >= b
        if op == "&&":
            return np.logical_and(a, b)
        if op == "||":
            return np.logical_or(a, b)
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        if op in ("<<", ">>"):
            return _shift(op, a, b, t)
    raise ValueError(op)


def cast_values(t: Type, v: np.ndarray, src: Type, saturate: bool = False) -> np.ndarray:
    v = np.asarray(v)
    with np.errstate(all="ignore"):
        if saturate:
            v = _saturate(t, v, src)
            if src.is_float() and not t.is_float():
                return v.astype(t.dtype)      # already clamped and truncated
        if t.is_bool():
            return v != 0
        if src.is_float() and not t.is_float():
            # truncation toward zero; out-of-range values are undefined in Halide
            # and become the type's minimum here (what x86's cvtt* gives for i32)
            tv = np.trunc(v.astype(np.float64))
            lo = float(t.min_value())
            hi = 2.0 ** (t.bits if t.is_uint() else t.bits - 1)
            ok = np.isfinite(tv) & (tv >= lo) & (tv < hi)
            tv = np.where(ok, tv, lo)
            return tv.astype(np.uint64 if t.is_uint() and t.bits == 64 else np.int64).astype(t.dtype)
        return v.astype(t.dtype)


def _saturate(t: Type, v: np.ndarray, src: Type) -> np.ndarray:
    """Clamp v into t's range, in a type where the comparison is exact."""
    if t.is_float():
        # Halide clamps to t.min() .. t.max(), which for floats are -inf .. inf:
        # a finite value too large for t still becomes inf (Halide's
        # lower_saturating_cast); only the ordinary cast below applies.
        return v
    lo, hi = t.min_value(), t.max_value()
    if t.is_bool():
        lo, hi = 0, 1
    if src.is_float():
        w = v.astype(np.float64)
        w = np.where(np.isnan(w), 0.0, w)
        # compare in float64, then replace the ends by the exact integer limits
        over = w >= float(hi)
        under = w <= float(lo)
        tv = np.trunc(np.clip(w, float(lo), float(hi)))
        out = np.where(over | under, 0, tv)
        if t.is_int() or t.bits < 64:
            res = out.astype(np.int64)
        else:
            res = out.astype(np.uint64)
        res = res.astype(t.dtype)
        res = np.where(over, np.array(hi).astype(t.dtype), res)
        res = np.where(under, np.array(lo).astype(t.dtype), res)
        return res
    # integer → integer
    if src.is_uint() or src.is_bool():
        w = v.astype(np.uint64)
        hi_u = np.uint64(max(hi, 0))
        return np.minimum(w, hi_u)
    w = v.astype(np.int64)
    lo_i = max(lo, -(2 ** 63))
    hi_i = min(hi, 2 ** 63 - 1)
    return np.clip(w, lo_i, hi_i)


def unary_values(op: str, a: np.ndarray, t: Type) -> np.ndarray:
    with np.errstate(all="ignore"):
        if op == "-":
            if t.is_float():
                # Halide's -x is Sub(0, x) (IROperator.cpp operator-): so
                # -(0.0) and -(-0.0) are both +0.0, not a sign flip
                return (np.zeros_like(a) - a).astype(t.dtype)
            return (np.zeros_like(a) - a).astype(t.dtype)
        if op == "!":
            return np.logical_not(a)
        if op == "~":
            return ~a
    raise ValueError(op)


def _lerp(z: np.ndarray, o: np.ndarray, w: np.ndarray, t: Type, wt: Type) -> np.ndarray:
    """Halide's lerp: exact rounding rules for integer types (Lerp.cpp)."""
    if t.is_float():
        if wt.is_float():
            w = w.astype(t.dtype)
        else:
            w = (w.astype(np.float64) / float(2 ** wt.bits - 1)).astype(t.dtype)
        return (z * (np.array(1, t.dtype) - w) + o * w).astype(t.dtype)
    bits = t.bits
    if t.is_bool():
        half = 0.5 if wt.is_float() else wt.max_value() // 2
        return np.where(w > half, o, z)
    comp = np.dtype(f"uint{bits}")
    bias = 0
    if t.is_int():
        bias = -(1 << (bits - 1))
        z = (z.astype(np.int64) - bias).astype(comp)
        o = (o.astype(np.int64) - bias).astype(comp)
    maxc = (1 << bits) - 1
    if wt.is_float():
        if bits == 32:
            tw = np.trunc(65535.0 * 65537.0 * w.astype(np.float64))
        else:
            tw = np.trunc(np.float32(maxc) * w.astype(np.float32))
        tw = tw.astype(np.int64).astype(comp).astype(np.uint64)
    else:
        wb = wt.bits
        wv = w.astype(np.uint64)
        if wb == bits:
            tw = wv
        else:
            diff = wb - bits
            left, shift, scale = abs(diff), min(bits, wb), 1
            while left:
                scale = scale + (scale << shift)
                left -= shift
                shift *= 2
            if diff < 0:
                tw = (wv * np.uint64(scale)) & np.uint64(maxc)
            else:
                tw = wv // np.uint64(scale)
    inv = np.uint64(maxc) - tw
    zu, ou = z.astype(np.uint64), o.astype(np.uint64)
    with np.errstate(all="ignore"):
        rounding = np.uint64(1 << (bits - 1))
        divisor = np.uint64(1 << bits)
        prod = zu * inv + ou * tw + rounding        # fits: 2 * bits <= 64
        divided = (prod // divisor + prod) // divisor
    res = divided.astype(comp)
    if t.is_int():
        res = (res.astype(np.int64) + bias).astype(t.dtype)
    return res


def intrinsic_values(name: str, args: list[np.ndarray], arg_types: list[Type], t: Type) -> np.ndarray:
    with np.errstate(all="ignore"):
        if name in ("sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan",
                    "sinh", "cosh", "tanh", "floor", "ceil", "trunc"):
            fn = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan}.get(name) or getattr(np, name)
            return fn(args[0]).astype(t.dtype)
        if name == "round":
            return np.round(args[0]).astype(t.dtype)      # half to even, as Halide
        if name == "pow":
            return np.power(args[0], args[1]).astype(t.dtype)
        if name == "atan2":
            return np.arctan2(args[0], args[1]).astype(t.dtype)
        if name == "is_nan":
            return np.isnan(args[0])
        if name == "is_inf":
            return np.isinf(args[0])
        if name == "is_finite":
            return np.isfinite(args[0])
        if name == "abs":
            a = args[0]
            if arg_types[0].is_int():
                return np.abs(a.astype(np.int64)).astype(t.dtype) if arg_types[0].bits < 64 \
                    else np.where(a < 0, (~a.astype(np.uint64)) + np.uint64(1), a.astype(np.uint64))
            return np.abs(a).astype(t.dtype)
        if name == "absd":
            a, b = args
            at = arg_types[0]
            if at.is_float():
                return np.abs(a - b).astype(t.dtype)
            if at.bits < 64:
                return np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(t.dtype)
            big, small = np.maximum(a, b), np.minimum(a, b)
            return (big.astype(np.uint64) - small.astype(np.uint64)).astype(t.dtype)
        if name == "lerp":
            return _lerp(args[0], args[1], args[2], t, arg_types[2])
    raise ValueError(name)
