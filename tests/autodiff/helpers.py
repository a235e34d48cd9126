"""Central finite differences in f64: the oracle for every derivative test.

Tolerance: |autodiff - finite difference| <= RTOL * (max |finite difference| + 1e-3), RTOL = 1e-6.
With a step of h = 1e-6 (times the value's size) the central difference's truncation error is
O(h^2 f''') ~ 1e-12 and its rounding error ~ eps * |loss| / h ~ 1e-10 * |loss|; 1e-6 leaves room
for losses of size ~1e3, while a wrong or missing term changes an entry by O(1) relative.
Inputs are random and continuous, so no point lies within h of a kink (min, max, clamp, select).
"""
from __future__ import annotations

import numpy as np

import hdsl

RTOL = 1e-6


def finite_differences(p, loss: str, wrt: str, kwargs: dict, h: float = 1e-6):
    """∂loss/∂wrt by central differences, running the forward pipeline on the reference evaluator."""
    value = p.gradient(loss, [])

    def at(**changed):
        return value(**{**kwargs, **changed})[loss]

    x = kwargs[wrt]
    if np.isscalar(x):
        step = h * max(1.0, abs(x))
        return (at(**{wrt: x + step}) - at(**{wrt: x - step})) / (2 * step)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = h * max(1.0, abs(x[i]))
        a, b = x.copy(), x.copy()
        a[i] += step
        b[i] -= step
        out[i] = (at(**{wrt: a}) - at(**{wrt: b})) / (2 * step)
    return out


def assert_close_to_fd(got, fd, what=""):
    got, fd = np.asarray(got), np.asarray(fd)
    err = np.max(np.abs(got - fd))
    scale = np.max(np.abs(fd)) + 1e-3
    assert err <= RTOL * scale, f"{what}: |autodiff - finite differences| = {err:.3g}, scale {scale:.3g}\n" \
                                f"autodiff:\n{got}\nfinite differences:\n{fd}"


def check_gradient(src: str, kwargs: dict, wrt: list[str], loss: str = "loss"):
    """Every gradient in wrt against finite differences; returns the gradients."""
    p = hdsl.loads(src)
    got = p.gradient(loss, wrt)(**kwargs)
    for w in wrt:
        assert_close_to_fd(got[w], finite_differences(p, loss, w, kwargs), w)
    return got
