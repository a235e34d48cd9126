"""Helpers for the stdlib tests.

Each test writes a small pipeline that `use`s a stdlib module, runs it on
the reference evaluator and compiled for the host, checks that the two agree
(bit for bit, or within a few ulp where the spec lets math library functions
such as exp, sin and pow differ), and compares the evaluator's result with a
NumPy implementation written in the test from the math of the operation.
"""
from __future__ import annotations

import functools
import re

import numpy as np

import hdsl

F32 = np.float32


@functools.lru_cache(maxsize=None)
def _pipelines(src: str, name: str):
    p = hdsl.loads(src, name)
    return p, p.compile("host")


def output_names(src: str) -> list[str]:
    return re.findall(r"^output\s+(\w+)", src, re.M)


def run_both(src: str, name: str, sizes=None, ulps: dict[str, int] | None = None,
             atol: dict[str, float] | None = None, **kwargs) -> dict:
    """Realize every output of `src` on the evaluator and natively, check that they agree, and
    return the evaluator's outputs by name.

    The two must be identical, except in outputs that use math library functions (exp, sin,
    pow), which the spec lets differ by a few ulp: `ulps` names outputs that may differ by that
    many units in the last place, `atol` outputs that may differ by that much (where those few
    ulp are amplified, e.g. by the difference of nearly equal values). `sizes`: as for
    Pipeline.realize; None takes the first input's size."""
    p, c = _pipelines(src, name)
    if sizes is None:
        ev, nat = p(**kwargs), c(**kwargs)
    else:
        ev, nat = p.realize(sizes, **kwargs), c.realize(sizes, **kwargs)
    names = output_names(src)
    if len(names) == 1:
        ev, nat = (ev,), (nat,)
    ulps, atol = ulps or {}, atol or {}
    out = {}
    for n, a, b in zip(names, ev, nat):
        try:
            if ulps.get(n):
                assert_ulps(b, a, ulps[n])
            elif atol.get(n):
                assert b.dtype == a.dtype and b.shape == a.shape
                np.testing.assert_allclose(b, a, rtol=0, atol=atol[n])
            else:
                assert_same(b, a)
        except AssertionError as e:
            raise AssertionError(f"output '{n}': compiled and evaluated results differ: {e}") from None
        out[n] = a
    return out


def assert_same(actual, expected):
    """Exact equality: same dtype, same shape, same bits (NaN == NaN)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind == "f":
        bad = actual.view(f"u{actual.dtype.itemsize}") != expected.view(f"u{expected.dtype.itemsize}")
    else:
        bad = actual != expected
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{int(bad.sum())} of {bad.size} elements differ; first at {idx} (row, col, ...): "
                             f"got {actual[idx]!r}, expected {expected[idx]!r}")


def assert_ulps(actual, expected, n: int):
    """f32 arrays within n units in the last place of each other (same sign and finite)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype == np.float32, f"dtypes {actual.dtype}, {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    def ordered(a):      # an integer line on which neighbouring floats are 1 apart
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    diff = np.abs(ordered(actual) - ordered(expected))
    if (diff > n).any():
        idx = tuple(int(i) for i in np.argwhere(diff > n)[0])
        raise AssertionError(f"{int((diff > n).sum())} elements differ by more than {n} ulp; worst "
                             f"{int(diff.max())} ulp; first at {idx}: got {actual[idx]!r}, expected {expected[idx]!r}")


def assert_close(actual, expected, atol: float, rtol: float = 0.0):
    """f32 result against a float64 reference."""
    actual = np.asarray(actual)
    assert actual.dtype == np.float32, actual.dtype
    np.testing.assert_allclose(actual.astype(np.float64), np.asarray(expected, np.float64), rtol=rtol, atol=atol)


def edge(img):
    """repeat_edge as a function of integer coordinate arrays: img(x, y) with x, y clamped."""
    h, w = img.shape[:2]
    return lambda x, y: img[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)]


def grid(w, h):
    """Coordinate arrays x, y of shape (h, w) for the output box [0, w) x [0, h)."""
    y, x = np.mgrid[0:h, 0:w]
    return x, y
