"""The IR rewrites for GLSL (hdsl/lower/glsl_rewrites.py) keep hdsl's meaning: every rewritten
operator evaluated with its rewritten form equals hdsl/interp/scalar.py on values chosen to hit
the edges (zero and -1 divisors, the minimum divided by -1, shifts by negative amounts and by
the width or more, casts of NaN, infinities and values just out of range)."""
import itertools

import numpy as np
import pytest

from hdsl.ir.expr import BinOp, Cast, Intrinsic, Var, walk
from hdsl.ir.types import BY_NAME, F32
from hdsl.lower.glsl_rewrites import GLSL_INTRINSICS, rewrite_expr

from tests.opengl.ir_eval import evaluate

INTS = ["i8", "i16", "i32", "u8", "u16", "u32"]
RNG = np.random.default_rng(16)


def values(t, n=400):
    """Random values of t with its edges."""
    if t.is_float():
        special = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 0.999, 2.5, -2.5, np.nan, np.inf, -np.inf,
                   127.5, 128.0, 255.0, 255.9, 256.0, -128.0, -129.0, 32767.9, 65535.5, 65536.0,
                   2.0 ** 31, -(2.0 ** 31), 2.0 ** 31 - 128, 2.0 ** 32, 2.0 ** 32 - 256, -(2.0 ** 31) - 256, 1e30]
        rand = RNG.normal(0, 1, n) * RNG.choice([1, 100, 1e5, 1e10], n)
        return np.concatenate([special, rand]).astype(np.float32)
    lo, hi = t.min_value(), t.max_value()
    special = [lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, 7, 8] + ([-1, -2, -3, -7, -8] if t.is_int() else [])
    rand = RNG.integers(lo, hi, n, endpoint=True, dtype=np.int64)
    small = RNG.integers(max(lo, -40), min(hi, 40), n, endpoint=True, dtype=np.int64)
    return np.concatenate([special, rand, small]).astype(t.dtype)


def pairs(ta, tb):
    a, b = values(ta), values(tb)
    i, j = np.meshgrid(np.arange(len(a)), np.arange(len(b)))
    pick = RNG.choice(i.size, min(i.size, 20000), replace=False)
    return a[i.reshape(-1)[pick]], b[j.reshape(-1)[pick]]


def check(orig, rewritten, env):
    n = len(next(iter(env.values())))
    want = evaluate(orig, env)
    got = evaluate(rewritten, env, np.ones(n, bool))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # nothing GLSL lacks is left
    for n in walk(rewritten):
        if isinstance(n, BinOp):
            assert not (n.op in ("/", "%", "<<", ">>") and n.a.type.is_integral())
        if isinstance(n, Cast):
            assert not n.saturate
            assert not (n.value.type.is_float() and n.type.is_integral() and not n.type.is_bool()) or \
                isinstance(n.value, Intrinsic) and n.value.name == "trunc"


@pytest.mark.parametrize("op", ["/", "%"])
@pytest.mark.parametrize("tn", INTS)
def test_euclidean_div_mod(op, tn):
    t = BY_NAME[tn]
    a, b = pairs(t, t)
    e = BinOp(op, Var("a", t), Var("b", t), t)
    check(e, rewrite_expr(e), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["/", "%"])
@pytest.mark.parametrize("tn,divisor", [(tn, d) for tn in INTS for d in [1, 2, 3, 4, 7, 8, 16, -1, -3, -4, 0]
                                        if BY_NAME[tn].can_represent(d)])
def test_euclidean_div_mod_by_constants(op, tn, divisor):
    """Constant divisors take the shorter paths (powers of two as shifts and masks)."""
    from hdsl.ir.expr import Const
    t = BY_NAME[tn]
    e = BinOp(op, Var("a", t), Const(t, divisor), t)
    check(e, rewrite_expr(e), {"a": values(t)})


@pytest.mark.parametrize("op", ["<<", ">>"])
@pytest.mark.parametrize("tn,bn", [(a, b) for a in INTS for b in INTS
                                   if BY_NAME[a].bits >= BY_NAME[b].bits])
def test_shifts(op, tn, bn):
    """The amount's type has the value's width at most (hdsl.ir.ops widens the value to it)."""
    t, bt = BY_NAME[tn], BY_NAME[bn]
    bt = bt.with_bits(t.bits)
    a, b = values(t), values(bt)
    b = np.concatenate([b, np.arange(-40, 41).astype(bt.dtype) if bt.is_int() else np.arange(0, 41).astype(bt.dtype)])
    a, b = pairs_from(a, b)
    e = BinOp(op, Var("a", t), Var("b", bt), t)
    check(e, rewrite_expr(e), {"a": a, "b": b})


def pairs_from(a, b):
    i, j = np.meshgrid(np.arange(len(a)), np.arange(len(b)))
    pick = RNG.choice(i.size, min(i.size, 20000), replace=False)
    return a[i.reshape(-1)[pick]], b[j.reshape(-1)[pick]]


def _amount_type(tn: str, amount: int):
    t = BY_NAME[tn]
    return t if amount >= 0 else BY_NAME[f"i{t.bits}"]     # a negative amount of a signed type


@pytest.mark.parametrize("op", ["<<", ">>"])
@pytest.mark.parametrize("tn,amount", [(tn, a) for tn in INTS for a in [0, 1, 3, 7, 8, 15, 16, 31, -1, -3, -8, -31]
                                       if _amount_type(tn, a).can_represent(a)])
def test_shifts_by_constants(op, tn, amount):
    from hdsl.ir.expr import Const
    t = BY_NAME[tn]
    bt = _amount_type(tn, amount)
    e = BinOp(op, Var("a", t), Const(bt, amount), t)
    check(e, rewrite_expr(e), {"a": values(t)})


@pytest.mark.parametrize("src,dst", list(itertools.product(INTS + ["bool", "f32"], INTS + ["bool", "f32"])))
@pytest.mark.parametrize("saturate", [False, True])
def test_casts(src, dst, saturate):
    s, t = BY_NAME[src], BY_NAME[dst]
    v = values(s) if not s.is_bool() else np.array([False, True])
    e = Cast(t, Var("v", s), saturate)
    check(e, rewrite_expr(e), {"v": v})
