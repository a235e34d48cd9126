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
