"""Mutants of the examples (tests/property/mutants.py) never meet an internal error.

Every mutant is checked, lowered (`hdsl check --lower`), run by the evaluator on small
random inputs and, for a subset, compiled and run natively; each stage must end in a
positioned HdslError, or succeed. Run-time errors about the inputs (no position: they are
about the data) are fine when both targets report them. CI runs a few hundred mutants; `make
test-slow` runs thousands. A failure lists every finding with the command that reproduces it.
"""
from __future__ import annotations

import os

import pytest

from mutants import all_examples, corpus, run_mutant

# (the evaluator is slowest on level_set and camera_pipe; every example is in every sweep)
CI_MUTANTS = int(os.environ.get("HDSL_MUTANTS", "160"))
CI_NATIVE = int(os.environ.get("HDSL_NATIVE_MUTANTS", "12"))
SLOW_MUTANTS = 3000
SLOW_NATIVE = 400
MOST_SLOW = 0.05         # mutants over their time limit (set aside) may be at most this share


def sweep(count: int, native: int, first_seed: int, seconds: float):
    examples = all_examples()
    outcomes = []
    # `native` mutants that reach native compilation (most fail to check; counting attempts
    # instead made the sweep depend on which examples come first in the cycle)
    native_left = native
    for example, seed in corpus(examples, count, first_seed):
        o = run_mutant(example, seed, native=native_left > 0, seconds=seconds)
        if any(stage.split(":")[0].split(" ")[0] == "compile" for stage in o.stages):
            native_left -= 1
        outcomes.append(o)
    findings = [o for o in outcomes if o.finding]
    report = "\n".join(f"{o}\n    reproduce: .venv/bin/python tests/property/mutants.py {o.example} {o.seed}"
                       f"{' --native' if 'compile' in ' '.join(o.stages) else ''}" for o in findings)
    assert not findings, f"{len(findings)} of {count} mutants found a problem:\n{report}"
    slow = sum(o.slow for o in outcomes)
    assert slow <= MOST_SLOW * count, f"{slow} of {count} mutants ran over their time limit"
    # the corpus reaches past the parser: a share of mutants checks, and some run
    reached = {stage.split(":")[0].split(" ")[0] for o in outcomes for stage in o.stages}
    assert {"check", "lower", "interp"} <= reached, reached
    if native:
        assert any("compile ok" in o.stages for o in outcomes)
    return outcomes


@pytest.mark.parametrize("part", [0, 1])
def test_mutants_of_the_examples(part):
    """Two halves, so that `-n 2` runs them side by side."""
    half = CI_MUTANTS // 2
    sweep(half, CI_NATIVE // 2, first_seed=part * 100_000, seconds=5.0)


@pytest.mark.slow
@pytest.mark.parametrize("part", range(8))
def test_many_mutants_of_the_examples(part):
    per = SLOW_MUTANTS // 8
    sweep(per, SLOW_NATIVE // 8, first_seed=1_000_000 + part * 100_000, seconds=20.0)
