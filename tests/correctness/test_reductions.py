"""Reductions: histograms, predicated rdoms, inline reductions, scans,
summed-area tables, update definitions in order, collisions."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_same, load, program, rand_image


def test_histogram_computed_lhs(rng):
    img = rng.integers(-40, 300, (11, 13)).astype(np.int16)   # clamps on both sides
    hist = load("histogram").realize((256,), img=img)
    ref = np.zeros(256, np.int32)
    for v in img.ravel():
        ref[min(max(int(v), 0), 255)] += 1
    assert_same(hist, ref)
    assert hist[0] > 0 and hist[255] > 0


def test_histogram_u8_equalization(rng):
    """A histogram, its cumulative sum (a scan) and a lookup through it."""
    p = program("""
pipeline equalize
input img: u8[2]
output out: u8[2]
algorithm {
    rdom r = img
    hist(i32(img(r.x, r.y))) += 1
    cdf(i) = 0
    rdom b = [0..256]
    cdf(b.x) = select(b.x > 0, cdf(b.x - 1), 0) + hist(b.x)
    out(x, y) = u8(clamp(cdf(i32(img(x, y))) * 255 / (img.width * img.height), 0, 255))
}
""")
    img = rand_image(rng, (11, 13), np.uint8)
    hist = np.bincount(img.ravel(), minlength=256)
    cdf = np.cumsum(hist)
    ref = np.clip(cdf[img] * 255 // img.size, 0, 255).astype(np.uint8)
    assert_same(p(img=img), ref)


def test_rdom_where(rng):
    """Sum of the pixels on a checkerboard and inside a disc, with a where clause."""
    p = program("""
pipeline where_sum
input img: i32[2]
output out: i32[1]
algorithm {
    rdom r = [0..img.width, 0..img.height] where (r.x + r.y) % 2 == 0 && (r.x - 6) * (r.x - 6) + (r.y - 5) * (r.y - 5) <= 16
    total(i) = 0
    total(0) += img(r.x, r.y)
    count(i) = 0
    count(0) += 1 + 0 * r.x          # an update uses an rdom only if it names it
    out(i) = select(i == 0, total(0), count(0))
}
""")
    img = rng.integers(-1000, 1000, (11, 13)).astype(np.int32)
    out = p.realize((2,), img=img)
    ys, xs = np.mgrid[0:11, 0:13]
    keep = ((xs + ys) % 2 == 0) & ((xs - 6) ** 2 + (ys - 5) ** 2 <= 16)
    assert_same(out, np.array([img[keep].sum(), keep.sum()], np.int32))


def test_inline_reductions_where(rng):
    p = program("""
pipeline inline_where
input img: f32[1]
param t: f32 = 0.0
output out: f32[1]
algorithm {
    rdom r = [0..img.width] where img(r.x) > t
    out(x) = select(x == 0, sum(img(r.x)), select(x == 1, maximum(img(r.x)), minimum(img(r.x))))
}
""")
    img = rand_image(rng, (17,), np.float32)
    for t in (0.0, 1.5, 10.0):
        out = p.realize((3,), img=img, t=t)
        kept = img[img > np.float32(t)]
        s = np.float32(0)
        for v in kept:                      # in rdom order, one rounding per add
            s = np.float32(s + v)
        mx = kept.max() if kept.size else np.float32(-np.inf)
        mn = kept.min() if kept.size else np.float32(np.inf)
        assert_same(out, np.array([s, mx, mn], np.float32))


def test_inline_reductions_2d(rng):
    """sum / product / maximum / minimum over a 3x3 window, integer types."""
    p = program("""
pipeline inline2d
use boundary
input img: i16[2]
output out: i32[2]
algorithm {
    var x, y
    c = repeat_edge(img)
    rdom r = [-1..2, -1..2]
    let s = sum(i32(c(x + r.x, y + r.y)))
    let pr = product(i32(c(x + r.x, y + r.y) % 5 - 2))
    let mx = maximum(c(x + r.x, y + r.y))
    let mn = minimum(c(x + r.x, y + r.y))
    out(x, y) = s * 7 + pr * 3 + i32(mx) * 5 - i32(mn)
}
""")
    img = rand_image(rng, (11, 13), np.int16)
    pad = np.pad(img.astype(np.int64), 1, mode="edge")
    wins = np.stack([pad[1 + dy:12 + dy, 1 + dx:14 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
    s = wins.sum(0)
    pr = np.prod(np.mod(wins, 5) - 2, axis=0)
    ref = s * 7 + pr * 3 + wins.max(0) * 5 - wins.min(0)
    assert_same(p(img=img), ref.astype(np.int32))


def test_argmax_argmin_ties_first_in_rdom_order(rng):
    # few distinct values: many ties
    img = rng.integers(0, 3, (11, 13)).astype(np.uint8)
    out = load("argminmax")(img=img)
    pad = np.pad(img.astype(np.int64), 1, mode="edge")
    ref = np.zeros((11, 13), np.int64)
    for y in range(11):
        for x in range(13):
            # Halide's argmax starts from (0, 0, type min) and replaces on a strict >
            best, worst = (0, 0, 0), (255, 0, 0)
            for ry in (-1, 0, 1):           # r.y outer
                for rx in (-1, 0, 1):       # r.x innermost
                    v = pad[y + 1 + ry, x + 1 + rx]
                    if v > best[0]:
                        best = (v, rx, ry)
                    if v < worst[0]:
                        worst = (v, rx, ry)
            enc_max = (best[1] + 1) + 3 * (best[2] + 1)
            enc_min = (worst[1] + 1) + 3 * (worst[2] + 1)
            ref[y, x] = enc_max + 10 * (enc_min + 10 * (best[0] + 256 * worst[0]))
    assert_same(out, ref.astype(np.int32))


def test_argmax_argmin_when_no_value_beats_the_initial_one():
    """All values equal to the type's minimum (maximum): the index stays 0, the
    initial value of Halide's argmax (argmin) tuple, even outside the rdom."""
    img = np.zeros((5, 6), np.uint8)
    img[3, 4] = 255
    out = load("argminmax")(img=img)
    # pixel (0, 0): window all 0 -> argmax index (0, 0) (encoded 4), argmin the first 0 at (-1, -1) (encoded 0)
    assert out[0, 0] == 4 + 10 * (0 + 10 * (0 + 256 * 0))
    full = np.full((5, 6), 255, np.uint8)
    out = load("argminmax")(img=full)
    # all 255: argmax the first point (-1, -1) (encoded 0); argmin never beats 255 -> (0, 0) (encoded 4)
    assert (out == 0 + 10 * (4 + 10 * (255 + 256 * 255))).all()


def test_argmax_1d_float_ties():
    p = program("""
pipeline argmax1d
input v: f32[1]
output out: i32[1]
algorithm {
    rdom r = [0..v.width]
    a = argmax(v(r.x))
    b = argmin(v(r.x))
    out(i) = select(i == 0, a[0], b[0])
}
""")
    v = np.array([1, 5, 2, 5, -3, 0, -3, 5], np.float32)
    assert_same(p.realize((2,), v=v), np.array([1, 4], np.int32))


@pytest.mark.parametrize("axis", ["x", "y"])
def test_cumulative_sum_scan(rng, axis):
    other = "y" if axis == "x" else "x"
    extent = "img.width" if axis == "x" else "img.height"
    prev = "r.x - 1, y" if axis == "x" else "x, r.x - 1"
    here = "r.x, y" if axis == "x" else "x, r.x"
    p = program(f"""
pipeline cumsum_{axis}
input img: i32[2]
output out: i32[2]
algorithm {{
    rdom r = [1..{extent}]
    f(x, y) = img(x, y)
    f({here}) = f({prev}) + f({here})
    out(x, y) = f(x, y)
}}
""")
    img = rng.integers(-100, 100, (11, 13)).astype(np.int32)
    ref = np.cumsum(img, axis=1 if axis == "x" else 0).astype(np.int32)
    assert_same(p(img=img), ref)


def test_summed_area_table(rng):
    img = rand_image(rng, (11, 13), np.uint8)
    ref = np.cumsum(np.cumsum(img.astype(np.uint32), axis=1), axis=0).astype(np.uint32)
    assert_same(load("sat")(img=img), ref)


def test_summed_area_box_filter(rng):
    """Box sums from a summed-area table, read at clamped corners."""
    p = program("""
pipeline sat_box
input img: i32[2]
output out: i32[2]
algorithm {
    s(x, y) = img(x, y)
    rdom rx = [1..img.width]
    s(rx.x, y) += s(rx.x - 1, y)
    rdom ry = [1..img.height]
    s(x, ry.x) += s(x, ry.x - 1)
    # sum over img(x-2..x+1, y-2..y+1) clipped to the image; S(-1, .) = 0
    S(x, y) = select(x < 0 || y < 0, 0, s(clamp(x, 0, img.width - 1), clamp(y, 0, img.height - 1)))
    out(x, y) = S(x + 1, y + 1) - S(x - 3, y + 1) - S(x + 1, y - 3) + S(x - 3, y - 3)
}
""")
    img = rng.integers(-50, 50, (11, 13)).astype(np.int32)
    ref = np.zeros_like(img)
    for y in range(11):
        for x in range(13):
            ref[y, x] = img[max(y - 2, 0):y + 2, max(x - 2, 0):x + 2].sum()
    assert_same(p(img=img), ref)


def test_pure_updates_in_order(rng):
    p = program("""
pipeline pure_updates
input img: i32[2]
output out: i32[2]
algorithm {
    f(x, y) = img(x, y)
    f(x, y) = f(x, y) * 2
    f(x, y) += 3
    f(x, y) = f(x, y) * f(x, y) - x
    f(x, y) -= y * 10
    f(x, y) /= 4
    out(x, y) = f(x, y)
}
""")
    img = rng.integers(-1000, 1000, (11, 13)).astype(np.int32)
    ys, xs = np.mgrid[0:11, 0:13]
    v = img.astype(np.int64) * 2 + 3
    v = v * v - xs
    v = v - ys * 10
    v = np.floor_divide(v, 4)              # positive divisor: Euclidean == floor
    assert_same(p(img=img), v.astype(np.int32))


def test_update_reads_other_positions(rng):
    """f(r.x) = f(r.x - 1) + f(r.x) and a Fibonacci-like scan reading two back."""
    p = program("""
pipeline scan1d
input v: i32[1]
output out: i32[1]
algorithm {
    f(x) = v(x)
    rdom r = [1..v.width]
    f(r.x) = f(r.x - 1) + f(r.x)
    g(x) = v(x) % 7
    rdom q = [2..v.width]
    g(q.x) = g(q.x - 1) + g(q.x - 2) * 2 - g(q.x)
    out(x) = f(x) * 1000 + g(x)
}
""")
    v = rng.integers(-20, 20, 15).astype(np.int32)
    f = np.cumsum(v.astype(np.int64))
    g = list(np.mod(v, 7).astype(np.int64))
    for i in range(2, 15):
        g[i] = g[i - 1] + g[i - 2] * 2 - g[i]
    ref = (f * 1000 + np.array(g)).astype(np.int64)
    ref = ((ref + 2**31) % 2**32 - 2**31).astype(np.int32)       # i32 wraps
    assert_same(p(v=v), ref)


def test_colliding_lhs_last_write_wins():
    p = program("""
pipeline collide
input v: i32[1]
output out: i32[1]
algorithm {
    f(x) = -1
    rdom r = [0..10]
    f(r.x % 3) = r.x
    g(x) = 100
    rdom s = [0..4, 0..3]
    g((s.x + s.y) % 4) = s.x * 10 + s.y
    out(x) = f(x) * 1000 + g(x)
}
""")
    out = p.realize((5,), v=np.zeros(3, np.int32))
    f = [-1] * 5
    for rx in range(10):
        f[rx % 3] = rx
    g = [100] * 5
    for sy in range(3):
        for sx in range(4):
            g[(sx + sy) % 4] = sx * 10 + sy
    assert_same(out, np.array([a * 1000 + b for a, b in zip(f, g)], np.int32))


def test_colliding_float_accumulation_in_order(rng):
    """A float histogram-like scatter: additions happen in rdom order, each rounded."""
    p = program("""
pipeline fscatter
input v: f32[1]
output out: f32[1]
algorithm {
    rdom r = [0..v.width]
    acc(i32(r.x * 7 % 4)) += v(r.x)
    out(x) = acc(x)
}
""")
    v = (rng.standard_normal(23) * np.float32(1e4)).astype(np.float32)
    v[::5] = np.float32(1e-3)
    ref = np.zeros(4, np.float32)
    for i in range(23):
        ref[i * 7 % 4] = np.float32(ref[i * 7 % 4] + v[i])
    assert_same(p.realize((4,), v=v), ref)


def test_multiple_updates_with_rdoms_in_order():
    p = program("""
pipeline multi
input v: i32[1]
output out: i32[1]
algorithm {
    f(x) = x
    rdom a = [0..6]
    f(a.x) = f(a.x) * 3
    rdom b = [2..8]
    f(b.x) = f(b.x) - f(b.x - 2)
    f(7 - a.x) = f(7 - a.x) + a.x
    out(x) = f(x)
}
""")
    f = list(range(9))
    for ax in range(6):
        f[ax] = f[ax] * 3
    for bx in range(2, 8):
        f[bx] = f[bx] - f[bx - 2]
    for ax in range(6):
        f[7 - ax] = f[7 - ax] + ax
    assert_same(p.realize((9,), v=np.zeros(1, np.int32)), np.array(f, np.int32))


def test_update_without_rdom_runs_once():
    p = program("""
pipeline once
input v: i32[1]
output out: i32[1]
algorithm {
    rdom r = [0..5]
    count(i) = 0
    count(0) += 1                    # names no rdom: one update, not five
    count(1) += 1 + 0 * r.x          # over r: five
    out(i) = count(i)
}
""")
    assert_same(p.realize((2,), v=np.zeros(1, np.int32)), np.array([1, 5], np.int32))


def test_colliding_scatter_wraps_in_narrow_type(rng):
    p = program("""
pipeline u8hist
input img: u8[2]
output hist: u8[1]
algorithm {
    rdom r = img
    hist(i32(img(r.x, r.y) >> 6)) += u8(3)
}
""")
    img = rand_image(rng, (23, 31), np.uint8)
    counts = np.bincount(img.ravel() >> 6, minlength=4)
    assert_same(hist := p.realize((4,), img=img), ((counts * 3) % 256).astype(np.uint8))
    assert (counts * 3 > 255).any()


def test_colliding_update_that_is_not_a_plain_reduction():
    """f(L) = f(L) * 2 + r.x with colliding L: sequential, in rdom order."""
    p = program("""
pipeline seqcollide
input v: i32[1]
output out: i32[1]
algorithm {
    f(x) = x + 1
    rdom r = [0..4, 0..3]
    f((r.x + 2 * r.y) % 3) = f((r.x + 2 * r.y) % 3) * 2 + r.x - r.y
    out(x) = f(x)
}
""")
    f = [x + 1 for x in range(3)]
    for ry in range(3):
        for rx in range(4):
            k = (rx + 2 * ry) % 3
            f[k] = f[k] * 2 + rx - ry
    assert_same(p.realize((3,), v=np.zeros(1, np.int32)), np.array(f, np.int32))


def test_colliding_float_max_min_with_nan_follow_select_semantics():
    """Halide's max(a, b) is select(a > b, a, b) (and min with <), applied in rdom order."""
    p = program("""
pipeline nanmax
input v: f32[1]
output out: f32[1]
algorithm {
    rdom r = [0..v.width]
    m(i) = 0.0f
    m(r.x % 2) = max(m(r.x % 2), v(r.x))
    n(i) = 0.0f
    n(r.x % 2) = min(n(r.x % 2), v(r.x))
    out(i) = select(i < 2, m(i), n(i - 2))
}
""")
    nan = np.float32(np.nan)
    v = np.array([1, nan, 3, 2, nan, 0, -5, 7, 2, -1], np.float32)
    m = [np.float32(0)] * 2
    n = [np.float32(0)] * 2
    for i, x in enumerate(v):
        a = m[i % 2]
        m[i % 2] = a if a > x else x
        a = n[i % 2]
        n[i % 2] = a if a < x else x
    assert_same(p.realize((4,), v=v), np.array(m + n, np.float32))


def test_inline_maximum_minimum_with_nan_in_rdom_order():
    """maximum(e) folds m = max(m, e) = select(m > e, m, e) from -inf in rdom order."""
    p = program("""
pipeline nanreduce
input v: f32[1]
output out: f32[1]
algorithm {
    rdom r = [0..v.width]
    out(i) = select(i == 0, maximum(v(r.x)), minimum(v(r.x)))
}
""")
    nan = np.float32(np.nan)
    for v in ([1, nan, 3, -2], [nan, 1, 2], [4, 5, nan], [nan, nan]):
        v = np.array(v, np.float32)
        m, n = np.float32(-np.inf), np.float32(np.inf)
        for x in v:
            m = m if m > x else x
            n = n if n < x else x
        assert_same(p.realize((2,), v=v), np.array([m, n], np.float32))


@pytest.mark.parametrize("pred,keep", [
    ("r.x < v.width", lambda x: x < 10),
    ("v.width > r.x && r.x >= 3", lambda x: 3 <= x < 10),
    ("r.x + 2 < v.width + 2 && r.x % 2 == 1", lambda x: x < 10 and x % 2 == 1),
    ("r.x - 1 <= 4", lambda x: x <= 5),
    ("r.x == 7", lambda x: x == 7),
    ("r.x > 30", lambda x: False),
])
def test_where_guards_reads_outside_the_input(pred, keep):
    """Halide trims an rdom by its predicate's simple conditions (the predicate is an
    if around the update): the input is never read where the predicate fails."""
    p = program(f"""
pipeline guarded
input v: i32[1]
output a: i32[1]
algorithm {{
    rdom r = [0..20] where {pred}
    a(x) = 0
    a(0) += v(r.x)
    a(1) += 1 + r.x * 0
}}
""")
    v = np.arange(10, dtype=np.int32) * 3 + 1
    kept = [x for x in range(20) if keep(x)]
    assert_same(p.realize((2,), v=v), np.array([sum(int(v[x]) for x in kept), len(kept)], np.int32))


def test_where_triangle_and_data_dependent_predicates(rng):
    p = program("""
pipeline tri
input m: i32[2]
output out: i32[1]
algorithm {
    rdom t = [0..m.width, 0..m.height] where t.y <= t.x && t.x < m.height
    rdom d = [0..m.width, 0..m.height] where m(d.x, d.y) > 0
    out(i) = select(i == 0, sum(m(t.x, t.y)), sum(m(d.x, d.y)))
}
""")
    m = rng.integers(-9, 10, (7, 9)).astype(np.int32)
    ys, xs = np.mgrid[0:7, 0:9]
    tri = (ys <= xs) & (xs < 7)
    assert_same(p.realize((2,), m=m), np.array([m[tri].sum(), m[m > 0].sum()], np.int32))


def test_per_channel_histogram_over_a_3d_rdom(rng):
    """rdom r = img over a 3-channel image: r.z is the channel; r.x innermost."""
    p = program("""
pipeline colour_hist
input img: u8[3]
output hist: i32[2]
output order: i32[1]
algorithm {
    rdom r = img
    hist(i32(img(r.x, r.y, r.z)) >> 5, r.z) += 1
    # the last point visited wins: (x, y, c) of the last pixel in rdom order
    last(i) = 0
    last(0) = r.x
    last(1) = r.y
    last(2) = r.z
    order(i) = last(i)
}
""")
    img = rand_image(rng, (7, 9, 3), np.uint8)
    hist, order = p.realize([[8, 3], [3]], img=img)
    # hist(b, c) comes back in NumPy layout: [c, b]
    ref = np.stack([np.bincount(img[..., c].ravel() >> 5, minlength=8) for c in range(3)])
    assert_same(hist, ref.astype(np.int32))
    assert_same(order, np.array([8, 6, 2], np.int32))


def test_reduction_identities_without_pure_definition():
    """+= and -= start from 0, *= and /= from 1 (Halide's FuncRef operators)."""
    p = program("""
pipeline identities
input v: i32[1]
output out: i32[1]
algorithm {
    rdom r = [0..7]
    a(i32(r.x % 3)) += r.x
    s(i32(r.x % 3)) -= r.x
    m(i32(r.x % 3)) *= r.x + 1
    d(i32(r.x % 3)) /= 2 - r.x % 2 * 3
    out(i) = a(i) * 1000000 + s(i) * 10000 + m(i) * 10 + d(i)
}
""")
    a, s, m, d = [0] * 3, [0] * 3, [1] * 3, [1] * 3
    for rx in range(7):
        k = rx % 3
        a[k] += rx
        s[k] -= rx
        m[k] *= rx + 1
        div = 2 - rx % 2 * 3
        d[k] = d[k] // div if div > 0 else -(d[k] // -div)      # Euclidean
    ref = [a[i] * 1000000 + s[i] * 10000 + m[i] * 10 + d[i] for i in range(3)]
    assert_same(p.realize((3,), v=np.zeros(1, np.int32)), np.array(ref, np.int32))
