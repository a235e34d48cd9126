"""Unrolled loops in the LLVM code generator (hdsl/codegen/llvm.py: unrolled_for,
unrolled_hoist; hdsl/codegen/cpu.py: _unrolled_around_vector), the shape of interpolate's
output (issue 22): `split(x, xo, xi, 16).reorder(xi, c, xo, y).unroll(c).vectorize(xi)`,
as Halide's apps/interpolate/interpolate_generator.cpp schedules its `normalize`.

- the lets and guards of the vector lanes (a split's tail clamp and guard) are made once
  around the unrolled channels, and what every channel shares (the alpha it divides by) is
  computed once, not once per channel;
- a value that an iteration could change (a load of a buffer the body writes, an update
  reading its own earlier channel) is not reused;
- every schedule gives the reference evaluator's values, at even, odd and negative output
  origins (`x / 2` of a vectorized x with negative lanes: floor division), checked also
  against NumPy written out from the definitions."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

NORM = """
pipeline norm
input img: f32[3]
output out: f32[3]
algorithm {
    alpha(x, y) = img(x, y, 3) * 0.5f + 0.25f
    up(x, y, c) = (img(x / 2, y, c) + img((x + 1) / 2, y, c)) * 0.5f
    out(x, y, c) = (img(x, y, c) + up(x, y, c)) / alpha(x, y)
}
schedule split16 { out.bound(c, 0, 3).split(x, xo, xi, 16).reorder(xi, c, xo, y).unroll(c).vectorize(xi) }
schedule vec8 { out.bound(c, 0, 3).split(x, xo, xi, 8).reorder(xi, c, xo, y).unroll(c).vectorize(xi).parallel(y) }
schedule inner { out.bound(c, 0, 3).reorder(c, x, y).vectorize(x, 16).unroll(c) }
"""


def _norm_numpy(img, x0, y0, w, h):
    """out of NORM over [x0, x0 + w) x [y0, y0 + h) x [0, 3), img indexed [c, y, x] from 0
    (the caller's origin shift: the input's x starts at x0 // 2 - 1)."""
    out = np.zeros((3, h, w), np.float32)
    for j in range(h):
        for i in range(w):
            x, y = x0 + i, y0 + j
            a = np.float32(img[3, y, x] * np.float32(0.5) + np.float32(0.25))
            for c in range(3):
                up = (img[c, y, x // 2] + img[c, y, (x + 1) // 2]) * np.float32(0.5)
                out[c, j, i] = (img[c, y, x] + up) / a
    return out


def _image(seed, x_hi, y_hi):
    rng = np.random.RandomState(seed)
    return (rng.rand(4, y_hi, x_hi).astype(np.float32) + np.float32(0.1))


@pytest.mark.parametrize("schedule", ["split16", "vec8", "inner"])
@pytest.mark.parametrize("x0", [0, 1, 6, 7])
def test_unrolled_channels_give_the_evaluators_values(schedule, x0):
    """Widths that leave a tail (37, 53), outputs starting at even and odd x: the evaluator's
    values, and NumPy's."""
    p = hdsl.loads(NORM, "norm.hl")
    w, h = (37, 5) if x0 % 2 else (53, 4)
    img = _image(x0, x0 + w + 2, h)
    got = p.compile("host", schedule=schedule).realize((w, h, 3), min=(x0, 0, 0), img=img.transpose(1, 2, 0))
    ref = p.realize((w, h, 3), min=(x0, 0, 0), img=img.transpose(1, 2, 0))
    assert np.array_equal(got, ref)
    want = _norm_numpy(img, x0, 0, w, h)
    assert np.allclose(ref.transpose(2, 0, 1), want, rtol=1e-6, atol=0)


NEG = """
pipeline neg
input img: i32[2]
output out: i32[3]
algorithm {
    out(x, y, c) = img(x / 2 + 20, y) * (c + 1) + img((x + 1) / 2 + 20, y) - img(x / 4 + 30, y) * 7 + x % 2
}
schedule s { out.bound(c, 0, 3).split(x, xo, xi, 16).reorder(xi, c, xo, y).unroll(c).vectorize(xi) }
"""


@pytest.mark.parametrize("x0", [-40, -33, -17, -1])
def test_vector_indices_divided_by_constants_at_negative_x(x0):
    """`x / 2`, `(x + 1) / 2`, `x / 4` and `x % 2` of a vectorized x that runs through negative
    values: floor division and a non-negative remainder (Euclidean, as the evaluator),
    against NumPy's // and %."""
    p = hdsl.loads(NEG, "neg.hl")
    w, h = 45, 3
    img = np.random.RandomState(-x0).randint(-999, 999, (h, 60)).astype(np.int32)
    got = p.compile("host", schedule="s").realize((w, h, 3), min=(x0, 0, 0), img=img)
    ref = p.realize((w, h, 3), min=(x0, 0, 0), img=img)
    assert np.array_equal(got, ref)
    x = np.arange(x0, x0 + w)
    want = np.stack([img[:, x // 2 + 20] * (c + 1) + img[:, (x + 1) // 2 + 20] - img[:, x // 4 + 30] * 7 + x % 2
                     for c in range(3)], axis=-1)
    assert np.array_equal(ref, want)


def test_what_the_channels_share_is_computed_once():
    """In the vectorized loops of split16, alpha is made once per vector of pixels and divided
    into all three channels: every 16-lane division's divisor is one value shared by three
    divisions (before: each channel made its own alpha, three divisors of one use each)."""
    ir = compiled_form(hdsl.loads(NORM, "norm.hl").ir, "llvm", schedule="split16")
    divisors = re.findall(r"fdiv <16 x float> %[^,]*, (%\S+)", ir)
    assert len(divisors) >= 3
    assert all(divisors.count(d) == 3 for d in divisors), divisors


UPDATE = """
pipeline upd
input img: i32[2]
output out: i32[2]
algorithm {
    rdom r = [0..3]
    out(x, c) = img(x, c) * 3 + c
    out(x, r.x) = out(x, r.x) + out(x, 0) * 2
}
schedule s {
    out.bound(c, 0, 3).split(x, xo, xi, 8).reorder(xi, c, xo).vectorize(xi).unroll(c)
    out.update(0).split(x, xo, xi, 8).reorder(xi, r.x, xo).vectorize(xi).unroll(r.x)
}
"""


def test_a_load_of_what_the_body_writes_is_not_reused():
    """The update's channel 0 rewrites out(x, 0), which channels 1 and 2 then read: the value
    read by channel 0 must not be reused by the others (it is the same expression)."""
    p = hdsl.loads(UPDATE, "upd.hl")
    img = np.random.RandomState(9).randint(-99, 99, (3, 29)).astype(np.int32)
    got = p.compile("host", schedule="s").realize((29, 3), img=img)
    ref = p.realize((29, 3), img=img)
    assert np.array_equal(got, ref)
    pure = img * 3 + np.arange(3)[:, None]      # (numpy's rows are c)
    first = pure[0] * 3                         # channel 0: itself plus twice itself
    want = np.stack([first, pure[1] + first * 2, pure[2] + first * 2])
    assert np.array_equal(ref, want)


GUARDED = """
pipeline guarded
input img: f32[2]
param k: i32 = 1
output out: f32[2]
algorithm {
    heavy(x, y) = sqrt(img(x, y) * img(x, y) + 1.0f) * 3.0f - img(x, y) / 7.0f + sqrt(img(x, y) + 2.0f)
    out(x, c) = select(k > c, heavy(x, 0) + f32(c), img(x, 1) * f32(c + 1)) + heavy(x, 0)
}
schedule s { out.bound(c, 0, 4).split(x, xo, xi, 8).reorder(xi, c, xo).unroll(c).vectorize(xi) }
"""


@pytest.mark.parametrize("k", [0, 1, 3, 9])
def test_values_made_inside_a_branch_are_not_reused_outside_it(k):
    """A select on a run-time condition with costly arms is a branch per channel
    (vector_select); heavy(x, 0), made inside channel 0's branch and also outside it, must be
    available on every path (LLVM's verifier rejects a use its definition does not
    dominate), and the values are the evaluator's for every k."""
    p = hdsl.loads(GUARDED, "guarded.hl")
    img = np.random.RandomState(k).rand(2, 21).astype(np.float32)
    got = p.compile("host", schedule="s").realize((21, 4), img=img, k=k)
    ref = p.realize((21, 4), img=img, k=k)
    assert np.array_equal(got, ref)


CONSTANT_CONDITIONS = """
pipeline cmpc
input img: u8[2]
output out: i32[3]
algorithm {
    big(c) = select(u8(c) * u8(100) > u8(150), 1000, 0)
    out(x, y, c) = select(c < 2, i32(img(x, y)) * (c + 1), 7) + big(c) + select(c - 1 >= 0, 10, 20)
}
schedule s { out.bound(c, 0, 4).split(x, xo, xi, 8).reorder(xi, c, xo, y).vectorize(xi).unroll(c) }
"""


def test_conditions_on_an_unrolled_var_are_constants():
    """Each unrolled channel's c is a constant, so its comparisons are folded in codegen
    (unsigned ones by their wrapped value: u8(3) * 100 is 44, not above 150): the
    evaluator's values, and NumPy's."""
    p = hdsl.loads(CONSTANT_CONDITIONS, "cmpc.hl")
    img = np.random.RandomState(1).randint(0, 255, (4, 19)).astype(np.uint8)
    got = p.compile("host", schedule="s").realize((19, 4, 4), img=img)
    ref = p.realize((19, 4, 4), img=img)
    assert np.array_equal(got, ref)
    i = img.astype(np.int32)
    want = np.stack([i + 20, i * 2 + 10 + 0, np.full_like(i, 7 + 1000 + 10), np.full_like(i, 7 + 0 + 10)], axis=-1)
    assert np.array_equal(ref, want)


@pytest.mark.parametrize("x0, y0", [(-2 ** 31 + 40, 3), (-2 ** 31 + 41, -5), (2 ** 31 - 200, 7), (2 ** 31 - 199, 0)])
def test_interleaved_accesses_at_the_ends_of_the_i32_range(x0, y0):
    """`x / 2` and `(x + 1) / 2` of a vectorized x near the ends of the i32 range (the input
    shifted so that they land in it): the evaluator's values and NumPy's."""
    xh = x0 // 2
    src = f"""
pipeline edge2
input img: i32[2]
output out: i32[2]
algorithm {{
    out(x, y) = img(x / 2 - ({xh}), y - ({y0})) * 3 + img((x + 1) / 2 - ({xh}), y - ({y0})) + (x & 7)
}}
schedule vec {{ out.vectorize(x, 16) }}
"""
    p = hdsl.loads(src, "edge2.hl")
    w, h = 53, 3
    img = np.random.RandomState(5).randint(-1000, 1000, (h, w // 2 + 3)).astype(np.int32)
    got = p.compile("host", schedule="vec").realize((w, h), min=(x0, y0), img=img)
    ref = p.realize((w, h), min=(x0, y0), img=img)
    assert np.array_equal(got, ref)
    x = np.arange(x0, x0 + w, dtype=np.int64)
    want = img[:, x // 2 - xh] * 3 + img[:, (x + 1) // 2 - xh] + (x & 7)
    assert np.array_equal(ref, want.astype(np.int32))
