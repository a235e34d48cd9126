"""Every corpus pipeline under the automatic schedule (`--schedule auto`) gives exactly the
evaluator's values: CI checks one odd size and the first param set; the `slow` sweep every
size of the corpus (the tiniest ones, those smaller than a tile) and every param set."""
from __future__ import annotations

import functools

import pytest

from compiler_corpus import CORPUS, SIZES, compare, load, reference, seed_of


@functools.lru_cache(maxsize=None)
def compiled(name: str):
    p = load(CORPUS[name])
    return p.compile("host", schedule="auto")


def check(name, sizes, param_sets):
    spec = CORPUS[name]
    c = compiled(name)
    for i in param_sets:
        params = spec.params[i]
        for w, h in sizes:
            args, expected = reference(spec, w, h, seed_of(name, w, h, i, "auto"), params)
            compare(spec, c.realize(spec.sizes(w, h), **args), expected,
                    f"{name} schedule=auto params={params} size={(w, h)}: ")


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_auto_schedule(name):
    check(name, SIZES[:1], [0])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_auto_schedule_every_size_and_param_set(name):
    check(name, SIZES, range(len(CORPUS[name].params)))
