"""Every corpus pipeline, compiled for the host, gives exactly the evaluator's
values: with its default schedule and with no schedule at all (everything
inlined, outputs at the root), on odd sizes, the tiniest sizes and sizes
smaller than the schedule's split factors, and for each param set."""
from __future__ import annotations

import functools

import pytest

from compiler_corpus import CORPUS, SIZES, compare, load, make_args, names, reference, seed_of

PLAIN = "\nschedule plain {\n}\n"


@functools.lru_cache(maxsize=None)
def compiled(name: str, schedule: str | None):
    spec = CORPUS[name]
    p = load(spec, PLAIN)
    return p, p.compile("host", schedule=schedule)


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
