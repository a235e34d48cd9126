"""Outputs that feed other Funcs (issue 23, item 1): every Func, an output included, is
produced before anything that reads it, whatever the schedule. Native code is run
into output arrays filled with a sentinel first, so a Func that reads an output before
that output is written sees the sentinel instead of the right value.

Halide's multi-output pipelines (`Pipeline({f, g})`, test/correctness/multiple_outputs.cpp)
compute each output like any root Func, in an order that follows the dependence graph:
an output read by another Func is realized before that Func.
"""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

SENTINEL = -77777


def native_vs_evaluator(text: str, size, schedule=None, **args):
    p = hdsl.loads(text, "<order>")
    expected = p.realize(size, **args)
    c = p.compile("host", schedule=schedule)
    outs = tuple(np.full((size[1], size[0]), SENTINEL, np.int32) for _ in p.outputs)
    c.realize_into(outs, **args)
    return outs, expected


HEAD = """
pipeline order
input img: i32[2]
"""

CHAIN = HEAD + """
output f: i32[2]
output g: i32[2]
algorithm {
    f(x, y) = img(x, y) * 3
    w(x, y) = f(x, y)
    g(x, y) = w(x, y) + 1
}
"""


def test_root_func_reading_an_output_comes_after_it():
    """The issue's program: w (compute_root) reads output f; it was computed before f."""
    img = np.arange(6 * 5, dtype=np.int32).reshape(5, 6)
    (f, g), (ef, eg) = native_vs_evaluator(CHAIN + "schedule { w.compute_root() }", (6, 5), img=img)
    assert (ef == img * 3).all() and (eg == img * 3 + 1).all()      # by hand
    assert (f == ef).all()
    assert (g == eg).all()                  # was SENTINEL + 1 everywhere: w read f unwritten


def test_lowered_loops_follow_the_dependences():
    """In the lowered loop nest, f's loop comes before w's and w's before g's."""
    from hdsl.lower.lower import lowered_text
    p = hdsl.loads(CHAIN + "schedule { w.compute_root() }", "<order>")
    text = lowered_text(p.ir)
    pos = [text.index(f"for {n}.s0.y") for n in ("f", "w", "g")]
    assert pos == sorted(pos), text


SCHEDULES = {
    "root": "schedule { w.compute_root()\n v.compute_root() }",
    "at": "schedule { w.compute_root()\n v.compute_at(h, y) }",
    "at_inner": "schedule { v.compute_at(h, x) }",
    "root_vec": "schedule { w.compute_root().vectorize(x, 4)\n v.compute_root()\n g.split(y, yo, yi, 2).parallel(yo) }",
    # (w's tiles round past f's buffer unless its tails shift inwards: item 4 of the issue)
    "tiled": "schedule { w.compute_root().tile(x, y, xi, yi, 4, 2)\n v.compute_root()\n f.vectorize(x, 4) }",
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("size", [(6, 5), (9, 7)])
def test_chain_of_outputs(name, size):
    """Three outputs, each read by the next through a scheduled intermediate, and the
    first one also inlined into the last: f -> w -> g -> v -> h, h also reads f."""
    text = HEAD + """
output f: i32[2]
output g: i32[2]
output h: i32[2]
algorithm {
    f(x, y) = img(x, y) + 5
    w(x, y) = f(x, y) * 2
    g(x, y) = w(x, y) - 1
    v(x, y) = g(x, y) + w(x, y)
    h(x, y) = v(x, y) + f(x, y)
}
""" + SCHEDULES[name]
    w, hgt = size
    img = np.random.default_rng(1).integers(-100, 100, (hgt, w), dtype=np.int32)
    got, expected = native_vs_evaluator(text, size, **{"img": img})
    f = img + 5
    assert (expected[0] == f).all() and (expected[1] == 2 * f - 1).all()
    assert (expected[2] == (2 * f - 1) + 2 * f + f).all()       # by hand
    for a, b in zip(got, expected):
        assert (a == b).all()


def test_output_read_by_a_func_computed_at_another_output():
    """w is computed per row of g and reads output f: f's whole loop comes first."""
    text = HEAD + """
output g: i32[2]
output f: i32[2]
algorithm {
    f(x, y) = img(x, y) - 2
    w(x, y) = f(x, y) + f(x, y)
    g(x, y) = w(x, y) + 1
}
schedule { w.compute_at(g, y) }
"""
    img = np.arange(4 * 3, dtype=np.int32).reshape(3, 4)
    (g, f), (eg, ef) = native_vs_evaluator(text, (4, 3), img=img)
    assert (ef == img - 2).all() and (eg == 2 * (img - 2) + 1).all()
    assert (f == ef).all() and (g == eg).all()
