"""Helpers for the correctness tests.

Every test runs a program through hdsl and compares with a NumPy reference
written in the test from the math of the operation (never from the
evaluator's code). Images are small and of odd sizes so that edges, tails
and transposition mistakes show.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import hdsl

PROGRAMS = Path(__file__).parent / "programs"


def load(name: str) -> hdsl.Pipeline:
    """A program from tests/correctness/programs/NAME.hl."""
    return hdsl.load(PROGRAMS / f"{name}.hl")


def program(text: str, name: str = "<test>") -> hdsl.Pipeline:
    return hdsl.loads(text, name)


def rand_image(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-4.0, 4.0, shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape, dtype=dtype)


def assert_same(actual, expected):
    """Exact equality: same dtype, same shape, same bits (NaN == NaN)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind == "f":
        a = actual.view(f"u{actual.dtype.itemsize}")
        b = expected.view(f"u{expected.dtype.itemsize}")
        bad = a != b
    else:
        bad = actual != expected
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{int(bad.sum())} of {bad.size} elements differ; first at {idx} (row, col, ...): "
                             f"got {actual[idx]!r}, expected {expected[idx]!r}")
