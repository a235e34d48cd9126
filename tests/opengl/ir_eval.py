"""A NumPy evaluator of IR expressions for the OpenGL tests: hdsl/interp/scalar.py for every
operator, plus the GLSL rewrites' own intrinsics with their C meaning (written here, from the
C standard's definitions, not from the code under test)."""
import numpy as np

from hdsl.interp.scalar import binop_values, cast_values, intrinsic_values, unary_values
from hdsl.ir.expr import BinOp, Cast, Const, Intrinsic, Select, Unary, Var


def c_div_mod(a, b, t):
    """C99 6.5.5: the quotient truncated toward zero, a == (a / b) * b + a % b."""
    aw, bw = a.astype(np.int64), b.astype(np.int64)
    assert not np.any(bw == 0)
    q = np.abs(aw) // np.abs(bw) * np.sign(aw) * np.sign(bw)
    return q.astype(t.dtype), (aw - q * bw).astype(t.dtype)


def evaluate(e, env, live=None):
    """e's values; `live` marks the elements whose value is used (a select's untaken side is
    evaluated too, as GLSL does, but the restricted domains of the GLSL-only operations are
    checked only where the value is taken; live=None: hdsl's own IR, nothing to check)."""
    t = e.type
    if isinstance(e, Const):
        return np.array(e.value).astype(t.dtype)
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Cast):
        v = evaluate(e.value, env, live)
        if live is not None and e.value.type.is_float() and t.is_integral() and not t.is_bool() and not e.saturate:
            # GLSL's int()/uint() are defined only in range: the rewrite must guarantee it
            lo, hi = float(t.min_value()), float(t.max_value())
            bad = live & ~((v >= lo) & (v <= hi) & (np.trunc(v) == v))
            assert not np.any(bad), f"{t}({v[np.broadcast_to(bad, np.shape(v))][:5]}) taken out of range"
        return cast_values(t, v, e.value.type, e.saturate)
    if isinstance(e, BinOp):
        return binop_values(e.op, evaluate(e.a, env, live), evaluate(e.b, env, live), e.a.type)
    if isinstance(e, Unary):
        return unary_values(e.op, evaluate(e.a, env, live), t)
    if isinstance(e, Select):
        c = evaluate(e.cond, env, live)
        lt, lf = (None, None) if live is None else (live & c, live & ~c)
        return np.where(c, evaluate(e.t, env, lt), evaluate(e.f, env, lf)).astype(t.dtype)
    if isinstance(e, Intrinsic):
        args = [evaluate(x, env, live) for x in e.args]
        if e.name in ("glsl_tdiv", "glsl_tmod"):
            a, b = np.broadcast_arrays(*args)
            # (only where the rewrite's select takes this value: elsewhere the divisor may be 0)
            ok = b != 0
            # (checked taken or not: both sides of a select are computed, and these trap on a CPU)
            assert live is None or np.all(ok), "a division by zero"
            if live is not None and t.is_int():
                assert not np.any((a == t.min_value()) & (b == -1)), "min / -1"
            q, r = c_div_mod(np.where(ok, a, 0), np.where(ok, b, 1), t)
            return q if e.name == "glsl_tdiv" else r
        if e.name in ("glsl_shl", "glsl_shr"):
            a, n = np.broadcast_arrays(*args)
            n64 = n.astype(np.int64)
            ok = (n64 >= 0) & (n64 < t.bits)
            assert live is None or not np.any(live & ~ok), f"a shift by {n64[np.broadcast_to(live & ~ok, n64.shape)][:5]} taken"
            n64 = np.where(ok, n64, 0)
            if e.name == "glsl_shl":
                return (a.astype(np.int64).astype(np.uint64) << n64.astype(np.uint64)).astype(t.dtype)
            return (a.astype(np.int64) >> n64).astype(t.dtype)
        return intrinsic_values(e.name, args, [x.type for x in e.args], t)
    raise TypeError(type(e).__name__)
