"""Programs Halide accepts that hdsl refused (issue 23, items 3 and 4), each run on the
evaluator and as native code, the values checked by hand or against the `halide` package."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl


def run_both(text, size, **args):
    p = hdsl.loads(text, "<conformance>")
    expected = p.realize(size, **args)
    got = p.compile("host").realize(size, **args)
    return got, expected


LITERALS = """
pipeline lit
output a: i8[1]
output b: u8[1]
output c: i16[1]
output d: u16[1]
algorithm {
    a(x) = i8(240) + i8(x)
    b(x) = u8(300) + u8(-1)
    c(x) = i16(40000)
    d(x) = u16(-2) + u16(x)
}
"""


def test_explicit_cast_of_a_literal_wraps():
    """Halide's cast() folds a constant with make_const, and IntImm::make / UIntImm::make
    keep only the type's low bits (src/IROperator.cpp `cast`, src/Expr.cpp): i8(240) is -16.
    Checked against the halide package too."""
    import halide as hl
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = hl.cast(hl.Int(8), 240) + hl.cast(hl.Int(8), x)
    halide_a = np.asarray(f.realize([2]))
    g = hl.Func("g")
    g[x] = hl.cast(hl.UInt(8), 300) + hl.cast(hl.UInt(8), -1)
    halide_b = np.asarray(g.realize([2]))
    got, expected = run_both(LITERALS, (2,))
    for out in (got, expected):
        a, b, c, d = out
        assert a.tolist() == halide_a.tolist() == [-16, -15]
        assert b.tolist() == halide_b.tolist() == [43, 43]           # 44 + 255 wraps to 43
        assert c.tolist() == [-25536, -25536] and d.tolist() == [65534, 65535]


def test_implicit_narrowing_of_a_literal_is_still_an_error():
    text = """
pipeline p
input  img: u8[1]
output out: u8[1]
algorithm {
    out(x) = img(x) + 300
}
"""
    with pytest.raises(hdsl.HdslError, match="300"):
        hdsl.loads(text, "<conformance>")


@pytest.mark.parametrize("sched", [
    "out.split(x, x, xi, 4)",                    # the outer loop keeps the old name
    "out.split(x, x, xi, 4).vectorize(xi).parallel(x)",
    "out.vectorize(x, 4).unroll(x, 3)",          # two splits of x: x_i, then x_i2
    "out.tile(x, y, x, y, xi, yi, 4, 2).parallel(y)",
    "f.compute_root().vectorize(x, 4).vectorize(x, 2)",
])
def test_a_split_may_reuse_the_old_name(sched):
    """Halide's `f.split(x, x, xi, 8)` and `f.vectorize(x, 4).unroll(x, 3)` (its vectorize
    and unroll name their inner loop afresh; Func.cpp, Stage::vectorize) are valid."""
    text = f"""
pipeline reuse
input  img: i32[2]
output out: i32[2]
algorithm {{
    f(x, y) = img(x, y) * 2
    out(x, y) = f(x, y) + 1
}}
schedule {{ {sched} }}
"""
    img = np.arange(13 * 5, dtype=np.int32).reshape(5, 13)
    got, expected = run_both(text, (13, 5), img=img)
    assert (expected == img * 2 + 1).all()
    assert (got == expected).all()


def test_variadic_select_min_max():
    """Halide's multi-way select(c0, v0, c1, v1, ..., default) ("evaluates to the first value
    for which the condition is true") and variadic min/max, folded from the right
    (src/IROperator.h)."""
    text = """
pipeline v
input  img: i32[2]
output o: i32[2]
algorithm {
    o(x, y) = (select(img(x, y) < 0, -1, img(x, y) < 10, 0, img(x, y) < 20, 1, 2) * 100
               + max(x, y, 3) + min(x, y, u8(2)))
}
"""
    img = np.arange(40, dtype=np.int32).reshape(8, 5) - 5
    got, expected = run_both(text, (5, 8), img=img)
    xs, ys = np.meshgrid(np.arange(5), np.arange(8))
    sel = np.select([img < 0, img < 10, img < 20], [-1, 0, 1], 2)
    by_hand = sel * 100 + np.maximum(np.maximum(xs, ys), 3) + np.minimum(np.minimum(xs, ys), 2)
    assert (expected == by_hand).all()
    assert (got == expected).all()


def test_is_inf_and_is_finite():
    """Halide's is_inf / is_finite (src/IROperator.h: "true if the argument is a Inf or -Inf"
    / "neither a NaN nor an Inf"), on f32 and f64, scalar and vectorized, against the
    halide package."""
    import halide as hl
    text = """
pipeline inf
input img: f32[1]
input dbl: f64[1]
output o: u8[1]
algorithm {
    o(x) = (select(is_inf(img(x)), u8(1), u8(0)) + select(is_finite(img(x)), u8(2), u8(0))
            + select(is_inf(dbl(x)), u8(4), u8(0)) + select(is_finite(dbl(x)), u8(8), u8(0)))
}
schedule vec { o.vectorize(x, 4) }
"""
    img = np.array([0, np.inf, -np.inf, np.nan, 1e38, -3, 2.5, -np.nan], np.float32)
    dbl = img.astype(np.float64)[::-1].copy()
    p = hdsl.loads(text, "<conformance>")
    by_hand = (np.isinf(img) * 1 + np.isfinite(img) * 2 + np.isinf(dbl) * 4 + np.isfinite(dbl) * 8).astype(np.uint8)
    x = hl.Var("x")
    fi, fd = hl.Buffer(img), hl.Buffer(dbl)
    h = hl.Func("h")
    h[x] = (hl.select(hl.is_inf(fi[x]), 1, 0) + hl.select(hl.is_finite(fi[x]), 2, 0)
            + hl.select(hl.is_inf(fd[x]), 4, 0) + hl.select(hl.is_finite(fd[x]), 8, 0))
    assert np.asarray(h.realize([8])).tolist() == by_hand.tolist()
    for out in (p.realize((8,), img=img, dbl=dbl), p.compile().realize((8,), img=img, dbl=dbl),
                p.compile(schedule="vec").realize((8,), img=img, dbl=dbl)):
        assert out.tolist() == by_hand.tolist()


def test_select_of_tuples():
    """Halide's select over Tuples picks point by point (Tuple select, src/Tuple.h), also in
    the multi-way form."""
    text = """
pipeline tsel
input img: i32[1]
output o: i32[1]
output p: f32[1]
algorithm {
    f(x) = select(img(x) > 0, (img(x), 1.5f), img(x) < -5, (0, 2.5f), (-img(x), 0.25f))
    o(x) = f(x)[0]
    p(x) = f(x)[1]
}
"""
    img = np.array([3, -7, -2, 0, 9], np.int32)
    got, expected = run_both(text, (5,), img=img)
    for o, p in (got, expected):
        assert o.tolist() == [3, 0, 2, 0, 9]
        assert p.tolist() == [1.5, 2.5, 0.25, 0.25, 1.5]
    bad = text.replace("(0, 2.5f)", "0")
    with pytest.raises(hdsl.HdslError, match="select mixes a tuple of 2 values with a single value"):
        hdsl.loads(bad, "<conformance>")


def test_repeated_pure_var_is_refused_as_in_halide():
    """Halide refuses `g(x, x) = ...`: "In left-hand-side of definition, arguments 1 and 0
    both have the name x" (src/Function.cpp, Function::define); so does hdsl."""
    import halide as hl
    x = hl.Var("x")
    g = hl.Func("g")
    with pytest.raises(Exception, match="both have the name"):
        g[x, x] = x
    text = """
pipeline rep
output g: i32[2]
algorithm {
    g(x, x) = x
}
"""
    with pytest.raises(hdsl.HdslError, match="pure var 'x' appears twice on the left-hand side"):
        hdsl.loads(text, "<conformance>")


WHERE = """
pipeline rw
input img: i32[2]
output g: i32[2]
output h: i32[2]
algorithm {
    var x, y
    rdom r = [0..4] where r.x <= x
    g(x, y) = 0
    g(x, y) += img(r.x, y)
    h(x, y) = sum(img(r.x, y)) + 1
}
schedule v { g.vectorize(x, 4)
             h.vectorize(x, 4) }
"""


@pytest.mark.parametrize("schedule", [None, "v"])
def test_rdom_where_mentions_a_pure_var(schedule):
    """Halide's RDom::where: the predicate "may refer to the RDom's variables and free
    variables in the Func's update definition" (src/RDom.h), giving "domains with sizes that
    vary with some free variable": g(x, y) sums img(0..min(x, 3), y). Also checked against the
    halide package."""
    import halide as hl
    img = np.arange(24, dtype=np.int32).reshape(4, 6)
    p = hdsl.loads(WHERE, "<conformance>")
    expected = p.realize((6, 4), img=img)
    got = p.compile(schedule=schedule).realize((6, 4), img=img)
    by_hand = np.array([[img[y, :min(x, 3) + 1].sum() for x in range(6)] for y in range(4)], np.int32)
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(0, 4)])
    r.where(r.x <= x)
    b = hl.Buffer(img)
    f = hl.Func("f")
    f[x, y] = 0
    f[x, y] += b[r.x, y]
    assert np.asarray(f.realize([6, 4])).tolist() == by_hand.tolist()
    for g, h in (expected, got):
        assert g.tolist() == by_hand.tolist()
        assert h.tolist() == (by_hand + 1).tolist()


def test_rdom_where_pure_var_must_stay_pure():
    bad = WHERE.replace("g(x, y) += img(r.x, y)", "g(r.x, y) += img(r.x, y)")
    with pytest.raises(hdsl.HdslError, match="uses x, which this update of 'g' does not have as a pure var"):
        hdsl.loads(bad, "<conformance>")


SLIDE_UNROLL = """
pipeline slide
input img: i32[1]
output g: i32[1]
algorithm {
    # print reports each point of f computed (it evaluates to its first argument)
    f(x) = print(img(x + 1) + x * x, "fx", x)
    g(x) = f(x) + f(x - 1)
}
schedule { g.split(x, x, xi, 10)
           f.store_root().compute_at(g, x).unroll(x) }
"""


def test_unroll_of_a_sliding_producer(capfd):
    """Halide's test/correctness/sliding_window.cpp, "Sliding with an unrolled producer":
    g.split(x, x, xi, 10); f.store_root().compute_at(g, x).unroll(x), g realized over 100
    points, f computed 101 times (each point once). The slid loop keeps the window's
    constant extent (11 here: the first tile computes 11 points, later ones 10), so it
    unrolls; it was refused as of non-constant extent."""
    p = hdsl.loads(SLIDE_UNROLL, "<conformance>")
    img = np.random.default_rng(5).integers(-50, 50, 101, dtype=np.int32)
    c = p.compile("host")
    capfd.readouterr()
    got = c.realize((100,), img=img)
    points = [int(l.split(" fx ")[1]) for l in capfd.readouterr().out.splitlines() if " fx " in l]
    xs = np.arange(100)
    f = lambda x: img[x + 1] + x * x      # noqa: E731
    assert got.tolist() == (f(xs) + f(xs - 1)).tolist()
    assert sorted(points) == list(range(-1, 100))          # 101 points, each once
    # (the form for outputs at least a tile wide, whose last tile is shifted inwards as in
    # Halide, unrolls; the guarded form for narrower outputs leaves the loop rolled)
    from hdsl.ir.printer import stmt_str
    from hdsl.lower.lower import lower
    assert "unrolled for f.s0.x" in stmt_str(lower(p.ir, shift_outputs=True).stages["schedule_functions"])
    capfd.readouterr()
    small = c.realize((7,), img=img[:8])
    assert small.tolist() == (f(xs[:7]) + f(xs[:7] - 1)).tolist()
