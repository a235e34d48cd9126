"""tile_iir(v, n): the tiled form of recursive filters (Chaurasia et al. 2015) against the
evaluator, which runs the filters serially. Float results agree to rounding (sums are
associated differently: a stated tolerance); integer results are exact (wrapping
arithmetic is a ring, so the tiled algebra holds bit for bit)."""
from __future__ import annotations

import numpy as np
import pytest

from scipy.signal import lfilter

import hdsl
from tests.targets import GPU_TARGET, requires

SIZES = [(1, 1), (5, 7), (16, 16), (33, 17), (40, 9), (3, 64)]

FLOAT = """
pipeline iir
input  img: f32[2]
param  b0: f32 = 0.5
param  a1: f32 = 0.5
output out: f32[2]
algorithm {
    rf(x, y) = img(x, y)
    rf.iir(+x, 0..img.width, b0, [a1])
    rf.iir(-x, 0..img.width, b0, [a1])
    rf.iir(+y, 0..img.height, 0.25f, [1.1f, -0.35f])
    rf.iir(-y, 0..img.height, 0.25f, [1.1f, -0.35f])
    out(x, y) = rf(x, y)
}
schedule both { rf.compute_root().tile_iir(x, 8).tile_iir(y, 16) }
schedule x_only {
    rf.compute_root().tile_iir(x, 4)
    rf.update(2).vectorize(x, 8)
    rf.update(3).vectorize(x, 8)
}
"""


@pytest.mark.parametrize("schedule", ["both", "x_only"])
@pytest.mark.parametrize("h,w", SIZES)
def test_float_filters_match_the_serial_filter(schedule, h, w):
    p = hdsl.loads(FLOAT, "iir.hl")
    img = np.random.RandomState(h * 100 + w).rand(h, w).astype(np.float32)
    ref = p(img=img)
    got = p.compile("host", schedule=schedule)(img=img)
    # f32, a handful of terms per point: within a few ulp of values of order 1
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


INT = """
pipeline iir_int
input  img: i32[1]
output out: i32[1]
algorithm {
    rf(x) = img(x)
    rf.iir(+x, 0..img.width, 3, [2, -1, 5])
    rf(x) = rf(x) + x                          # an ordinary update between two filters
    rf.iir(-x, 1..img.width - 1, -2, [7])      # a range short of the ends: they keep rf's values
    out(x) = rf(x)
}
schedule s { rf.compute_root().tile_iir(x, 5) }
"""


@pytest.mark.parametrize("w", [3, 4, 5, 6, 11, 37])     # (the second range is empty below 3: see docs)
def test_integer_filters_are_exact(w):
    p = hdsl.loads(INT, "iir_int.hl")
    img = np.random.RandomState(w).randint(-1000, 1000, w).astype(np.int32)
    ref = p(img=img)
    got = p.compile("host", schedule="s")(img=img)
    assert np.array_equal(got, ref)
    # and the evaluator's filter is the textbook one (values wrap in i32)
    y = img.astype(np.int64)
    z = np.zeros(w, np.int64)
    for i in range(w):
        z[i] = 3 * y[i] + sum(c * z[i - j] for j, c in ((1, 2), (2, -1), (3, 5)) if i - j >= 0)
        z[i] = (z[i] + 2**31) % 2**32 - 2**31
    z = z + np.arange(w)
    for i in range(w - 2, 0, -1):
        z[i] = -2 * z[i] + (7 * z[i + 1] if i + 1 <= w - 2 else 0)
        z[i] = (z[i] + 2**31) % 2**32 - 2**31
    assert np.array_equal(ref, z.astype(np.int32))


TWO_OUTPUTS = """
pipeline two
input  img: i32[1]
output a: i32[1]
output b: i32[1]
algorithm {
    a(x) = img(x) * 2
    b(x) = img(x)
    b.iir(+x, 0..img.width, 3, [2])
}
schedule s {
    a.split(x, xo, xi, 8)
    b.tile_iir(x, 4)
}
"""


@pytest.mark.parametrize("w", [1, 3, 7, 8, 9, 64, 100])
def test_a_tiled_output_beside_an_output_split_by_hand(w):
    """The split of `a` makes a second form of the code, with splits shifted inwards for
    outputs at least 8 wide; the tiled output `b` takes its last stage's splits, which must
    stay guarded there (this was an internal error: "splits shifted inwards without a size
    requirement"). Checked against the textbook recurrence (wrapping in i32), both forms."""
    p = hdsl.loads(TWO_OUTPUTS, "two.hl")
    img = np.random.RandomState(w).randint(-1000, 1000, w).astype(np.int32)
    a, b = p.compile("host", schedule="s")(img=img)
    assert np.array_equal(a, img * 2)
    z = np.zeros(w, np.int64)
    for i in range(w):
        z[i] = 3 * int(img[i]) + (2 * z[i - 1] if i else 0)
        z[i] = (z[i] + 2**31) % 2**32 - 2**31
    assert np.array_equal(b, z.astype(np.int32))


def test_a_producer_computed_inside_the_filtered_func_moves_to_the_root():
    """c.compute_at(rf, x): after tile_iir, rf's pure definition (which read c) belongs to a
    new Func, so c is computed at the root instead (was an InternalError, unbound variable)."""
    text = """
pipeline iir_at
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    rf(x, y) = c(x, y) * 2.0f
    rf.iir(+x, 0..img.width, 0.5f, [0.5f])
    out(x, y) = rf(x, y)
}
schedule s {
    out.tile(x, y, t1, t2, 2, 2)
    rf.compute_root().tile_iir(x, 2)
    c.compute_at(rf, x)
}
"""
    p = hdsl.loads(text, "iir_at.hl")
    for h, w in ((1, 1), (3, 5), (8, 9)):
        img = np.random.RandomState(w).rand(h, w).astype(np.float32)
        np.testing.assert_allclose(p.compile("host", schedule="s")(img=img), p(img=img), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("schedule", ["split_first", "producer_in_consumer"])
def test_tile_iir_with_other_directives(schedule):
    """Found by the fuzzer: tile_iir names a dimension even after a split renamed its loop;
    and a producer computed inside the output (c at out's y) that the tiled Funcs (computed
    at the root) now read moves to the root (was InternalError: unbound variable)."""
    text = """
pipeline iir_mix
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    rf(x, y) = c(x, y)
    rf.iir(+x, 0..img.width, 0.5f, [0.5f])
    rf.iir(-y, 0..img.height, 0.25f, [1.1f, -0.35f])
    out(x, y) = rf(x, y) * 2.0f
}
schedule split_first {
    rf.split(x, t1, t2, 1).tile_iir(x, 2)
    rf.compute_root()
}
schedule producer_in_consumer {
    rf.parallel(y).vectorize(x, 5).tile_iir(x, 5)
    rf.compute_at(out, x)
    c.compute_at(out, y)
}
"""
    p = hdsl.loads(text, "iir_mix.hl")
    for h, w in ((1, 1), (5, 7), (3, 12)):
        img = np.random.RandomState(w).rand(h, w).astype(np.float32)
        np.testing.assert_allclose(p.compile("host", schedule=schedule)(img=img), p(img=img), rtol=1e-5, atol=1e-6)


NAMED = """
pipeline named
input  img: f32[2]
output out: f32[2]
algorithm {
    rf(x, y) = img(x, y)
    rf.iir(+x, 0..img.width, 0.5f, [0.5f])
    rf.iir(-y, 0..img.height, 0.25f, [1.1f, -0.35f])
    out(x, y) = rf(x, y)
}
schedule named {
    rf.compute_root().tile_iir(x, 4).tile_iir(y, 8)
    rf.final0.compute_root().vectorize(y, 4).parallel(x_tile)
    rf.final0.update(0).parallel(x_tile)
    rf.tiled1.vectorize(x, 4)
    rf.intra1.compute_at(rf.last1, y_tile)
    rf.tail1.update(0).vectorize(x, 4)
}
schedule default { rf.compute_root().tile_iir(x, 4).tile_iir(y, 8) }
"""


def _loops(text, schedule):
    from hdsl.ir.printer import stmt_str
    from hdsl.lower.lower import lower
    return stmt_str(lower(hdsl.loads(text, "t.hl").ir, schedule).stmt)


def test_named_stages_take_their_directives():
    """The stages tile_iir makes of filter update(k) are rf.weightsK, rf.intraK, rf.lastK,
    rf.tailK, rf.finalK and rf.tiledK: a schedule names them like any Func, its directives
    replace that stage's defaults, and every schedule gives the evaluator's values."""
    p = hdsl.loads(NAMED, "named.hl")
    for h, w in ((1, 1), (5, 7), (17, 33)):
        img = np.random.RandomState(w).rand(h, w).astype(np.float32)
        ref = p(img=img)
        for s in ("named", "default"):
            np.testing.assert_allclose(p.compile("host", schedule=s)(img=img), ref, rtol=1e-5, atol=1e-6)
    named, default = _loops(NAMED, "named"), _loops(NAMED, "default")
    # final0 at the root with its tiles in parallel (by default: inside rf.tiled0's tiles)
    assert "parallel for rf.final0.s0.x_tile" in named and "parallel for rf.final0.s1.x_tile" in named
    assert "parallel for rf.final0" not in default
    # rf.tiled1 (the last filter's result) was scheduled, so it stays a Func of its own;
    # by default rf itself is that result
    assert "allocate rf.tiled1" in named and "allocate rf.tiled1" not in default
    assert "vectorized for rf.tiled1.s0.x_i" in named


def test_default_schedule_vectorizes_and_parallelizes_the_stages():
    """The default: each tile's recursion runs with the lanes (another dim, or other tiles)
    innermost and vectorized, blocks of lanes in parallel; the serial chain over the tiles
    touches k values per tile; the last filter's result is f itself (no extra copy)."""
    text = _loops(NAMED, "default")
    for stage in ("rf.intra0.s1", "rf.final0.s1", "rf.intra1.s1", "rf.final1.s1"):
        assert f"vectorized for {stage}" in text, stage
    assert "parallel for rf.last0" in text and "parallel for rf.last1" in text
    assert "allocate rf.tiled1" not in text


@pytest.mark.parametrize("stage,message", [
    ("rf.final7.compute_root()", "'rf' has no recursive filter update(7), so no stage 'final7'"),
    ("rf.last1.compute_root()\n    rf.tile_iir(y, 8)",
     "'rf.last1' is a stage of rf.tile_iir(y, n), which this schedule has not given (yet)"),
    ("rf.tile_iir(y, 8)\n    rf.final1.reorder_storage(y_in, x)",
     "'reorder_storage' does not apply to 'rf.final1', a stage of tile_iir"),
])
def test_naming_a_stage_that_does_not_exist(stage, message):
    text = NAMED.split("schedule named")[0] + "schedule s {\n    rf.compute_root().tile_iir(x, 4)\n    " + stage + "\n}\n"
    with pytest.raises(hdsl.HdslError) as e:
        hdsl.loads(text, "t.hl")
    assert message in str(e.value)


def test_filters_along_one_dim_run_as_a_cascade():
    """x+ then x- (and y+ then y-), tiled with the same tiles: the second filter's stages read
    the first one's tiles recomputed in the cache (rf.final0 inside rf.tiled1's tiles, a copy
    inside rf.last1's), so the first filter's result is never written out; the values are
    the serial filters' (test_float_filters_match_the_serial_filter runs this schedule)."""
    text = _loops(FLOAT, "both")
    assert "allocate rf.tiled0" not in text and "allocate rf.tiled2" not in text
    assert "allocate rf.final0.for_last" in text and "allocate rf.final2.for_last" in text
    # x_only tiles x alone: its two filters cascade, the y filters stay serial updates of rf
    assert "allocate rf.tiled0" not in _loops(FLOAT, "x_only")


ORDER3 = """
pipeline iir3
input  img: f32[1]
output out: f32[1]
algorithm {
    rf(x) = img(x)
    rf.iir(+x, 0..img.width, 0.2f, [0.9f, -0.3f, 0.1f])
    out(x) = rf(x)
}
schedule t2 { rf.compute_root().tile_iir(x, 2) }
schedule t3 { rf.compute_root().tile_iir(x, 3) }
"""


def _order3_by_hand(img):
    # the serial recurrence: y[n] = 0.2 x[n] + 0.9 y[n-1] - 0.3 y[n-2] + 0.1 y[n-3]
    want = np.zeros(len(img))
    for n in range(len(img)):
        want[n] = 0.2 * img[n] + sum(c * want[n - j] for j, c in ((1, 0.9), (2, -0.3), (3, 0.1)) if n >= j)
    return want


@pytest.mark.parametrize("schedule", ["t2", "t3"])
def test_tiles_as_long_as_the_filters_order_and_shorter(schedule):
    p = hdsl.loads(ORDER3, "iir3.hl")
    img = np.random.RandomState(3).rand(41).astype(np.float32)
    got = p.compile("host", schedule=schedule)(img=img)
    np.testing.assert_allclose(got, _order3_by_hand(img), rtol=1e-5, atol=1e-6)


# Orders 1, 2 and 3, each tiled by every size from 1 to k + 1: tiles shorter than the order
# (n < k) carry values from earlier tiles (a tile has only n of its own: lower/tile_iir.py,
# the tail chain), and were wrong past the first tile (found by the slow schedule fuzzer:
# the stdlib's yvv_gaussian_x tiled by 2, 570 of 615 points wrong). Each filter runs
# causal then anticausal along x (a cascade: the second reads the first's tiles).
ORDERS = {1: (0.4, [0.6]), 2: (0.25, [1.1, -0.35]), 3: (0.2, [0.9, -0.3, 0.1])}


def _orders_program(schedules: dict) -> str:
    """One output o<k> per order k (f32[1]); schedules: name -> {k: tile size}."""
    head = "pipeline orders\ninput  img: f32[1]\n" + "".join(f"output o{k}: f32[1]\n" for k in ORDERS)
    body = ""
    for k, (b0, fb) in ORDERS.items():
        c = ", ".join(f"{a}f" for a in fb)
        body += (f"    o{k}(x) = img(x)\n    o{k}.iir(+x, 0..img.width, {b0}f, [{c}])\n"
                 f"    o{k}.iir(-x, 0..img.width, {b0}f, [{c}])\n")
    sch = "".join(f"schedule {name} {{\n" + "".join(f"    o{k}.tile_iir(x, {n})\n" for k, n in tiles.items()) + "}\n"
                  for name, tiles in schedules.items())
    return head + "algorithm {\n" + body + "}\n" + sch


def _lfilter_both_ways(b0, fb, x, axis=-1):
    """scipy.signal.lfilter([b0], [1, -a1, ..., -ak]) (the textbook recurrence from zero
    initial conditions, what `.iir` means: f zero outside its range) in f64, then the same
    on the reversed result (the anticausal pass)."""
    den = [1.0] + [-a for a in fb]
    z = lfilter([b0], den, np.asarray(x, np.float64), axis=axis)
    return np.flip(lfilter([b0], den, np.flip(z, axis), axis=axis), axis)


# widths below the order (1, 2), below a tile, multiples of the tiles and not
WIDTHS = [1, 2, 3, 5, 12, 13, 41]


def _check_orders(compiled, p):
    for w in WIDTHS:
        img = np.random.RandomState(w).rand(w).astype(np.float32)
        got, ref = compiled(img=img), p(img=img)
        for k, g, r in zip(ORDERS, got, ref):
            b0, fb = ORDERS[k]
            # f32 against f64: a handful of terms per point, stable filters of gain <= 1
            # (the bug's errors were 4e-3 and more)
            np.testing.assert_allclose(g, _lfilter_both_ways(b0, fb, img), rtol=1e-5, atol=1e-6,
                                       err_msg=f"order {k}, width {w}")
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6, err_msg=f"order {k}, width {w}")


# orders 3 and 2 in tiles shorter than the order, order 1 in tiles of 1 (the default run);
# every size 1 .. 4 for every order in the slow sweep
SHORT = {"short": {1: 1, 2: 1, 3: 2}}
EVERY = {f"t{n}": {k: n for k in ORDERS} for n in range(1, 5)}


@pytest.mark.parametrize("target", ["host", pytest.param(GPU_TARGET, marks=requires(GPU_TARGET))])
def test_tiles_shorter_than_the_filters_order(target):
    """(On a GPU target too: tile_iir's stages run on the host there, as any CPU schedule.)"""
    p = hdsl.loads(_orders_program(SHORT), "orders.hl")
    _check_orders(p.compile(target, schedule="short"), p)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["host", pytest.param(GPU_TARGET, marks=requires(GPU_TARGET))])
@pytest.mark.parametrize("schedule", sorted(EVERY))
def test_every_tile_size_from_one_to_past_the_order(target, schedule):
    p = hdsl.loads(_orders_program(EVERY), "orders.hl")
    _check_orders(p.compile(target, schedule=schedule), p)


INT_SHORT = """
pipeline iir_short
input  img: i32[2]
output out: i32[2]
algorithm {
    rf(x, y) = img(x, y)
    rf.iir(+x, 0..img.width, 1, [1, -1, 1])
    rf.iir(-x, 1..img.width, 1, [1, -1, 1])    # short of the first column: it keeps rf's values
    rf.iir(+y, 0..img.height, 1, [1, -1])
    out(x, y) = rf(x, y)
}
schedule s { rf.compute_root().tile_iir(x, 2).tile_iir(y, 1) }
schedule rows { rf.compute_root().tile_iir(x, 1).tile_iir(y, 2) }
"""


@pytest.mark.parametrize("schedule", ["s", "rows"])
def test_integer_tiles_shorter_than_the_order_are_exact(schedule):
    """Order 3 along x (tiles of 2, then 1), order 2 along y (tiles of 1, then 2): bit for bit
    the evaluator's and lfilter's values. The filters' poles lie on the unit circle (1, ±i for
    order 3; e^±iπ/3 for order 2), so the values grow at most polynomially: under 2^31 here,
    and lfilter's f64 arithmetic on these integers is exact (all below 2^53)."""
    p = hdsl.loads(INT_SHORT, "iir_short.hl")
    c = p.compile("host", schedule=schedule)
    for h, w in ((1, 2), (2, 3), (3, 2), (5, 7), (13, 11)):
        img = np.random.RandomState(h * w).randint(-100, 100, (h, w)).astype(np.int32)
        got = c(img=img)
        np.testing.assert_array_equal(got, p(img=img))
        z = lfilter([1.0], [1.0, -1.0, 1.0, -1.0], img.astype(np.float64), axis=1)
        z[:, 1:] = np.flip(lfilter([1.0], [1.0, -1.0, 1.0, -1.0], np.flip(z[:, 1:], 1), axis=1), 1)
        z = lfilter([1.0], [1.0, -1.0, 1.0], z, axis=0)
        assert np.abs(z).max() < 2 ** 31
        np.testing.assert_array_equal(got, z.astype(np.int32))
