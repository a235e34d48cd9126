"""GLSL code generation and the OpenGL runtime on hand-built kernels (the GPU contract's
shapes), run on the machine's OpenGL (Mesa's llvmpipe in CI) and compared with
hdsl/interp/scalar.py: integer operators exactly (Euclidean division with negative operands and
zero divisors, wrapping 8/16-bit arithmetic, shifts by any amount, saturating casts), float
+ - * / sqrt floor/ceil/trunc/round min/max and casts exactly, the library functions within
the ulps measured on llvmpipe (issue 16's facts: exp differs by at most 4 ulp, sin by 1)."""
import itertools

import numpy as np
import pytest

from hdsl.ir import ops
from hdsl.ir.expr import BinOp, Cast, Const, Intrinsic, Select, Unary, Var
from hdsl.ir.types import BOOL, BY_NAME, F32, I32

from tests.opengl.kernels import run_and_expect
from tests.opengl.test_glsl_rewrites import values

INTS = ["i8", "i16", "i32", "u8", "u16", "u32"]
N = 4096
RNG = np.random.default_rng(1616)


def sample(t, n=N):
    v = values(t, n)
    if len(v) >= n:
        return v[:n]
    return np.concatenate([v, RNG.choice(v, n - len(v))]).astype(v.dtype)


def assert_all_equal(results):
    bad = []
    for e, got, want in results:
        if got.dtype.kind == "f":
            same = (got == want) | (np.isnan(got) & np.isnan(want))
        else:
            same = got == want
        if not np.all(same):
            i = int(np.argmin(same))
            bad.append(f"{e}: element {i}: got {got[i]!r}, want {want[i]!r} ({int((~same).sum())} differ)")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("tn", INTS)
def test_integer_operators(gl, tn):
    t = BY_NAME[tn]
    a, b = sample(t), sample(t)
    b = RNG.permutation(b)
    b[:64] = np.array([0, 1, 2, 3] * 16, t.dtype)                  # zero and small divisors
    if t.is_int():
        b[64:128] = np.array([-1, -2, -3, -7] * 16).astype(t.dtype)
        a[64:80] = t.min_value()                                  # the minimum over -1
    A, B = Var("a", t), Var("b", t)
    exprs = [BinOp(o, A, B, t) for o in ("+", "-", "*", "/", "%", "min", "max", "&", "|", "^")]
    exprs += [BinOp(o, A, B, BOOL) for o in ("==", "!=", "<", "<=", ">", ">=")]
    exprs += [ops.binop("<<", A, B), ops.binop(">>", A, B), Unary("~", A, t), Unary("-", A, t)]
    exprs += [BinOp(o, A, Const(t, c), t) for o in ("/", "%") for c in (1, 2, 3, 8, 10, 16)]
    unsigned = BY_NAME[f"u{t.bits}"]          # abs and absd of an integer type: the unsigned one (Halide)
    exprs += [Select(BinOp("<", A, B, BOOL), A, B, t), Intrinsic("abs", (A,), unsigned),
              Intrinsic("absd", (A, B), unsigned)]
    # results used inside the kernel after they wrapped (a store would hide a missing wrap:
    # the host keeps the low bits of each word)
    s, p = BinOp("+", A, B, t), BinOp("*", A, B, t)
    exprs += [BinOp("<", s, A, BOOL), BinOp("/", p, Const(t, 3), t), ops.binop(">>", BinOp("-", A, B, t), Const(t, 2)),
              Cast(I32, s), Cast(F32, p), BinOp("==", Unary("-", A, t), A, BOOL), BinOp(">", Unary("~", A, t), B, BOOL),
              BinOp("max", ops.binop("<<", A, Const(t, 3)), B, t)]
    assert_all_equal(run_and_expect(exprs, {"a": a, "b": b}, {"a": t, "b": t}, f"ints_{tn}"))


@pytest.mark.parametrize("tn", INTS)
def test_shift_amounts_of_every_sign(gl, tn):
    """Shifts by negative amounts, by the width and beyond (hdsl.interp.scalar._shift)."""
    t = BY_NAME[tn]
    a = sample(t)
    amount_t = BY_NAME[f"i{t.bits}"]
    amounts = np.resize(np.arange(-40, 41), N).astype(amount_t.dtype)
    A, S = Var("a", t), Var("s", amount_t)
    exprs = [BinOp("<<", A, S, t), BinOp(">>", A, S, t)]
    assert_all_equal(run_and_expect(exprs, {"a": a, "s": amounts}, {"a": t, "s": amount_t}, f"shifts_{tn}"))


@pytest.mark.parametrize("src", INTS + ["bool", "f32"])
def test_casts(gl, src):
    """To every type, wrapping and saturating: f32 -> int of NaN, infinities and the range ends."""
    s = BY_NAME[src]
    v = sample(s) if not s.is_bool() else np.resize(np.array([False, True]), N)
    V = Var("v", s)
    exprs = [Cast(BY_NAME[d], V, sat) for d in INTS + ["bool", "f32"] if d != src for sat in (False, True)]
    assert_all_equal(run_and_expect(exprs, {"v": v}, {"v": s}, f"casts_{src}"))


def _floats(n=N):
    v = np.concatenate([values(F32, n), RNG.uniform(-1000, 1000, n)]).astype(np.float32)[:n]
    # llvmpipe flushes subnormals to zero (issue 16): keep them out of the exact comparisons
    return np.where(np.abs(v) < np.finfo(np.float32).tiny, np.float32(0), v)


def test_float_operators_exact(gl):
    a, b = _floats(), RNG.permutation(_floats())
    b[:16] = 0
    A, B = Var("a", F32), Var("b", F32)
    exprs = [BinOp(o, A, B, F32) for o in ("+", "-", "*", "/", "%", "min", "max")]
    exprs += [BinOp(o, A, B, BOOL) for o in ("==", "!=", "<", "<=", ">", ">=")]
    exprs += [Intrinsic(f, (A,), F32) for f in ("floor", "ceil", "trunc", "round")]
    exprs += [Intrinsic("sqrt", (Intrinsic("abs", (A,), F32),), F32)]
    exprs += [Intrinsic(f, (A,), BOOL) for f in ("is_nan", "is_inf", "is_finite")]
    exprs += [Unary("-", A, F32), BinOp("+", BinOp("*", A, B, F32), A, F32),
              BinOp("-", A, BinOp("*", B, A, F32), F32)]       # a*b+a not fused into an fma
    results = run_and_expect(exprs, {"a": a, "b": b}, {"a": F32, "b": F32}, "floats")
    # (a result that is subnormal is flushed to zero by llvmpipe: compared as zero)
    tiny = np.finfo(np.float32).tiny
    results = [(e, g, np.where(np.abs(w) < tiny, np.float32(0), w) if w.dtype.kind == "f" else w)
               for e, g, w in results]
    assert_all_equal(results)


def ulps(got, want):
    g = got.astype(np.float32).view(np.int32).astype(np.int64)
    w = want.astype(np.float32).view(np.int32).astype(np.int64)
    g = np.where(g < 0, -(g & 0x7FFFFFFF), g)
    w = np.where(w < 0, -(w & 0x7FFFFFFF), w)
    return np.abs(g - w)


@pytest.mark.parametrize("fn,lo,hi,max_ulps", [
    ("exp", -87.0, 88.0, 4), ("sin", -1e4, 1e4, 1), ("cos", -1e4, 1e4, 1), ("log", 1e-30, 1e30, 1),
    ("tan", -1.5, 1.5, 2),
    # GLSL's own atan and pow on llvmpipe are far less precise (docs/opengl.md): bounds as measured
    # (pow's error grows with |y * log2(x)|: 35 ulp at most measured here, where that is up to 33)
    ("atan", -100.0, 100.0, 300), ("pow", 0.01, 10.0, 48)])
def test_library_functions_within_ulps(gl, fn, lo, hi, max_ulps):
    """Within the ulps measured on llvmpipe of NumPy's correctly rounded float32 results
    (issue 16 measured GLSL's exp at up to 4 ulp near 0; its error grows with |x|, to 60 ulp near
    88, so hdsl's exp reduces the argument first and stays within 4 ulp everywhere). pow(a, a)."""
    a = RNG.uniform(lo, hi, N).astype(np.float32)
    args = (Var("a", F32),) * (2 if fn == "pow" else 1)
    (e, got, want), = run_and_expect([Intrinsic(fn, args, F32)], {"a": a}, {"a": F32}, fn)
    assert ulps(got, want).max() <= max_ulps


def test_exp_at_the_ends(gl):
    """Overflow to inf, underflow to 0, and inf, -inf, NaN through (NumPy's float32 exp)."""
    a = np.resize(np.array([89.0, 100.0, -104.0, -200.0, np.inf, -np.inf, np.nan, 0.0, 88.7, -87.3],
                           np.float32), 64)
    (e, got, want), = run_and_expect([Intrinsic("exp", (Var("a", F32),), F32)], {"a": a}, {"a": F32}, "exp_ends")
    finite = np.isfinite(want) & (want != 0)
    assert_all_equal([(e, got[~finite], want[~finite])])
    assert ulps(got[finite], want[finite]).max() <= 4
