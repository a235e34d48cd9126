"""`.iir` recursive filters against a direct loop over the recurrence
f(v) = b0 * f(v) + a1 * f(v -+ 1) + ... + ak * f(v -+ k), zero outside [lo, hi)."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_same, load, program, rand_image


def iir(a, axis, lo, hi, b0, coefs, causal):
    """a: (H, W) float32, filtered in place along axis 1 (x) or 0 (y)."""
    a = np.moveaxis(a.copy(), axis, 0)          # the filtered axis first
    b0 = np.float32(b0)
    coefs = [np.float32(c) for c in coefs]
    order = range(lo, hi) if causal else range(hi - 1, lo - 1, -1)
    step = -1 if causal else 1
    zero = np.zeros_like(a[0])
    for v in order:
        acc = b0 * a[v]
        for j, c in enumerate(coefs, start=1):
            src = v + step * j
            acc = acc + c * (a[src] if lo <= src < hi else zero)
        a[v] = acc
    return np.moveaxis(a, 0, axis)


@pytest.mark.parametrize("shape", [(11, 13), (1, 6), (5, 2)])
def test_iir_first_and_second_order_both_directions(rng, shape):
    img = rand_image(rng, shape, np.float32)
    p = load("iir")
    h, w = shape
    ref = iir(img, 1, 0, w, 0.5, [0.5], True)
    ref = iir(ref, 1, 0, w, 0.5, [0.5], False)
    ref = iir(ref, 0, 0, h, 0.25, [1.1, -0.35], True)
    ref = iir(ref, 0, 0, h, 0.25, [1.1, -0.35], False)
    assert_same(p(img=img), ref)
    kw = dict(b0=0.3, a1=0.7, c0=1.0, c1=0.6, c2=0.3)
    ref = iir(img, 1, 0, w, 0.3, [0.7], True)
    ref = iir(ref, 1, 0, w, 0.3, [0.7], False)
    ref = iir(ref, 0, 0, h, 1.0, [0.6, 0.3], True)
    ref = iir(ref, 0, 0, h, 1.0, [0.6, 0.3], False)
    assert_same(p(img=img, **kw), ref)


def test_iir_on_a_subrange_and_third_order(rng):
    """Outside [lo, hi) the Func keeps its values, and reads from there count as zero."""
    p = program("""
pipeline iir_sub
input img: f64[2]
param a3: f64 = 0.125
output out: f64[2]
algorithm {
    rf(x, y) = img(x, y) * 2.0
    rf.iir(-x, 2..img.width - 1, 0.5, [0.25, -0.5, a3])
    rf.iir(+y, 1..4, 1.5, [-0.75])
    out(x, y) = rf(x, y)
}
""")
    img = rng.standard_normal((7, 11))
    h, w = img.shape
    ref = iir64(img * 2.0, 1, 2, w - 1, 0.5, [0.25, -0.5, 0.125], False)
    ref = iir64(ref, 0, 1, 4, 1.5, [-0.75], True)
    out = p(img=img)
    assert_same(out, ref)
    # rows y >= 4 at x = w - 1 lie outside both ranges: untouched
    assert_same(out[4:, w - 1], img[4:, w - 1] * 2.0)


def iir64(a, axis, lo, hi, b0, coefs, causal):
    """The same recurrence in float64 (coefficients given as Python floats)."""
    a = np.moveaxis(a.copy(), axis, 0)
    order = range(lo, hi) if causal else range(hi - 1, lo - 1, -1)
    step = -1 if causal else 1
    for v in order:
        acc = b0 * a[v]
        for j, c in enumerate(coefs, start=1):
            src = v + step * j
            acc = acc + c * (a[src] if lo <= src < hi else 0.0)
        a[v] = acc
    return np.moveaxis(a, 0, axis)


def test_iir_matches_scan_written_by_hand(rng):
    """.iir(+x, ...) is the same as the update written out with an rdom."""
    p = program("""
pipeline iir_vs_scan
input img: f32[2]
output a: f32[2]
output b: f32[2]
algorithm {
    f(x, y) = img(x, y)
    f.iir(+x, 0..img.width, 0.6f, [0.4f])
    a(x, y) = f(x, y)
    g(x, y) = img(x, y)
    rdom r = [0..img.width]
    g(r.x, y) = 0.6f * g(r.x, y) + 0.4f * select(r.x - 1 >= 0, g(max(r.x - 1, 0), y), 0.0f)
    b(x, y) = g(x, y)
}
""")
    img = rand_image(rng, (11, 13), np.float32)
    a, b = p(img=img)
    assert_same(a, b)
    assert_same(a, iir(img, 1, 0, 13, 0.6, [0.4], True))
