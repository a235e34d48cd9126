"""compute_at / store_at a loop that exists only in an update stage (an RVar loop, or a loop
split from one), as Halide's LoopLevel(g, var) allows: it names the loop of that name in any
stage of g (src/Schedule.cpp, LoopLevel::match), and the legal one encloses the uses
(Func.h: compute_at(const Func &f, const RVar &var), "within the iteration over some
dimension of an update domain")."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

SPLIT_RVAR = """
pipeline ca
input img: i32[1]
output g: i32[1]
algorithm {
    rdom r = [0..N]
    f(x) = print(img(x) * 3 + x, "fx", x)
    g(x) = 0
    g(r.x) = f(r.x)
}
schedule { SCHED }
"""

# Halide's test/correctness/compute_at_split_rvar.cpp, case by case: (rdom extent, schedule)
HALIDE_CASES = [
    (10, "g.update(0).split(r.x, ro, ri, 2)\n f.compute_at(g, ri)"),
    (10, "g.update(0).split(r.x, ro, ri, 2)\n f.compute_at(g, ro).unroll(x)"),
    (10, "g.update(0).split(r.x, ro, ri, 2).unroll(ri)\n f.compute_at(g, ri)"),
    (10, "g.update(0).split(r.x, ro, ri, 2).reorder(ro, ri)\n f.compute_at(g, ro)"),
    (20, "g.update(0).split(r.x, ro, ri, 4).split(ri, rio, rii, 2).fuse(rio, ro, fused)\n f.compute_at(g, fused)"),
    (10, "g.update(0).split(r.x, ro, ri, 3)\n f.compute_at(g, ro)"),
    # and the RVar loop itself, unsplit (Func.h's compute_at(Func, RVar))
    (10, "f.compute_at(g, r.x)"),
]


def _evaluations(capfd) -> list[int]:
    return [int(line.split(" fx ")[1]) for line in capfd.readouterr().out.splitlines() if " fx " in line]


@pytest.mark.parametrize("n,sched", HALIDE_CASES)
def test_halides_compute_at_split_rvar(capfd, n, sched):
    """Each case of Halide's compute_at_split_rvar.cpp: the result is g(i) = f(i), and f is
    evaluated exactly once per point (Halide counts `call_counter == N`), also for the split
    by a non-factor (its guarded tail must bound f's region) and the fused loops."""
    p = hdsl.loads(SPLIT_RVAR.replace("N", str(n)).replace("SCHED", sched), "ca.hl")
    img = ((np.arange(n, dtype=np.int32) * 7) % 5).astype(np.int32)
    want = img * 3 + np.arange(n, dtype=np.int32)
    c = p.compile("host")
    capfd.readouterr()
    assert np.array_equal(c.realize([n], img=img), want)
    assert sorted(_evaluations(capfd)) == list(range(n))


TWO_D = """
pipeline ca2
input img: i32[2]
output g: i32[2]
algorithm {
    rdom r = [0..5]
    f(x, y) = img(x, y) * 2 - y
    g(x, y) = x + y
    g(x, y) += f(x + r.x, y) * (r.x + 1)
}
schedule { SCHED }
"""


def _two_d_schedules():
    """Generated: every loop of g's update as the compute_at site, after assorted reshapes."""
    shapes = {
        "plain": ("", ["r.x", "x", "y"]),
        "split_r": ("g.update(0).split(r.x, ro, ri, 2)", ["ri", "ro", "x", "y"]),
        "r_outside": ("g.update(0).reorder(x, y, r.x)", ["x", "y", "r.x"]),
        "tiled": ("g.update(0).tile(x, y, xi, yi, 4, 2)", ["r.x", "xi", "yi", "x", "y"]),
        "split_y_parallel": ("g.update(0).split(y, yo, yi, 3).parallel(yo)", ["r.x", "x", "yi", "yo"]),
    }
    for name, (reshape, loops) in shapes.items():
        for loop in loops:
            for store in ("", f"\n f.store_at(g, {loop})"):
                yield pytest.param(f"{reshape}\n f.compute_at(g, {loop}){store}",
                                   id=f"{name}-{loop}{'-store' if store else ''}")


@pytest.mark.parametrize("sched", list(_two_d_schedules()))
def test_compute_at_every_loop_of_an_update(sched):
    """f is read only by g's update: computed at any loop of that stage (pure var loops too,
    which g's pure stage also has: the update's, where f is used, is the one meant), native
    code gives the evaluator's values."""
    p = hdsl.loads(TWO_D.replace("SCHED", sched), "ca2.hl")
    img = np.random.RandomState(4).randint(-20, 20, (9, 16)).astype(np.int32)
    ref = p.realize([11, 9], img=img)
    ys, xs = np.mgrid[0:9, 0:11]
    want = xs + ys + sum((img[ys, xs + k] * 2 - ys) * (k + 1) for k in range(5))
    assert np.array_equal(ref, want)
    assert np.array_equal(p.compile("host").realize([11, 9], img=img), ref)


def test_an_unknown_loop_lists_every_stage():
    src = TWO_D.replace("SCHED", "g.update(0).split(r.x, ro, ri, 2)\n f.compute_at(g, rq)")
    with pytest.raises(hdsl.HdslError) as e:
        hdsl.loads(src, "ca2.hl")
    msg = str(e.value)
    assert "'rq' is not a loop of 'g'" in msg
    assert "its pure definition: x, y" in msg and "update(0): ri, ro, x, y" in msg
