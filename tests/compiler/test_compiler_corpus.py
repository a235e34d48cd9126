"""Every corpus pipeline, compiled for HDSL_TEST_TARGET (default host; tests/targets.py), gives exactly the evaluator's
values: with its default schedule and with no schedule at all (everything
inlined, outputs at the root), on odd sizes, the tiniest sizes and sizes
smaller than the schedule's split factors, and for each param set."""
from __future__ import annotations

import functools

import numpy as np

import pytest

from tests.targets import TARGET
from compiler_corpus import CORPUS, SIZES, compare, load, make_args, names, reference, seed_of

PLAIN = "\nschedule plain {\n}\n"


@functools.lru_cache(maxsize=None)
def compiled(name: str, schedule: str | None):
    spec = CORPUS[name]
    p = load(spec, PLAIN)
    return p, p.compile(TARGET, schedule=schedule)


def check(name, schedule, params_index):
    spec = CORPUS[name]
    p, c = compiled(name, schedule)
    params = spec.params[params_index]
    for w, h in SIZES:
        args, expected = reference(spec, w, h, seed_of(name, w, h, params_index), params)
        size = spec.sizes(w, h)
        got = c.realize(size, **args)
        compare(spec, got, expected, f"{name} schedule={schedule or 'default'} params={params} size={size}: ")


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 12
    for spec in CORPUS.values():
        assert spec.path.exists(), spec.path


@pytest.mark.parametrize("name", names())
def test_default_schedule(name):
    for i in range(len(CORPUS[name].params)):
        check(name, None, i)


@pytest.mark.parametrize("name", names())
def test_no_schedule(name):
    check(name, "plain", 0)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_call_with_default_size(name):
    """p(img=...) (the output takes the first input's size) agrees too."""
    spec = CORPUS[name]
    p, c = compiled(name, None)
    args = make_args(spec, 13, 11, seed_of(name, "call"))
    if spec.sizes(13, 11) != (13, 11) or spec.unbounded:
        pytest.skip("the output's size is not the input's")
    compare(spec, c(**args), p(**args), f"{name}: ")


@pytest.mark.parametrize("name,schedule", [
    ("feed_chain", "w.compute_root()"),          # issue 23 item 1's own program
    ("feed_chain", "w.compute_at(g, y)"),
    ("feed_chain", ""),
    ("multi_feed", "rs.compute_root()"),
    ("multi_feed", "w.compute_root()\n rs.compute_root()"),
    ("multi_feed", "v.compute_root()\n rs.compute_root()"),
    ("multi_feed", "w.compute_at(g, y)\n rs.compute_root()"),
])
def test_outputs_feeding_each_other(name, schedule):
    """Issue 23 item 1: a Func computed at the root that reads an output must be computed after
    that output (Halide realizes in dependence order, outputs included); native code computed
    it first and read the output's uninitialised memory. feed_chain's g is img + 1."""
    spec = CORPUS[name]
    block = "\nschedule s {\n" + "".join(f"    {l.strip()}\n" for l in schedule.splitlines()) + "}\n"
    p = load(spec, block)
    for w, h in ((9, 5), (1, 1), (17, 3)):
        args, expected = reference(spec, w, h, seed_of(name, w, h))
        if name == "feed_chain":
            assert expected[1].tolist() == (args["img"] + np.uint8(1)).tolist()
        compare(spec, p.compile(TARGET, schedule="s").realize(spec.sizes(w, h), **args), expected,
                f"{name} {schedule!r} {w}x{h}: ")
