"""Parallel schedules give the same values on every run: each compiled pipeline
is run 200 times on one input, and every result must equal the first and
the evaluator's."""
from __future__ import annotations

import numpy as np
import pytest

from compiler_corpus import CORPUS, compare, load, make_args, seed_of

RUNS = 200

SCHEDULES = {
    # the paper's schedule: tiles in parallel, the producer computed per tile
    "blur3x3_u16": """
        out.tile(x, y, xi, yi, 16, 8).vectorize(xi, 8).parallel(y)
        blur_x.compute_at(out, x).vectorize(x, 8)
    """,
    # nested parallel loops: a parallel producer inside each parallel strip of the consumer,
    # with its storage per strip
    "gauss5_f32": """
        out.split(y, yo, yi, 4).parallel(yo).vectorize(x, 4)
        gx.compute_at(out, yo).parallel(y).vectorize(x, 4)
    """,
    # parallel pure stage and parallel update stages (over the pure vars of each scan)
    "sat": """
        s.compute_root().parallel(y)
        s.update(0).parallel(y)
        s.update(1).parallel(x, 3)
    """,
    # parallel loops over the other dimension of each recursive filter
    "iir": """
        rf.compute_root().parallel(y, 2)
        rf.update(0).parallel(y)
        rf.update(1).parallel(y, 5)
        rf.update(2).parallel(x)
        rf.update(3).parallel(x, 7).vectorize(x_i, 4)
    """,
    # three outputs, each parallel, sharing parallel intermediates
    "multi_out": """
        gx.compute_root().parallel(y)
        gy.compute_root().parallel(y, 3)
        mag.parallel(y)
        dir.parallel(y, 2)
        edges.tile(x, y, xi, yi, 8, 8).parallel(y)
    """,
    # a parallel update over the pure var of a predicated rdom; an inline reduction per row
    "rdom_where": """
        evens.compute_root().parallel(y)
        evens.update(0).parallel(y, 2)
        out.parallel(y)
        disc.compute_at(out, y)
    """,
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_parallel_schedule_is_deterministic(name):
    spec = CORPUS[name]
    block = "\nschedule par {\n" + "\n".join("    " + l.strip() for l in SCHEDULES[name].strip().splitlines()) \
        + "\n}\n"
    p = load(spec, block)
    c = p.compile("host", schedule="par")
    w, h = 203, 157
    args = make_args(spec, w, h, seed_of(name, "parallel"))
    size = spec.sizes(w, h)
    expected = p.realize(size, **args)
    first = c.realize(size, **args)
    compare(spec, first, expected, f"{name} run 0: ")
    first = first if isinstance(first, tuple) else (first,)
    for i in range(1, RUNS):
        got = c.realize(size, **args)
        got = got if isinstance(got, tuple) else (got,)
        for k, (a, b) in enumerate(zip(got, first)):
            if not np.array_equal(a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a,
                                  b.view(f"u{b.itemsize}") if b.dtype.kind == "f" else b):
                bad = int(np.count_nonzero(a != b))
                raise AssertionError(f"{name}: run {i} differs from run 0 in output {k} ({bad} values)")
