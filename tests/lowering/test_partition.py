"""Loop partitioning and stride-1 buffers: the steady-state vector loop is clean, and every
size still gives the evaluator's values (prologue, steady state and epilogue all run)."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.codegen.cpu import generate
from hdsl.ir.expr import BinOp, Var, free_vars, walk
from hdsl.ir.stmt import For, IfThenElse, LetStmt
from hdsl.lower.lower import lower
from hdsl.lower.partition import NARROW_LANES, _exprs, _kids

BLUR = """
pipeline blur
use boundary
input  img: u16[2]
output out: u16[2]
algorithm {
    clamped = repeat_edge(img)
    blur_x(x, y) = (clamped(x - 1, y) + clamped(x, y) + clamped(x + 1, y)) / 3
    out(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3
}
schedule tiled {
    out.tile(x, y, xi, yi, 64, 8).vectorize(xi, 16).parallel(y)
    blur_x.compute_at(out, x).vectorize(x, 16)
}
schedule plain {
    out.vectorize(x, 8)
}
"""


def _loops(s, name):
    """Every For over `name` (a partitioned loop appears once per part), in order."""
    found = []

    def visit(x):
        if isinstance(x, For) and x.var == name:
            found.append(x)
        for k in _kids(x):
            visit(k)
    visit(s)
    return found


def _minmax_in_vector_code(loop: For, lane: str = "") -> int:
    """The mins, maxes and ifs in vector code (or, given `lane`, in the loops over that var,
    vectorized or not: a narrow region's lanes become a scalar loop)."""
    count = 0

    def visit(s, vec):
        nonlocal count
        vec = vec or (isinstance(s, For) and (s.kind == "vectorized" or s.var == lane))
        if vec:
            for e in _exprs(s):
                count += sum(1 for n in walk(e) if isinstance(n, BinOp) and n.op in ("min", "max"))
            if isinstance(s, IfThenElse):
                count += 1
        for k in _kids(s):
            visit(k, vec)
    visit(loop, False)
    return count


def test_blur_x_steady_state_has_no_clamps():
    p = hdsl.loads(BLUR, "blur.hl")
    stmt = lower(p.ir, "tiled").stmt
    parts = _loops(stmt, "blur_x.s0.x$1")
    # per copy of out's x loop (itself split into whole tiles and the last one): a prologue
    # (the left edge), the steady state and an epilogue (the right edge and the tail)
    assert len(parts) == 6
    for pro, steady, epi in (parts[:3], parts[3:]):
        clamps = [_minmax_in_vector_code(l) for l in (pro, steady, epi)]
        # x's clamp (a min and a max per tap: 6) is gone in the steady state, and so is the
        # start of blur_x's last vector shifted inwards, min(x * 16, e - 16); y's clamp does
        # not vary across lanes and stays (one min and one max, shared by the taps). (blur_x
        # reads img only through repeat_edge's clamp, so a region narrower than a vector is
        # computed a whole vector wide, as Halide does: no copy for narrow regions, whose
        # lanes would be clamped to the region - see test_narrow_region_*)
        assert clamps[1] == clamps[0] - 7 == clamps[2] - 7 == 2


def test_output_steady_state_has_no_tail_guard():
    p = hdsl.loads(BLUR, "blur.hl")
    stmt = lower(p.ir, "tiled").stmt
    parts = _loops(stmt, "out.s0.xi$1")
    # out's x loop: whole tiles, then the last; in each, xi's steady state and its tail
    assert len(parts) == 4

    def guards(loop):
        return sum(1 for s in _all(loop) if isinstance(s, IfThenElse))
    # only y's guard (scalar) is left, except in the last tile's tail, which keeps x's
    assert [guards(l) for l in parts] == [1, 1, 1, 2]


def _all(s):
    yield s
    for k in _kids(s):
        yield from _all(k)


def test_steady_state_loads_are_dense_vectors():
    """With x's clamp gone and x's stride known to be 1, the steady state's loads of img
    are plain <16 x i16> loads, not gathers."""
    p = hdsl.loads(BLUR, "blur.hl")
    low = lower(p.ir, "tiled")
    ir = str(generate(p.ir, low.stmt, "blur"))
    assert "load <16 x i16>" in ir
    dense = ir.count("load <16 x i16>")
    # the prologue and epilogue keep their gathers (behind a run-time density check)
    assert dense >= 6


@pytest.mark.parametrize("schedule", ["tiled", "plain"])
@pytest.mark.parametrize("w,h", [(1, 1), (2, 3), (15, 2), (16, 16), (17, 9), (63, 5), (64, 8), (65, 17),
                                 (100, 3), (129, 20)])
def test_every_size_matches_the_evaluator(schedule, w, h):
    p = hdsl.loads(BLUR, "blur.hl")
    img = np.random.RandomState(w * 100 + h).randint(0, 65535, (h, w)).astype(np.uint16)
    expected = p(img=img)
    got = p.compile("host", schedule=schedule)(img=img)
    assert np.array_equal(got, expected)


def test_guard_used_outside_an_if_is_not_removed():
    """A hot comparison that is also a value (stored) must keep its value everywhere."""
    text = """
pipeline cmp
input  img: i32[1]
output out: i32[1]
algorithm {
    out(x) = select(x < 13, img(clamp(x + 1, 0, img.width - 1)), 7) + i32(x < 13)
}
schedule s { out.vectorize(x, 8) }
"""
    p = hdsl.loads(text, "cmp.hl")
    for n in (1, 7, 8, 13, 20, 41):
        img = np.arange(n, dtype=np.int32) * 3
        assert np.array_equal(p.compile("host", schedule="s")(img=img), p(img=img))


def test_interleaved_colour_input_is_read_correctly():
    """x must have stride 1: an (H, W, 3) interleaved array is copied to a planar layout,
    and the output comes back in the user's (H, W, 3) layout."""
    text = """
pipeline swap
input  img: u8[3]
output out: u8[3]
algorithm { out(x, y, c) = img(x, y, 2 - c) + u8(x) }
schedule s { out.vectorize(x, 16) }
"""
    p = hdsl.loads(text, "swap.hl")
    img = np.random.RandomState(1).randint(0, 200, (5, 37, 3)).astype(np.uint8)
    got = p.compile("host", schedule="s")(img=img)
    xs = np.arange(37, dtype=np.uint8)[None, :, None]
    assert got.shape == (5, 37, 3)
    assert np.array_equal(got, img[:, :, ::-1] + xs)
    # a strided view (every other column) is copied too
    view = img[:, ::2, :]
    assert np.array_equal(p.compile("host", schedule="s")(img=view), view[:, :, ::-1] + xs[:, :19])


IIR = """
pipeline iir
input  img: f32[2]
param  b0: f32 = 0.5
param  a1: f32 = 0.5
output out: f32[2]
algorithm {
    rf(x, y) = img(x, y)
    rf.iir(+x, 0..img.width, b0, [a1])
    rf.iir(-y, 0..img.height, b0, [a1])
    out(x, y) = rf(x, y)
}
schedule s {
    rf.compute_root().vectorize(x, 8)
    rf.update(0).split(y, yo, yi, 8).reorder(yi, x, yo).vectorize(yi).parallel(yo)
    rf.update(1).split(x, xo, xi, 8).reorder(xi, y, xo).vectorize(xi).parallel(xo)
}
"""


def test_iir_scan_loop_is_named_by_its_var_and_parallel_loops_partition():
    """`rf.update(0).reorder(yi, x, yo)`: x names the scan of .iir(+x, ...). The parallel loop
    over yo is partitioned inside its body (one dispatch): whole 8-row blocks run without
    the tail guard."""
    p = hdsl.loads(IIR, "iir.hl")
    stmt = lower(p.ir, "s").stmt
    par = [l for l in _all(stmt) if isinstance(l, For) and l.var == "rf.s1.yo"]
    assert len(par) == 1 and par[0].kind == "parallel"
    assert isinstance(par[0].body, IfThenElse)
    steady, rest = par[0].body.then, par[0].body.otherwise
    assert sum(isinstance(s, IfThenElse) for s in _all(steady)) == 0
    assert sum(isinstance(s, IfThenElse) for s in _all(rest)) >= 1       # the guard, where it is needed
    for h, w in ((8, 8), (13, 16), (1, 8), (23, 24)):     # (x rounds up to 8 in the pure stage)
        img = np.random.RandomState(h * w).rand(h, w).astype(np.float32)
        assert np.array_equal(p.compile("host", schedule="s")(img=img), p(img=img))


STRIDED = """
pipeline strided
input  img: u16[2]
output even: u16[2]
output third: u16[2]
output col: u16[2]
algorithm {
    even(x, y) = img(2 * x, y) + img(2 * x + 1, y)
    third(x, y) = img(3 * x + 2, y)
    col(x, y) = img(y, x)           # a transpose: x runs down img's rows (run-time stride)
}
schedule s {
    even.vectorize(x, 16)
    third.vectorize(x, 8)
    col.vectorize(x, 8)
}
"""


def test_strided_loads_are_shuffles_and_transposes_use_the_run_time_stride():
    p = hdsl.loads(STRIDED, "strided.hl")
    ir = str(generate(p.ir, lower(p.ir, "s").stmt, "strided"))
    # 16 lanes of stride 2 span 31 elements: two dense 16-lane loads (at 0 and at 15, so
    # nothing past the span is read) and one shuffle; img(2x) and img(2x + 1), phases of one
    # stride, share theirs (at 0 and 16: the odd phase reads element 31; CodeGenCPU.SHARE_PHASES,
    # tests/compiler/test_phase_packs.py); 8 lanes of stride 3 span 22: three loads
    assert ir.count("load <16 x i16>") == 2 and "shufflevector <16 x i16>" in ir    # img(2x), img(2x + 1)
    assert ir.count("load <8 x i16>") >= 3
    assert "load <31 x i16>" not in ir and "load <22 x i16>" not in ir
    c = p.compile("host", schedule="s")
    for h, w in ((16, 48), (8, 24), (24, 40)):
        img = np.random.RandomState(w).randint(0, 30000, (h, w)).astype(np.uint16)
        n = w // 3
        got = c.realize([[n, h], [n, h], [h, n]], img=img)
        assert np.array_equal(got[0], img[:, 0:2 * n:2] + img[:, 1:2 * n:2])
        assert np.array_equal(got[1], img[:, 2:3 * n:3])
        assert np.array_equal(got[2], img[:h, :n].T)


HALF = """
pipeline half
input  img: i32[2]
output out: i32[2]
algorithm {
    out(x, y) = img(x / 2, y) * 100 + img((x + 1) / 2, y) * 10 + img(x / 8, y)
}
schedule s { out.vectorize(x, 8) }
"""


def test_half_rate_and_broadcast_indices_load_their_span():
    """img(x / 2) and img((x + 1) / 2) over 8 lanes index 4 and 5 consecutive elements, and
    img(x / 8) one: checked at run time and loaded as exactly that span, else gathered."""
    p = hdsl.loads(HALF, "half.hl")
    ir = str(generate(p.ir, lower(p.ir, "s").stmt, "half"))
    assert "load <4 x i32>" in ir and "load <5 x i32>" in ir
    c = p.compile("host", schedule="s")
    img = np.random.RandomState(2).randint(-50, 50, (3, 40)).astype(np.int32)
    for w in (1, 7, 8, 9, 16, 31, 79):
        x = np.arange(w)
        expected = img[:, x // 2] * 100 + img[:, (x + 1) // 2] * 10 + img[:, x // 8]
        assert np.array_equal(c.realize((w, 3), img=img), expected)


def test_vector_loop_around_a_serial_channel_loop_stays_vector():
    """out.reorder(c, x, y).vectorize(x, 8): the channel loop inside the vector loop runs
    serially with a vector body (lanes are independent), instead of the whole loop scalar."""
    text = """
pipeline chans
input  img: u8[3]
output out: u16[3]
algorithm { out(x, y, c) = u16(img(x, y, c)) * u16(c + 1) + u16(x) }
schedule s { out.reorder(c, x, y).vectorize(x, 8) }
"""
    p = hdsl.loads(text, "chans.hl")
    ir = str(generate(p.ir, lower(p.ir, "s").stmt, "chans"))
    assert "store <8 x i16>" in ir
    img = np.random.RandomState(4).randint(0, 255, (5, 19, 3)).astype(np.uint8)
    got = p.compile("host", schedule="s")(img=img)
    expected = img.astype(np.uint16) * np.array([1, 2, 3], np.uint16) + np.arange(19, dtype=np.uint16)[None, :, None]
    assert np.array_equal(got, expected)


INTERLEAVED = """
pipeline inter
use boundary
input  img: i32[2]
output out: i32[2]
algorithm {
    e = repeat_edge(img)
    g(x, y) = e(x, y) * 3 + 1
    out(x, y) = g((x - 13) / 2, y) * 1000 + g((x - 13) % 4, y) * 10 + g((3 * x + 1) / 4, y) + (x - 7) % 4
}
schedule s {
    g.compute_root()
    out.vectorize(x, 8)
}
schedule s16 {
    g.compute_root()
    out.vectorize(x, 16)
}
"""


def test_ramp_divided_or_modulo_a_constant_is_an_interleave_of_dense_loads():
    """(x - 13) / 2 over 8 lanes is two 4-lane ramps interleaved (lane 2j + r is
    (b + r) / 2 + j for any b, negative too): two dense loads and a shuffle, no run-time
    pattern check; % 4 and (3x + 1) / 4 are interleaves too. Values against the evaluator."""
    p = hdsl.loads(INTERLEAVED, "inter.hl")
    ir = str(generate(p.ir, lower(p.ir, "s").stmt, "inter"))
    assert "load <4 x i32>" in ir and "load <2 x i32>" in ir
    assert "vector.reduce" not in ir           # no run-time pattern checks
    for sched in ("s", "s16"):
        c = p.compile("host", schedule=sched)
        for w in (1, 5, 8, 13, 16, 29, 64):
            img = np.random.RandomState(w).randint(-1000, 1000, (3, w + 3)).astype(np.int32)
            assert np.array_equal(c.realize((w, 3), img=img), p.realize((w, 3), img=img)), (sched, w)


CHANNELS_INSIDE = """
pipeline rp
use boundary
input  img: u16[3]
output out: u16[3]
algorithm {
    clamped = repeat_edge(img)
    out(x, y, c) = clamped(x, y, c) + clamped(x + 1, y, c)
}
schedule s { out.reorder(c, x, y).vectorize(x, 8) }
"""


def test_clamp_of_a_let_that_is_a_tail_guard_min_goes_in_the_steady_state():
    """out.reorder(c, x, y): x is `let x = min(base, x.max)` inside the channel loop; the
    boundary clamp of x is linear only once that min is gone, so the pass iterates (it used
    to keep the clamp, and every steady-state load was a run-time pattern check)."""
    p = hdsl.loads(CHANNELS_INSIDE, "rp.hl")
    stmt = lower(p.ir, "s").stmt
    pro, steady, epi = _loops(stmt, "out.s0.x$1")
    # x's clamps (a min and a max per tap: 4), the let's min and the tail guard are gone;
    # y's and c's clamps (scalar: 4) stay
    assert _minmax_in_vector_code(steady) == 4
    assert _minmax_in_vector_code(pro) == _minmax_in_vector_code(epi) == 4 + 4 + 1 + 1
    c = p.compile("host", schedule="s")
    for w in (1, 2, 7, 8, 9, 17, 40):
        img = np.random.RandomState(w).randint(0, 30000, (3, w, 3)).astype(np.uint16)
        assert np.array_equal(c(img=img), p(img=img)), w


def test_outputs_shift_their_last_tile_inwards_and_narrow_outputs_get_the_guarded_form():
    """Compiled, an output's split tiles are all whole (the last one shifted back to end at
    the edge, Halide's ShiftInwards), so the tile's intermediates have constant sizes; that
    form needs the output at least a tile wide, and a narrower output runs a second form with
    guarded tails, compiled the first time one is asked for. Both give the evaluator's values."""
    from hdsl.lower.loops import shift_requirements
    p = hdsl.loads(BLUR, "blur.hl")
    assert shift_requirements(p.ir, "tiled") == [(0, 0, 64), (0, 1, 8)]
    shifted = lower(p.ir, "tiled", shift_outputs=True).stages["schedule_functions"]
    from hdsl.ir.printer import stmt_str
    text = stmt_str(shifted)
    assert "let out.s0.x = out.s0.x.min + min(out.s0.x$1 * 64, out.s0.x.max - out.s0.x.min - 63) + out.s0.xi" in text
    assert "if " not in text.split("parallel for out")[1]     # no tail guards
    c = p.compile("host", schedule="tiled", use_cache=False)
    assert c.native._guarded is None
    for w, h in ((64, 8), (130, 17), (200, 9)):
        img = np.random.RandomState(w).randint(0, 20000, (h, w)).astype(np.uint16)
        assert np.array_equal(c(img=img), p(img=img)), (w, h)
    assert c.native._guarded is None          # every output so far was at least 64 x 8
    for w, h in ((63, 8), (70, 7), (1, 1)):
        img = np.random.RandomState(w).randint(0, 20000, (h, w)).astype(np.uint16)
        assert np.array_equal(c(img=img), p(img=img)), (w, h)
    assert c.native._guarded is not None


def test_a_shifted_tile_start_is_partitioned_so_boundary_clamps_leave_the_steady_state():
    """With the output's last tile shifted inwards, x = min + min(x$1 * 8, extent - 8) + x_i:
    the min is lane-invariant, yet until it goes the input's repeat_edge clamp of x is not
    linear in x$1 and stays in the vector code. The loop right around the vector loop now
    partitions on its own var's min/max too."""
    text = """
pipeline rp
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    out(x, y) = c(x - 1, y) + c(x + 1, y)
}
schedule s { out.vectorize(x, 8) }
"""
    p = hdsl.loads(text, "rp.hl")
    stmt = lower(p.ir, "s", shift_outputs=True).stmt
    parts = _loops(stmt, "out.s0.x$1")
    assert len(parts) == 3
    assert _minmax_in_vector_code(parts[1]) == 2          # y clamp only (one min, one max, shared by the taps)
    assert _minmax_in_vector_code(parts[0]) > _minmax_in_vector_code(parts[1])
    c = p.compile("host", schedule="s", use_cache=False)
    for w in (1, 7, 8, 9, 16, 23, 64):
        img = np.random.RandomState(w).rand(3, w).astype(np.float32)
        assert np.array_equal(c(img=img), p(img=img)), w


def test_an_inline_sum_read_by_vector_code_is_computed_per_vector_in_registers():
    """An unscheduled inline reduction read by a vectorized Func is computed per vector
    of its consumer: a region of exactly the lanes (constant extent 8, so its loops split
    without a tail and become one-trip loops, i.e. lets), its accumulator a vector that
    LLVM keeps in a register; the consumer's loop over the vectors then partitions once
    for the sum's clamps. (It was computed a whole row ahead, into memory: ~7% slower.)"""
    text = """
pipeline g
use boundary
input  img: u8[2]
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    rdom r = [-3..4]
    out(x, y) = sum(f32(c(x + r.x, y)) * f32(r.x + 4))
}
schedule s { out.vectorize(x, 8) }
"""
    p = hdsl.loads(text, "g.hl")
    stmt = lower(p.ir, "s", shift_outputs=True).stmt
    parts = _loops(stmt, "out.s0.x$1")
    assert len(parts) == 3                               # prologue, steady state, epilogue
    # the sum lives inside each copy of out's loop over vectors, sized by the lanes
    from hdsl.ir.stmt import Allocate, LetStmt
    for part in parts:
        sizes = {s.value.value for s in _all(part) if isinstance(s, LetStmt)
                 and s.name.endswith(".extent.0") and "sum" in s.name and hasattr(s.value, "value")}
        assert sizes == {8}
        assert any(isinstance(s, Allocate) and "sum" in s.name for s in _all(part))
    # no loop over the sum's own x is left (one trip: a let), and the steady state has
    # only y's clamp left in vector code
    assert not [l for l in _all(stmt) if isinstance(l, For) and "sum" in l.var and l.var.endswith("x$1")]
    assert _minmax_in_vector_code(parts[1]) == 2
    assert _minmax_in_vector_code(parts[0]) > 2
    c = p.compile("host", schedule="s", use_cache=False)
    for w in (1, 5, 8, 9, 17, 40):
        img = np.random.RandomState(w).randint(0, 255, (3, w)).astype(np.uint8)
        assert np.array_equal(c(img=img), p(img=img)), w


def test_a_scalar_inline_reduction_is_computed_once_at_the_root():
    """sum(w(r)) (a kernel's norm) depends on no loop: it is computed once before the
    loop nest, not per vector (it was 10% of the unsharp mask's time when per vector)."""
    text = """
pipeline n
input  img: f32[2]
output out: f32[2]
algorithm {
    rdom r = [0..5]
    w(k) = f32(k + 1)
    out(x, y) = img(x, y) / sum(w(r.x))
}
schedule s { out.vectorize(x, 8).parallel(y) }
"""
    p = hdsl.loads(text, "n.hl")
    stmt = lower(p.ir, "s", shift_outputs=True).stmt
    from hdsl.ir.stmt import Allocate
    top = stmt
    depth_of_sum = None

    def visit(s, depth):
        nonlocal depth_of_sum
        if isinstance(s, Allocate) and s.name.startswith("sum"):
            depth_of_sum = depth
        for k in _kids(s):
            visit(k, depth + (1 if isinstance(s, For) else 0))
    visit(top, 0)
    assert depth_of_sum == 0
    c = p.compile("host", schedule="s", use_cache=False)
    img = np.random.RandomState(1).rand(5, 19).astype(np.float32)
    assert np.array_equal(c(img=img), p(img=img))
    assert np.allclose(c(img=img), img / 15.0)


HIST = """
pipeline h
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    var x, y, z
    c = repeat_edge(img)
    rdom r = [0..4, 0..4]
    let zi = clamp(i32(c(x * 4 + r.x - 2, y * 4 + r.y - 2) * 8.0f), 0, 8)
    hist(x, y, z) = 0.0f
    hist(x, y, zi) += 1.0f
    out(x, y) = hist(x, y, 0) + hist(x, y, 3) * 2.0f + hist(x, y, 8) * 3.0f
}
schedule s {
    hist.compute_at(out, y)
}
"""


def _scalar_minmax(loop) -> int:
    return sum(1 for s in _all(loop) for e in _exprs(s) for n in walk(e)
               if isinstance(n, BinOp) and n.op in ("min", "max"))


def test_scalar_loops_partition_on_boundary_clamps():
    """A scatter (no vector code) partitions too: the innermost loop of run-time extent,
    hist's x, gets a steady state where repeat_edge's clamp of x * 4 + r.x - 2 is gone
    (the rdom loops of constant extent inside it are not partitioned themselves)."""
    p = hdsl.loads(HIST, "h.hl")
    stmt = lower(p.ir, "s", shift_outputs=True).stmt
    parts = _loops(stmt, "hist.s1.x")
    assert len(parts) == 3
    assert not _loops(stmt, "hist.s1.r.x")[0].var.endswith("steady")
    assert len(_loops(stmt, "hist.s1.r.x")) == 3            # one per copy of x's loop, no more
    pro, steady, epi = (_scalar_minmax(l) for l in parts)
    # x's min and max, in the store's index and the load's: 4 gone; y's clamp and zi's
    # (2 each, twice) stay: y does not vary in the loop, zi is data-dependent
    assert steady == pro - 4 == epi - 4 == 8
    c = p.compile("host", schedule="s", use_cache=False)
    for w, h in [(1, 1), (2, 3), (5, 4), (9, 7), (16, 5), (33, 2)]:
        img = np.random.RandomState(w * h).rand(h, w).astype(np.float32)
        assert np.array_equal(c(img=img), p(img=img)), (w, h)


def test_a_clamp_that_pins_every_lane_gets_a_saturated_epilogue():
    """interpolate's `ds[3](clamp(x, 0, img.width / 16), …)` read at 2x - 1 .. 2x + 1 (by a
    stage that is not an output, as there; an output's shifted last tile is not split): past
    the steady state, most vectors have every lane clamped to the bound. That stretch is a
    fourth copy of the loop where the clamp is the bound itself (one broadcast load, not
    lanes checked at run time). An input's boundary condition (clamp to its own edge) does
    not get one: its pinned stretch is only the halo."""
    text = """
pipeline s
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    var x, y
    f(x, y) = img(x, y) * 2.0f
    mid(x, y) = f(clamp(x, 0, img.width / 4), y)
    g(x, y) = mid(x * 2 - 1, y) + mid(x * 2, y) + mid(x * 2 + 1, y)
    out(x, y) = g(x, y)
}
schedule s {
    f.compute_root()
    g.compute_root().vectorize(x, 8)
}
"""
    p = hdsl.loads(text, "s.hl")
    stmt = lower(p.ir, "s", shift_outputs=True).stmt
    parts = _loops(stmt, "g.s0.x$1")
    # prologue, steady state, mixed epilogue, saturated, and g's last tile (its split shifts
    # it inwards: g is not an output, Halide's ShiftInwards); all but the steady state and
    # the saturated copy in two copies, for g's region at least a vector wide and narrower
    assert len(parts) == 8
    sat = parts[5]
    assert isinstance(sat.min, Var) and sat.min.name.endswith(".saturated.min")
    assert isinstance(parts[6].min, Var) and parts[6].min.name.endswith(".after4.wide.min")
    mixed_wide = parts[3]                   # (the mixed epilogue for a region a vector wide)
    parts = parts[1:3] + parts[4:]          # (the clamped copies, as the test was written)
    # in the saturated copy x's clamps are gone from the lanes: what is left is scalar
    def lane_minmax(loop):
        n = 0
        def visit(s, lane):
            nonlocal n
            if isinstance(s, For) and s.kind == "vectorized":
                lane = lane | {s.var}
            for e in _exprs(s):
                for m in walk(e):
                    if isinstance(m, BinOp) and m.op in ("min", "max") and free_vars(m) & lane:
                        n += 1
            if isinstance(s, LetStmt) and free_vars(s.value) & lane:
                lane = lane | {s.name}
            for k in _kids(s):
                visit(k, lane)
        visit(loop, frozenset())
        return n
    assert lane_minmax(mixed_wide) > 0 and lane_minmax(sat) == 0
    # (the narrow region's copies hold no vector code: their distinct lanes are a scalar loop)
    assert lane_minmax(parts[0]) == lane_minmax(parts[2]) == 0
    # repeat_edge alone gives no saturated copy
    blur = lower(hdsl.loads(BLUR, "blur.hl").ir, "plain", shift_outputs=True).stmt
    assert not [l for l in _all(blur) if isinstance(l, For) and isinstance(l.min, Var)
                and l.min.name.endswith(".saturated.min")]
    c = p.compile("host", schedule="s", use_cache=False)
    for w in (1, 5, 8, 9, 16, 33, 64, 100):
        img = np.random.RandomState(w).rand(3, w).astype(np.float32)
        assert np.array_equal(c(img=img), p(img=img)), w


def test_the_last_shifted_tile_of_a_region_a_vector_wide_has_no_lane_clamps():
    """A shifted-inwards split of a producer's x clamps each lane to the region,
    min(x_i, extent - 1), for regions narrower than a vector. That clamp does not move with
    the tile index, so the steady state drops it all or nothing; the epilogue (the last tile,
    shifted back to end at the edge, run once per row) kept it, and there it made every lane
    a separate load and store (camera_pipe's planes: pextrw/pinsrw per lane). The epilogue
    now has a copy without it, taken when the region is at least a vector wide; narrower
    regions take the clamped copy. Every width gives the evaluator's values."""
    text = """
pipeline tail
input  img: u16[2]
output out: u16[2]
algorithm {
    f(x, y) = img(x, y) * 3 + 1
    out(x, y) = f(x, y) + f(x, y) / 2
}
schedule s {
    f.compute_at(out, y).vectorize(x, 8)
}
"""
    p = hdsl.loads(text, "tail.hl")
    stmt = lower(p.ir, "s").stmt
    parts = _loops(stmt, "f.s0.x$1")

    def lane_clamps(loop):
        n = 0

        def visit(s):
            nonlocal n
            for e in _exprs(s):
                n += sum(1 for m in walk(e) if isinstance(m, BinOp) and m.op in ("min", "max")
                         and "f.s0.x_i" in free_vars(m))
            for k in _kids(s):
                visit(k)
        visit(loop)
        return n
    def vectorized(loop):
        return any(isinstance(x, For) and x.kind == "vectorized" for x in _all(loop))
    clean = [lp for lp in parts if lane_clamps(lp) == 0 and vectorized(lp)]
    # the steady state and the epilogue's copy for wide regions, in vector code
    assert len(clean) >= 2, [lane_clamps(lp) for lp in parts]
    # narrow regions take a copy that runs the distinct lanes as a scalar loop, the lane's
    # clamp moved into its extent, `for x_i in 0 .. min(7, max(e - 1, 0))` (the vector form,
    # pinned lanes and all, was a gather per load)
    narrow = [lp for lp in parts if not vectorized(lp)]
    assert len(narrow) == 1 and lane_clamps(narrow[0]) == 0
    lanes = [x for x in _all(narrow[0]) if isinstance(x, For) and x.var == "f.s0.x_i.lanes"]
    assert [x.kind for x in lanes] == ["serial"]
    assert sum(1 for n in walk(lanes[0].extent) if isinstance(n, BinOp) and n.op in ("min", "max")) == 2
    # LLVM is told not to vectorize or unroll that loop again (its own loop metadata), and
    # no other loop of this pipeline carries such metadata
    ir = str(generate(p.ir, lower(p.ir, "s").stmt, "tail"))
    back = [line for line in ir.splitlines() if "!llvm.loop" in line]
    assert len(back) == 1 and back[0].lstrip().startswith("br label"), back
    assert '!{ !"llvm.loop.vectorize.enable", i1 0 }' in ir and '!{ !"llvm.loop.unroll.disable" }' in ir
    assert any("after" in str(lp.min) and ".wide." in str(lp.min) for lp in clean), \
        "no clamp-free copy of the epilogue"
    c = p.compile("host", schedule="s", use_cache=False)
    for w in (1, 3, 7, 8, 9, 15, 16, 17, 40, 45):
        img = np.random.RandomState(w).randint(0, 20000, (3, w)).astype(np.uint16)
        assert np.array_equal(c(img=img), p(img=img)), w


NARROW = """
pipeline narrow
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    clamped = repeat_edge(img)
    f(x, y) = clamped(x * 2 - 1, y) + 2.0f * clamped(x * 2, y) + clamped(x * 2 + 1, y)
    g(x, y) = f(x / 2, y) + f((x + 1) / 2, y) * 3.0f
    raw(x, y) = img(x, y) * 0.5f
    h(x, y) = raw(x, y) + raw(x + 1, y)
    out(x, y) = g(x, y) + h(x / 3, y)
}
schedule s {
    f.compute_root().vectorize(x, 8)
    g.compute_at(out, y).vectorize(x, 8)
    raw.compute_root().vectorize(x, 8)
    h.compute_at(out, y).vectorize(x, 8)
    out.vectorize(x, 8)
}
"""


def _lane_clamps(loop, lane):
    n = 0

    def visit(s):
        nonlocal n
        for e in _exprs(s):
            n += sum(1 for m in walk(e) if isinstance(m, BinOp) and m.op in ("min", "max") and lane in free_vars(m))
        for k in _kids(s):
            visit(k)
    visit(loop)
    return n


def test_narrow_region_of_a_func_reading_through_clamps_is_computed_a_whole_vector_wide():
    """Halide's ShiftInwards: a producer's region narrower than its vector is computed a whole
    vector wide, its lanes distinct points (dense loads and stores), not clamped each to the
    region's last point (a gather and a scatter per row: interpolate's coarse levels, 3 to 50
    points wide, vectorized by 16). Allowed only where the larger region reads no input past
    where the narrow one did: f and g read img only through repeat_edge's clamp, so their
    vector loops have no lane clamp at all; h reads raw, which reads img unclamped, so h and
    raw keep the clamped copy for narrow regions. Every width gives the evaluator's values,
    including inputs exactly as wide as the pipeline needs (raw reads x + 1 of out's x / 3)."""
    p = hdsl.loads(NARROW, "narrow.hl")
    stmt = lower(p.ir, "s").stmt
    for name in ("f", "g"):
        parts = _loops(stmt, f"{name}.s0.x$1")
        assert parts and all(_lane_clamps(lp, f"{name}.s0.x_i") == 0 for lp in parts), name
    for name in ("raw", "h"):
        # their copy for narrow regions clamps the lanes, and (partition_loops) runs them as a
        # scalar loop over the distinct ones, the clamp moved into its extent
        parts = _loops(stmt, f"{name}.s0.x$1")
        lanes = f"{name}.s0.x_i" + NARROW_LANES
        assert any(_lane_clamps(lp, f"{name}.s0.x_i") > 0 or
                   any(isinstance(x, For) and x.var == lanes for x in _all(lp)) for lp in parts), name
    c = p.compile("host", schedule="s", use_cache=False)
    for w in (1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 40):
        iw = (w - 1) // 3 + 2               # raw reads up to x / 3 + 1: exactly that wide
        img = np.random.RandomState(w).rand(3, max(iw, 1)).astype(np.float32)
        out = np.empty((2, w), np.float32)
        ref = np.empty((2, w), np.float32)
        p.realize_into(ref, img=img)
        c.realize_into(out, img=img)
        assert np.array_equal(out, ref), w
