"""Bounds inference through float arithmetic (hdsl/lower/symbolic.py, _float_bounds and
_float_to_int): each rule's bounds, evaluated for sampled param values - NaN, infinities,
zeros of both signs, negative, tiny and huge ones among them - against brute-force evaluation
of the expression itself over every point of its vars' ranges, with the element-wise
semantics the evaluator is built on (hdsl/interp/scalar.py: hdsl's min(NaN, 1) = 1,
i32(NaN) = the type's minimum, IEEE f32 rounding).

The claims checked: a float expression's bounds, when both evaluate to finite numbers, hold
every value, and no value is NaN; an i32 conversion's bounds hold every converted value
whenever the run-time conditions it registers (those lower() checks before a pipeline runs)
are true."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hdsl.interp.scalar import binop_values, cast_values, intrinsic_values, unary_values
from hdsl.ir.expr import BinOp, Cast, Const, Expr, Intrinsic, Param, Select, Unary, Var
from hdsl.ir.types import BOOL, F32, F64, I32
from hdsl.lower.symbolic import expr_bounds, float_coordinate_checks

P, Q = Param("p", F32), Param("q", F32)
X = Var("x", I32)            # an integer var, ranged by the scope
U = Var("u", F32)            # a float about which nothing is known (NaN and infinities included)

PARAM_SAMPLES = [0.1, -0.1, 0.0, -0.0, math.nan, math.inf, -math.inf, 1e-12, -1e-12, 3.0, 0.7, 1e9, -2.5,
                 2.0 ** 30, 1.0 / 3.0]
U_SAMPLES = np.array([math.nan, math.inf, -math.inf, -1e30, -2.0, -0.5, -0.0, 0.0, 0.3, 0.5, 0.999, 1.0, 1.5,
                      7.25, 1e30], np.float32)
X_RANGE = (-5, 7)


def f(v):
    return Const(F32, float(v))


def ev(e: Expr, env: dict):
    """The value of e (an array over the samples) by hdsl's element-wise semantics."""
    if isinstance(e, Const):
        return np.asarray(e.value, dtype=e.type.dtype)
    if isinstance(e, (Var, Param)):
        return np.asarray(env[e.name], dtype=e.type.dtype)
    if isinstance(e, Cast):
        return cast_values(e.type, ev(e.value, env), e.value.type, e.saturate)
    if isinstance(e, Unary):
        return unary_values(e.op, ev(e.a, env), e.type)
    if isinstance(e, Select):
        return np.where(ev(e.cond, env), ev(e.t, env), ev(e.f, env)).astype(e.type.dtype)
    if isinstance(e, BinOp):
        if e.op in ("&&", "||"):
            a, b = ev(e.a, env).astype(bool), ev(e.b, env).astype(bool)
            return (a & b) if e.op == "&&" else (a | b)
        return binop_values(e.op, ev(e.a, env), ev(e.b, env), e.a.type)
    if isinstance(e, Intrinsic):
        return intrinsic_values(e.name, [ev(a, env) for a in e.args], [a.type for a in e.args], e.type)
    raise AssertionError(f"no evaluation for {e!r}")


def scope_for(e):
    s = {"x": (Const(I32, X_RANGE[0]), Const(I32, X_RANGE[1])), "u": (None, None)}
    return s


def samples(p, q):
    """Every x of its range against every u sample (a grid), with the params."""
    xs, us = np.meshgrid(np.arange(X_RANGE[0], X_RANGE[1] + 1, dtype=np.int32), U_SAMPLES)
    return {"x": xs.ravel(), "u": us.ravel(), "p": np.float32(p), "q": np.float32(q)}


def check_float(e):
    """The float claim: finite bounds hold every value, and no value is NaN."""
    lo, hi = expr_bounds(e, scope_for(e))
    assert lo is not None or hi is not None, "no bound found"
    held = 0
    for p in PARAM_SAMPLES:
        for q in (0.5, -3.0, math.nan):
            env = samples(p, q)
            v = ev(e, env).astype(np.float64)
            sides = [None if s is None else float(ev(s, env)) for s in (lo, hi)]
            if not all(s is None or math.isfinite(s) for s in sides):
                continue
            held += 1
            assert not np.isnan(v).any(), (p, q, sides)
            if sides[0] is not None:
                assert (v >= sides[0]).all(), (p, q, sides, v.min())
            if sides[1] is not None:
                assert (v <= sides[1]).all(), (p, q, sides, v.max())
    return held


def check_int(e, t=I32):
    """The conversion claim: under the registered conditions, the bounds hold every value."""
    c = Cast(t, e)
    with float_coordinate_checks() as conds:
        lo, hi = expr_bounds(c, scope_for(c))
    assert lo is not None and hi is not None, "no bound found"
    held = refused = 0
    for p in PARAM_SAMPLES:
        for q in (0.5, -3.0, math.nan):
            env = samples(p, q)
            v = ev(c, env).astype(np.int64)
            if not all(bool(ev(ok, env)) for ok, _ in conds):
                refused += 1
                continue
            held += 1
            blo, bhi = int(ev(lo, env)), int(ev(hi, env))
            assert (v >= blo).all() and (v <= bhi).all(), (p, q, blo, bhi, v.min(), v.max())
    return held, refused, conds


VAL = BinOp("max", BinOp("min", U, f(1.0), F32), f(0.0), F32)          # clamp(u, 0.0f, 1.0f)
XF = Cast(F32, X)
CASES = {
    "clamp_of_unknown": VAL,
    "bilateral_bin": BinOp("+", BinOp("*", VAL, BinOp("/", f(1.0), P, F32), F32), f(0.5), F32),
    "int_to_float_times_param": BinOp("*", XF, P, F32),
    "param_times_range": BinOp("*", P, BinOp("-", XF, Q, F32), F32),
    "range_times_range": BinOp("*", BinOp("+", XF, P, F32), BinOp("-", XF, f(2.5), F32), F32),
    "divide_by_param": BinOp("/", XF, P, F32),
    "divide_by_positive_range": BinOp("/", P, BinOp("+", XF, f(6.0), F32), F32),
    "divide_by_range_holding_zero": BinOp("/", P, XF, F32),
    "minus_and_sub": Unary("-", BinOp("-", XF, BinOp("*", VAL, P, F32), F32), F32),
    "min_max_params": BinOp("min", BinOp("max", XF, P, F32), Q, F32),
    "min_of_unknown_and_param": BinOp("min", U, P, F32),
    "select": Select(BinOp("<", X, Const(I32, 0), BOOL), BinOp("*", XF, P, F32), BinOp("+", VAL, Q, F32), F32),
    "floor": Intrinsic("floor", (BinOp("*", XF, P, F32),), F32),
    "through_f64": Cast(F32, BinOp("*", Cast(F64, XF), Cast(F64, P), F64)),
}


# a divisor whose range holds 0 (x in -5 .. 7): its bounds are NaN at run time, for every p
NEVER = {"divide_by_range_holding_zero"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_bounds_hold_every_value(name):
    held = check_float(CASES[name])
    if name in NEVER:
        assert held == 0
    else:
        assert held > 0, "the bounds were never finite: the rule was not exercised"


@pytest.mark.parametrize("name", sorted(set(CASES) - {"min_of_unknown_and_param", "clamp_of_unknown"}))
def test_i32_conversion_bounds_hold_under_their_checks(name):
    held, refused, conds = check_int(CASES[name])
    assert (held == 0) if name in NEVER else (held > 0)
    # a NaN or infinite p (or 0 where it divides) is refused, never bounded wrongly
    assert refused > 0 and conds


def test_bilateral_bin_bounds_are_tight_and_refuse_bad_r_sigma():
    """The example's bin, i32(clamp(v, 0, 1) * (1 / r_sigma) + 0.5f): 0 .. 10 at r_sigma = 0.1
    (Halide's app's range), -9 .. 0 at -0.1; r_sigma = 0, -0, NaN or 1e-12 is refused."""
    c = Cast(I32, CASES["bilateral_bin"])
    with float_coordinate_checks() as conds:
        lo, hi = expr_bounds(c, scope_for(c))
    for p, want in ((0.1, (0, 10)), (-0.1, (-9, 0)), (0.25, (0, 4)), (math.inf, (0, 0))):
        env = samples(p, 0.0)
        assert all(bool(ev(ok, env)) for ok, _ in conds)
        assert (int(ev(lo, env)), int(ev(hi, env))) == want
    for p in (0.0, -0.0, math.nan, 1e-12):
        assert not all(bool(ev(ok, samples(p, 0.0))) for ok, _ in conds), p


def test_without_the_collector_a_conversion_stays_unbounded():
    """Passes after the checks are written (partitioning, GPU limits) get no float bounds."""
    c = Cast(I32, CASES["bilateral_bin"])
    assert expr_bounds(c, scope_for(c)) == (None, None)


def test_unknown_values_stay_unbounded():
    c = Cast(I32, BinOp("*", U, P, F32))
    with float_coordinate_checks() as conds:
        assert expr_bounds(c, scope_for(c)) == (None, None)
    assert conds == []


# --- end to end: a scatter whose bin goes through float arithmetic -------------------------

SCATTER = """
pipeline fbins
input  img: f32[2]
param  scale: f32 = 0.25
output out: i32[1]

algorithm {
    var i
    rdom r = [0..img.width, 0..img.height]
    hist(i) = 0
    hist(i32(clamp(img(r.x, r.y), 0.0f, 1.0f) * 10.0f / scale)) += 1
    out(i) = hist(i)
}

schedule {
    hist.compute_root()
}
"""


def _bins_numpy(img, scale):
    """The bins by NumPy in f32: hdsl's clamp is max(min(v, 1), 0) with min(NaN, 1) = 1."""
    v = np.where(np.isnan(img), np.float32(1), np.clip(img, np.float32(0), np.float32(1))).astype(np.float32)
    with np.errstate(all="ignore"):
        z = (v * np.float32(10)) / np.float32(scale)
    return np.trunc(z).astype(np.int64).ravel()


@pytest.mark.parametrize("scale", [0.25, 0.3, -0.5, 1e6])
def test_scatter_through_float_arithmetic(scale):
    """Compiled (host, and AVX2 with fast_math's contractions) == evaluator == NumPy's
    bincount over the bins; the histogram's region is the bins' range, found through the
    float arithmetic (no clamp of the bin in the program)."""
    import hdsl
    rs = np.random.RandomState(3)
    img = (rs.rand(23, 31) * 1.2 - 0.1).astype(np.float32)
    img[0, :4] = [np.nan, np.inf, -np.inf, 1.0]
    bins = _bins_numpy(img, scale)
    lo, hi = int(bins.min()), int(bins.max())
    want = np.bincount(bins - lo, minlength=hi - lo + 1).astype(np.int32)
    p = hdsl.loads(SCATTER)
    ev = p.realize((hi - lo + 1,), min=(lo,), img=img, scale=scale)
    assert np.array_equal(ev, want)
    for target in ("host", "x86-64-avx2-fast_math"):
        got = p.compile(target).realize((hi - lo + 1,), min=(lo,), img=img, scale=scale)
        assert np.array_equal(got, want), target


@pytest.mark.parametrize("scale", [0.0, -0.0, math.nan, 1e-12])
def test_scatter_with_unboundable_bins_is_an_error(scale):
    """scale = 0 (bins of NaN and infinity), NaN, or so small that the bins pass 2^30: the
    compiled code refuses before it writes anything (the evaluator, whose regions are
    found with the params' values, refuses too)."""
    import hdsl
    img = np.random.RandomState(4).rand(9, 7).astype(np.float32)
    p = hdsl.loads(SCATTER)
    with pytest.raises(hdsl.HdslError, match=r"computed through float arithmetic .*\(scale = "):
        p.compile("host").realize((4,), img=img, scale=scale)
    with pytest.raises(hdsl.HdslError):
        p.realize((4,), img=img, scale=scale)


def test_bin_through_a_loop_var_is_still_refused():
    """A float range that depends on a loop var cannot be checked before the pipeline runs:
    the bin stays unbounded (the compile-time error it always was: "cannot tell how much
    storage .hist. needs")."""
    import hdsl
    text = SCATTER.replace("img(r.x, r.y), 0.0f, 1.0f) * 10.0f / scale", "img(r.x, r.y), 0.0f, 1.0f) * f32(r.x)")
    with pytest.raises(hdsl.HdslError, match="cannot tell"):
        hdsl.loads(text).compile("host")


def test_evaluator_interval_admits_nan_of_zero_times_infinity():
    """The evaluator's own intervals (hdsl/ir/bounds.py, params known): 0 * inf is NaN, and
    i32(NaN) is i32's minimum, so the conversion's interval must reach it (it once said 0)."""
    from hdsl.ir.bounds import BoundsEnv, interval
    e = Cast(I32, BinOp("*", f(0.0), BinOp("/", f(1.0), P, F32), F32))
    for p, want_nan in ((0.0, True), (0.5, False)):
        env = BoundsEnv(scalar=lambda n, p=p: p if getattr(n, "name", None) == "p" else None)
        lo, hi = interval(e, env)
        v = int(ev(e, {"p": p}))
        assert lo <= v <= hi
        assert (v == -2 ** 31) == want_nan


def test_clamped_bins_get_no_check():
    """A pipeline whose coordinates are bounded without the float rules is lowered as
    before, with no run-time check: a clamped bin runs at scale = 0 (its NaN and infinite
    bins land on the clamp's ends), as the evaluator does."""
    import hdsl
    text = SCATTER.replace("hist(i32(clamp(img(r.x, r.y), 0.0f, 1.0f) * 10.0f / scale)) += 1",
                           "hist(clamp(i32(clamp(img(r.x, r.y), 0.0f, 1.0f) * 10.0f / scale), 0, 40)) += 1")
    assert text != SCATTER
    img = np.random.RandomState(5).rand(9, 7).astype(np.float32)
    p = hdsl.loads(text)
    got = p.compile("host").realize((41,), img=img, scale=0.0)
    assert np.array_equal(got, p.realize((41,), img=img, scale=0.0))
    assert got.sum() == img.size


def test_the_float_rules_are_on_only_in_the_thread_that_turned_them_on():
    """A pipeline lowered on another thread meanwhile neither uses the float rules nor adds
    its checks to this lowering's list (which would leave its own bound unchecked)."""
    import threading
    from hdsl.lower.symbolic import _float_checks_list, float_coordinate_checks
    seen = []
    with float_coordinate_checks() as mine:
        assert _float_checks_list() is mine
        t = threading.Thread(target=lambda: seen.append(_float_checks_list()))
        t.start()
        t.join()
    assert seen == [None]
    assert _float_checks_list() is None
