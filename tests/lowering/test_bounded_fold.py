"""Sliding windows of varying height bounded by a constant are folded (hdsl/lower/loops.py,
LoopBuilder.slide with diff_upper; lower.py's `foldable`), as Halide's storage folding
does (src/StorageFolding.cpp folds by a constant bound of the footprint's extent): an
upsampling consumer reads rows y / 2 .. (y + 1) / 2 of its producer, 1 or 2 rows, so the
producer stored per strip and computed per row keeps 2 rows, not the strip's. A producer
vectorized along x folds along y too (only a split of the folded dim may compute past the
window). interpolate's upsampling levels (it[1] .. it[8]) and level 0's clone fold so.

Values: NumPy's (an independent oracle: the same sums, exact here, small integers and
halves in f32) and the evaluator's, for strips cut short, an odd first row and an even
one. The loop-nest checks fail without the change; diff_upper and monotonic are checked
against brute force over a range of the variable."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.ir.expr import BinOp, Const, Select, Var
from hdsl.ir.types import BOOL, I32
from hdsl.lower.loops import diff_upper, monotonic

UP = """
pipeline up
input img: f32[2]
output out: f32[2]
algorithm {
    var x, y
    f(x, y) = img(x, y) * 2.0f + 1.0f
    g(x, y) = (f(x, y / 2) + f(x, (y + 1) / 2)) * 0.5f
    out(x, y) = (g(x, y / 2) + g(x, (y + 1) / 2)) * 0.5f
}
schedule {
    out.split(y, yo, yi, 16).parallel(yo).vectorize(x, 8)
    g.store_at(out, yo).compute_at(out, yi).vectorize(x, 8)
    f.store_at(out, yo).compute_at(out, yi).vectorize(x, 8)
}
"""


def program():
    return hdsl.loads(UP, "up.hl")


def by_numpy(img, x0, y0, w, h):
    f = img.astype(np.float64) * 2 + 1
    ys = np.arange(y0, y0 + h)

    def g(r):                           # rows r of g (NumPy's // floors, as hdsl's /)
        return (f[r // 2] + f[(r + 1) // 2]) * 0.5
    out = (g(ys // 2) + g((ys + 1) // 2)) * 0.5
    return out[:, x0:x0 + w]


def test_upsampling_windows_fold_to_two_rows():
    """g's window (rows y / 2 .. (y + 1) / 2 of out's row y) and f's (what g's slid rows
    read: its start a select of the first row or the next) are 1 or 2 rows: both fold
    to 2, vectorized along x as they are."""
    s = compiled_form(program().ir, "stmt", after="schedule_functions")
    realizes = [line for line in s.splitlines() if line.strip().startswith("realize")]
    assert len(realizes) == 2
    assert all(line.endswith("folded y mod 2:") for line in realizes)


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("y0, h", [(0, 40), (3, 37), (6, 16), (1, 5)])
def test_folded_upsampling_gives_numpys_and_the_evaluators_values(target, y0, h):
    """Several strips of 16 rows and a short last one, starting at an even and an odd
    row (the window's first row then holds 1 or 2 rows)."""
    x0, w = 2, 19
    img = np.random.RandomState(h + y0).randint(0, 50, ((y0 + h) // 4 + 2, x0 + w)).astype(np.float32)
    p = program()
    want = by_numpy(img, x0, y0, w, h).astype(np.float32)
    got = p.compile(target).realize((w, h), min=(x0, y0), img=img)
    assert np.array_equal(got, want)
    assert np.array_equal(got, p.realize((w, h), min=(x0, y0), img=img))


def V(n):
    return Var(n, I32)


def C(k):
    return Const(I32, k)


def B(op, a, b):
    return BinOp(op, a, b, I32)


def _eval(e, y):
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return y
    if isinstance(e, Select):
        c = e.cond
        return _eval(e.t, y) if _eval(c.a, y) <= _eval(c.b, y) else _eval(e.f, y)
    a, b = _eval(e.a, y), _eval(e.b, y)
    return {"+": a + b, "-": a - b, "*": a * b, "/": a // b, "min": min(a, b), "max": max(a, b)}[e.op]


Y = V("y")
HALF = B("/", Y, C(2))
HALF_UP = B("/", B("+", Y, C(1)), C(2))
SLID = Select(BinOp("<=", Y, C(0), BOOL), HALF, B("+", HALF, C(1)), I32)


@pytest.mark.parametrize("hi, lo, bound", [
    (HALF_UP, HALF, 1),                                                   # y/2 .. (y+1)/2
    (B("/", B("+", HALF_UP, C(1)), C(2)), B("/", HALF, C(2)), 1),        # two levels
    (B("/", B("+", HALF_UP, C(1)), C(2)), B("/", SLID, C(2)), 1),        # from a slid start
    (B("min", B("+", Y, C(7)), V("m")), Y, 7),                            # a min in the end
    (B("/", B("+", Y, C(5)), C(4)), B("/", B("-", Y, C(2)), C(4)), 2),   # ceil(7 / 4)
    (Y, HALF, None),                                                      # y - y/2: unbounded
])
def test_diff_upper_bounds_by_brute_force(hi, lo, bound):
    """diff_upper's constant is what it should be, and hi - lo never exceeds it for y in
    -40 .. 40 (m = 3 where it appears: a min only lowers hi)."""
    got = diff_upper(hi, lo)
    assert got == bound
    if got is not None:
        from hdsl.ir.expr import substitute
        hi3 = substitute(hi, lambda n: C(3) if isinstance(n, Var) and n.name == "m" else None)
        assert max(_eval(hi3, y) - _eval(lo, y) for y in range(-40, 41)) <= got


def test_monotonic_slid_start_without_its_max():
    """select(y <= 0, y / 2, y / 2 + 1), a slid start whose max the simplifier resolved,
    never goes down (brute force agrees); with the arms the other way round it can
    (y / 2 + 1 at 0, then 0 at 1), and monotonic says unknown."""
    assert monotonic(SLID, "y") == 1
    vals = [_eval(SLID, y) for y in range(0, 40)]
    assert all(a <= b for a, b in zip(vals, vals[1:]))
    back = Select(BinOp("<=", Y, C(0), BOOL), B("+", HALF, C(1)), HALF, I32)
    assert monotonic(back, "y") is None
