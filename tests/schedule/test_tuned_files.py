"""The schedules `hdsl tune` found for the benchmark (benchmarks/tuned/APP.sched, measured in
benchmarks/AUTOSCHED.md) give exactly the reference evaluator's values on their example at a
small odd size. The search checked them only against the hand-written schedule's output at
the app's full size (benchmarks/autosched.py: tune_app); this checks them against the
evaluator, at sizes where tiles, vectors and strips end part-way."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.frontend.elaborate import check_source
from hdsl.schedule.auto import block_text

from .auto_inputs import EX, EXAMPLE_INPUTS, example_args

TUNED = Path(__file__).resolve().parents[2] / "benchmarks" / "tuned"
NAMES = sorted(p.stem for p in TUNED.glob("*.sched"))
# (the tuned schedules that compile in a few seconds run in CI; the rest are `slow`)
QUICK = {"blur", "unsharp", "bilateral_grid"}


def test_every_tuned_schedule_is_of_an_example_with_test_inputs():
    assert NAMES and set(NAMES) <= set(EXAMPLE_INPUTS), NAMES


def _check(name):
    path = EX / f"{name}.hl"
    text = (TUNED / f"{name}.sched").read_text()
    src = path.read_text() + "\n" + block_text(text, "tuned")
    p = hdsl.Pipeline(check_source(src, str(path)))
    c = p.compile("host", schedule="tuned")
    size, args = example_args(p, name)
    got = c(**args) if size is None else c.realize(size, **args)
    want = p(**args) if size is None else p.realize(size, **args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w, equal_nan=True), f"{name}: the tuned schedule's output differs from the evaluator's"


@pytest.mark.parametrize("name", [n for n in NAMES if n in QUICK])
def test_tuned_schedule_equals_the_evaluator(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if n not in QUICK])
def test_tuned_schedule_equals_the_evaluator_slow(name):
    _check(name)
