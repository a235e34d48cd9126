"""parallel / vectorize of reduction variables: accepted when provably race-free, as Halide does.

Halide (src/ParallelRVar.cpp, can_parallelize_rvar) lets an RVar loop run in parallel or as
vectors when two iterations with different values of it can never write the same point of the
Func, nor read a point the other writes, whatever the other variables are. Race-free updates
must give the evaluator's values with real threads and vectors; racy ones are refused at the
directive.
"""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.ir.printer import stmt_str
from hdsl.lower.lower import lower

HALIDE_PARALLEL_RVAR = """
pipeline parallel_rvar
output out: i32[2]
algorithm {
    rdom r = [0..12, 0..10]
    rdom r2 = [0..12]
    f(x, y) = x + y
    f(r.x, r.y) += 1
    f(r.x, r.y) += f(r.x + 20, r.y)
    f(2 * r2.x + 1, 0) += f(2 * r2.x, 0)
    f(r2.x, 0) += f(r2.x - 1, 1)
    out(x, y) = f(x, y)
}
schedule {
    f.compute_root()
    f.update(0).tile(r.x, r.y, rxo, ryo, rxi, ryi, 4, 2).fuse(rxo, ryo, rt).parallel(rt)
    f.update(1).parallel(r.x).parallel(r.y).unroll(r.y, 2)
    f.update(2).vectorize(r2.x, 4).unroll(r2.x)
    f.update(3).parallel(r2.x, 4)
}
"""


def _halide_parallel_rvar():
    """Halide's own test/correctness/parallel_rvar.cpp, run with the `halide` package."""
    hl = pytest.importorskip("halide")
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([hl.Range(0, 12), hl.Range(0, 10)])
    r2 = hl.RDom([hl.Range(0, 12)])
    f = hl.Func("f")
    f[x, y] = x + y
    f[r.x, r.y] += 1
    f[r.x, r.y] += f[r.x + 20, r.y]
    f[2 * r2.x + 1, 0] += f[2 * r2.x, 0]
    f[r2.x, 0] += f[r2.x - 1, 1]
    f.compute_root()
    rxo, ryo, rxi, ryi, rt = (hl.RVar(n) for n in ("rxo", "ryo", "rxi", "ryi", "rt"))
    f.update(0).tile(r.x, r.y, rxo, ryo, rxi, ryi, 4, 2).fuse(rxo, ryo, rt).parallel(rt)
    f.update(1).parallel(r.x).parallel(r.y).unroll(r.y, 2)
    f.update(2).vectorize(r2.x, 4).unroll(r2.x)
    f.update(3).parallel(r2.x, 4)
    out = hl.Func("out")
    out[x, y] = f[x, y]
    return np.asarray(out.realize([20, 20]))        # (the package gives (y, x) arrays, as hdsl does)


def test_halides_parallel_rvar_test():
    """Every update of Halide's test/correctness/parallel_rvar.cpp is race-free by its proof:
    the same schedule is accepted, and native code (threads, vectors) gives the evaluator's
    values and Halide's."""
    p = hdsl.loads(HALIDE_PARALLEL_RVAR, "parallel_rvar.hl")
    want = _halide_parallel_rvar()
    assert np.array_equal(p.realize([20, 20]), want)
    assert np.array_equal(p.compile("host").realize([20, 20]), want)
    text = stmt_str(lower(p.ir).stmt)
    assert "parallel for f.s1.rt" in text and "parallel for f.s2.r.x" in text and "parallel for f.s2.r.y" in text
    assert "vectorized for f.s3.r2.x_i" in text and "parallel for f.s4.r2.x" in text


# update definitions over rdom r = [0..W, 0..H] (W, H from the input), and whether each of
# r.x, r.y is provably race-free there
UPDATES = {
    "scale": ("f(r.x, r.y) = f(r.x, r.y) * 2 + img(r.x, r.y)", {"r.x": True, "r.y": True}),
    "row_sums": ("f(x, r.y) += img(r.x, r.y) * (x + 1)", {"r.x": False, "r.y": True}),
    "transposed": ("f(r.y, r.x) = f(r.y, r.x) + img(r.x, r.y)", {"r.x": True, "r.y": True}),
    "strided": ("f(3 * r.x + 1, r.y) = f(3 * r.x + 1, r.y) - img(r.x, r.y)", {"r.x": True, "r.y": True}),
    "diagonal": ("f(r.x + r.y, 0) += img(r.x, r.y)", {"r.x": False, "r.y": False}),
    "histogram": ("f(clamp(img(r.x, r.y), 0, 7), 0) += 1", {"r.x": False, "r.y": False}),
    "scan_x": ("f(r.x, r.y) = f(r.x - 1, r.y) + img(r.x, r.y)", {"r.x": False, "r.y": True}),
    "swap_reads": ("f(r.x, 0) = f(r.x, 1) + img(r.x, r.y)", {"r.x": True, "r.y": False}),
}
FORMS = ["parallel({v})", "parallel({v}, 3)", "vectorize({v}, 4)", "vectorize({v}, 8)",
         "split({v}, vo, vi, 3).parallel(vo).vectorize(vi)"]


def _program(update: str, directive: str) -> str:
    return f"""
pipeline pr
input img: i32[2]
output out: i32[2]
algorithm {{
    rdom r = [0..img.width, 0..img.height]
    f(x, y) = x * 100 + y
    {update}
    out(x, y) = f(x, y)
}}
schedule {{
    f.compute_root()
    f.update(0).{directive}
}}
"""


CASES = [(name, v, form) for name, (_, ok) in UPDATES.items() for v, safe in ok.items() if safe for form in FORMS]


@pytest.mark.parametrize("name,v,form", CASES)
def test_race_free_rvar_loops_match_the_evaluator(name, v, form):
    """Each race-free (update, rvar) pair under every directive form: native code with real
    threads and vectors gives exactly the evaluator's values."""
    p = hdsl.loads(_program(UPDATES[name][0], form.format(v=v)), "pr.hl")
    img = np.random.RandomState(len(name)).randint(-9, 9, (7, 10)).astype(np.int32)
    ref = p.realize([40, 12], img=img)
    assert np.array_equal(p.compile("host").realize([40, 12], img=img), ref)


RACY = [(name, v) for name, (_, ok) in UPDATES.items() for v, safe in ok.items() if not safe]


@pytest.mark.parametrize("name,v", RACY)
@pytest.mark.parametrize("form", ["parallel({v})", "vectorize({v}, 4)", "split({v}, vo, vi, 2).parallel(vo)"])
def test_racy_rvar_loops_are_refused(name, v, form):
    """Halide's test/error/race_condition.cpp and rdom_where_races.cpp: an RVar whose values may
    collide (a histogram, a diagonal sum, a scan along it) is refused, also through the loops a
    split makes from it."""
    with pytest.raises(hdsl.HdslError, match="would let its iterations race"):
        hdsl.loads(_program(UPDATES[name][0], form.format(v=v)), "pr.hl")


def test_race_proof_hand_checked_cases():
    """The table above, checked by hand against the collision equations: e.g. for `strided`,
    3 * r.x + 1 == 3 * r.x' + 1 forces r.x == r.x'; for `swap_reads`, every read has
    y = 1 and every write y = 0, and two writes differ in x when r.x does; for `diagonal`,
    (r.x, r.y) = (0, 1) and (1, 0) write the same point."""
    from hdsl.schedule.record import race_free
    for name, (update, ok) in UPDATES.items():
        p = hdsl.loads(_program(update, "unroll(r.y, 2)"), "pr.hl")
        f = next(g for g in _funcs(p) if g.name == "f")
        for v, safe in ok.items():
            assert race_free(f, f.updates[0], v) is safe, (name, v)


def _funcs(p):
    from hdsl.ir.func import topo_order
    return topo_order(p.ir.outputs)


PREDICATED = """
pipeline w
input img: i32[2]
output f: i32[2]
output h: i32[1]
algorithm {
    rdom r = [0..img.width, 0..img.height] where (r.x + r.y) % 3 != 0
    f(x, y) = x - y
    f(r.x, r.y) = f(r.x, r.y) * 3 + img(r.x, r.y)
    h(i) = 0
    h(clamp(img(r.x, r.y), 0, 9)) += r.x + 1
}
schedule {
    f.update(0).vectorize(r.x, 4).parallel(r.y)
    h.update(0).rfactor(r.y, v)
}
schedule other {
    f.update(0).split(r.y, yo, yi, 2).parallel(yo).vectorize(r.x, 8)
    h.update(0).rfactor(r.x, v)
}
"""


@pytest.mark.parametrize("schedule", [None, "other"])
def test_a_predicated_rdom_in_parallel_and_vectors(schedule):
    """An rdom with a `where` condition: the race-free update runs its RVars as threads and
    vectors (the condition masks lanes), and the predicated histogram is rfactored (Halide's
    rfactor.cpp, rdom_with_predicate_rfactor_test); both give the NumPy result."""
    p = hdsl.loads(PREDICATED, "w.hl")
    img = np.random.RandomState(2).randint(-3, 13, (9, 11)).astype(np.int32)
    ys, xs = np.mgrid[0:9, 0:11]
    keep = (xs + ys) % 3 != 0
    want_f = np.where(keep, (xs - ys) * 3 + img, xs - ys).astype(np.int32)
    want_h = np.zeros(10, np.int32)
    np.add.at(want_h, np.clip(img[keep], 0, 9), xs[keep] + 1)
    for got in (p.realize([[11, 9], [10]], img=img), p.compile("host", schedule=schedule).realize([[11, 9], [10]], img=img)):
        assert np.array_equal(got[0], want_f)
        assert np.array_equal(got[1], want_h)
