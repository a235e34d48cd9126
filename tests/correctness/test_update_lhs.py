"""Pure vars on an update's left-hand side, as Halide defines them (src/Function.cpp,
Function::define_update): an argument is a pure var when it is the pure definition's var at
the same position; such a var is bound in the whole update — in computed coordinates too, and
as a coordinate at another position (`f(x, x)`: the diagonal)."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

from .helpers import assert_same, program

DIAGONAL = """
pipeline d
input img: i32[2]
output f: i32[2]
output g: i32[2]
algorithm {
    f(x, y) = img(x, y)
    f(x, x) += 1000
    rdom r = [0..3]
    g(x, y) = x * 10 + y
    g(x, min(x + r.x, 5)) = g(x, min(x + r.x, 5)) * 2 + r.x
}
schedule {
    f.update(0).vectorize(x, 4)
    g.update(0).parallel(x)
}
"""


def _halide_diagonal(img):
    """The same two updates in Halide (the `halide` package)."""
    hl = pytest.importorskip("halide")
    x, y = hl.Var("x"), hl.Var("y")
    b = hl.Buffer(img)
    f, g = hl.Func("f"), hl.Func("g")
    f[x, y] = b[x, y]
    f[x, x] += 1000
    r = hl.RDom([hl.Range(0, 3)])
    g[x, y] = x * 10 + y
    g[x, hl.min(x + r.x, 5)] = g[x, hl.min(x + r.x, 5)] * 2 + r.x
    return np.asarray(f.realize([6, 6])), np.asarray(g.realize([6, 6]))


def test_a_pure_var_as_another_coordinate():
    """`f(x, x) += 1000` updates the diagonal and `g(x, min(x + r.x, 5))` a band: x is pure at
    position 0 and a computed coordinate at position 1; both agree with Halide, natively too
    (with the update's pure loop vectorized or parallel)."""
    p = program(DIAGONAL)
    img = np.arange(64, dtype=np.int32).reshape(8, 8)
    hf, hg = _halide_diagonal(img)
    want_f = img[:6, :6] + 1000 * np.eye(6, dtype=np.int32)
    assert np.array_equal(hf, want_f)
    for got in (p.realize([[6, 6], [6, 6]], img=img), p.compile("host").realize([[6, 6], [6, 6]], img=img)):
        assert_same(got[0], want_f)
        assert_same(got[1], hg.astype(np.int32))


def test_a_pure_var_inside_a_computed_coordinate():
    """Halide's tutorial lesson 18, line 77: `intermediate(input(rx, y) / 32, y) += 1`; y is pure
    (argument 1, as in the pure definition) and used in the computed argument 0."""
    p = program("""
pipeline rows
input img: u8[2]
output h: i32[2]
algorithm {
    rdom rx = [0..img.width]
    h(i, y) = 0
    h(i32(img(rx.x, y)) / 32, y) += 1
}
schedule { h.update(0).parallel(y) }
""")
    img = np.random.default_rng(1).integers(0, 256, (7, 13)).astype(np.uint8)
    want = np.stack([np.bincount(row // 32, minlength=8) for row in img]).astype(np.int32)
    assert_same(p.realize([8, 7], img=img), want)
    assert_same(p.compile("host").realize([8, 7], img=img), want)


@pytest.mark.parametrize("lhs", ["f(y, x)", "f(y, 0)"])
def test_a_pure_var_only_out_of_place_is_an_error(lhs):
    """Halide refuses `g(y, x) += 1000` after `g(x, y) = …` ("Undefined variable y"): a var
    that is nowhere at its own position is not bound."""
    with pytest.raises(hdsl.HdslError, match="pure var 'y' is argument 1 of 'f' but appears here as argument 0"):
        program(f"""
pipeline p
input img: i32[2]
output f: i32[2]
algorithm {{
    f(x, y) = img(x, y)
    {lhs} += 1
}}
""")
