"""tile_iir(x, y, nx, ny): filters along two dims tiled together (Nehab et al. 2011; the 2-D
tiling of Chaurasia et al. 2015). Checked against the evaluator (the serial filters), against
SciPy's lfilter in f64 (the textbook recurrence with zero initial conditions, which is what
`.iir` means: f taken as zero outside its range), and, for integers, bit for bit (wrapping
arithmetic is a ring, so the tiled algebra holds exactly)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import lfilter

import hdsl
from test_tile_iir import FLOAT as FLOAT_1D, _loops

# sizes below, at and above the tiles, multiples and not
SIZES = [(1, 1), (5, 7), (16, 16), (33, 17), (40, 9), (3, 64), (24, 8)]

# test_tile_iir.py's program (x+, x- first order; y+, y- second order), other schedules
FLOAT = FLOAT_1D.split("schedule both")[0] + """schedule joint { rf.compute_root().tile_iir(x, y, 8, 16) }
schedule joint_small { rf.compute_root().tile_iir(y, x, 3, 4) }
schedule separate { rf.compute_root().tile_iir(x, 8).tile_iir(y, 16) }
"""


def _scipy(img, filters):
    """The filters in order, each along its axis (0: y, 1: x), causal or anticausal, in f64:
    lfilter([b0], [1, -a1, ..., -ak]) with zero initial conditions; anticausal on the
    reversed signal."""
    z = img.astype(np.float64)
    for axis, sign, b0, fb in filters:
        den = [1.0] + [-a for a in fb]
        if sign == "+":
            z = lfilter([b0], den, z, axis=axis)
        else:
            z = np.flip(lfilter([b0], den, np.flip(z, axis), axis=axis), axis)
    return z


FLOAT_FILTERS = [(1, "+", 0.5, [0.5]), (1, "-", 0.5, [0.5]),
                 (0, "+", 0.25, [1.1, -0.35]), (0, "-", 0.25, [1.1, -0.35])]


@pytest.mark.parametrize("schedule", ["joint", "joint_small"])
@pytest.mark.parametrize("h,w", SIZES)
def test_float_filters_match_the_serial_filter_and_scipy(schedule, h, w):
    p = hdsl.loads(FLOAT, "iir.hl")
    img = np.random.RandomState(h * 100 + w).rand(h, w).astype(np.float32)
    ref = p(img=img)
    got = p.compile("host", schedule=schedule)(img=img)
    # f32, as tile_iir(v, n)'s tests: a handful of terms per point, values of order 1
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # SciPy in f64: each of the four filters has unit gain at zero frequency and poles at
    # most 0.7 in magnitude, so f32 rounding (6e-8 per operation) stays under 1e-5 here
    np.testing.assert_allclose(got, _scipy(img, FLOAT_FILTERS), rtol=1e-5, atol=1e-5)


def test_joint_and_separate_tiling_agree_on_a_large_image():
    """The bench's shape at 300 x 200 (not multiples of the tiles), against the two-pass
    tiling and SciPy."""
    p = hdsl.loads(FLOAT, "iir.hl")
    img = np.random.RandomState(7).rand(200, 300).astype(np.float32)
    joint = p.compile("host", schedule="joint")(img=img)
    np.testing.assert_allclose(joint, p.compile("host", schedule="separate")(img=img), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(joint, _scipy(img, FLOAT_FILTERS), rtol=1e-5, atol=1e-5)


INT = """
pipeline iir_int
input  img: i32[3]
output out: i32[3]
algorithm {
    rf(x, y, c) = img(x, y, c) + c
    rf.iir(-y, 1..img.height, 3, [2, -1, 5])
    rf.iir(+y, 1..img.height, -2, [7])
    rf.iir(+x, 0..img.width - 1, 1, [-3, 1])
    out(x, y, c) = rf(clamp(x, 0, img.width - 2), clamp(y, 1, img.height - 1), c)
}
schedule s { rf.compute_root().tile_iir(x, y, 5, 4) }
"""


def _wrap(z):
    return (z + 2**31) % 2**32 - 2**31


@pytest.mark.parametrize("h,w", [(2, 2), (5, 4), (9, 11), (13, 6)])
def test_integer_filters_are_exact(h, w):
    """The y filters first, then x; ranges short of the ends (1..h and 0..w - 1); order 3,
    1 and 2; a third dim carried through: bit for bit the evaluator's values and the
    textbook recurrence's (wrapping in i32)."""
    p = hdsl.loads(INT, "iir_int.hl")
    img = np.random.RandomState(h * w).randint(-1000, 1000, (h, w, 2)).astype(np.int32)
    got = p.compile("host", schedule="s")(img=img)
    np.testing.assert_array_equal(got, p(img=img))
    got = got[1:, :w - 1]                   # out reads rf inside the filters' box only
    z = img.astype(np.int64) + np.arange(2)[None, None, :]
    z = z[1:, :w - 1]                       # the box: y in 1..h - 1, x in 0..w - 2

    def run(z, axis, sign, b0, fb):
        z = np.moveaxis(z, axis, 0).copy()
        n = z.shape[0]
        order = range(n) if sign == "+" else range(n - 1, -1, -1)
        step = -1 if sign == "+" else 1
        for i in order:
            acc = b0 * z[i]
            for l, a in enumerate(fb, start=1):
                j = i + step * l
                if 0 <= j < n:
                    acc = acc + a * z[j]
            z[i] = _wrap(acc)
        return np.moveaxis(z, 0, axis)
    z = run(z, 0, "-", 3, [2, -1, 5])
    z = run(z, 0, "+", -2, [7])
    z = run(z, 1, "+", 1, [-3, 1])
    np.testing.assert_array_equal(got, z.astype(np.int32))


OUTPUT = """
pipeline iir_out
input  img: f32[2]
output rf: f32[2]
algorithm {
    rf(x, y) = img(x, y) * 2.0f
    rf.iir(+y, 0..img.height, 0.5f, [0.5f])
    rf.iir(+x, 0..img.width, 0.3f, [0.9f, -0.2f])
    rf.iir(-x, 0..img.width, 0.3f, [0.9f, -0.2f])
}
schedule s { rf.tile_iir(x, y, 16, 8) }
"""


@pytest.mark.parametrize("h,w", [(1, 1), (7, 5), (8, 16), (19, 37)])
def test_a_tiled_output(h, w):
    """The filtered Func is the output itself (its tiles' splits guarded at the buffer's
    edge), y filter first."""
    p = hdsl.loads(OUTPUT, "iir_out.hl")
    img = np.random.RandomState(w).rand(h, w).astype(np.float32)
    got = p.compile("host", schedule="s")(img=img)
    np.testing.assert_allclose(got, p(img=img), rtol=1e-5, atol=1e-6)
    ref = _scipy(img * 2, [(0, "+", 0.5, [0.5]), (1, "+", 0.3, [0.9, -0.2]), (1, "-", 0.3, [0.9, -0.2])])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)



# Tiles shorter than the filters' order (n < k): each tile's tails are the k values before
# its end, k - n of them in the tiles before (lower/tile_iir2d.py); wrong values before.
# Orders 3 and 1 along x (K = 3 slots beside each tile), 2 and 3 along y.
SHORT = """
pipeline iir_short
input  img: f32[2]
output out: f32[2]
algorithm {
    rf(x, y) = img(x, y)
    rf.iir(+x, 0..img.width, 0.2f, [0.9f, -0.3f, 0.1f])
    rf.iir(-x, 0..img.width, 0.4f, [0.6f])
    rf.iir(+y, 0..img.height, 0.25f, [1.1f, -0.35f])
    rf.iir(-y, 0..img.height, 0.2f, [0.9f, -0.3f, 0.1f])
    out(x, y) = rf(x, y)
}
""" + "".join(f"schedule t{nx}_{ny} {{ rf.compute_root().tile_iir(x, y, {nx}, {ny}) }}\n"
              for nx in range(1, 5) for ny in range(1, 5))
SHORT_FILTERS = [(1, "+", 0.2, [0.9, -0.3, 0.1]), (1, "-", 0.4, [0.6]),
                 (0, "+", 0.25, [1.1, -0.35]), (0, "-", 0.2, [0.9, -0.3, 0.1])]


def _check_short(schedule):
    p = hdsl.loads(SHORT, "iir_short.hl")
    c = p.compile("host", schedule=schedule)
    for h, w in ((1, 1), (1, 2), (2, 3), (3, 2), (5, 7), (13, 12)):
        img = np.random.RandomState(h * 100 + w).rand(h, w).astype(np.float32)
        got = c(img=img)
        np.testing.assert_allclose(got, p(img=img), rtol=1e-5, atol=1e-6, err_msg=f"{h}x{w}")
        # (the bug's errors were 4e-3 and more)
        np.testing.assert_allclose(got, _scipy(img, SHORT_FILTERS), rtol=1e-5, atol=1e-5, err_msg=f"{h}x{w}")


def test_tiles_shorter_than_the_filters_order():
    _check_short("t2_1")


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["t1_1", "t1_4", "t2_2", "t3_2", "t4_3", "t3_3", "t4_1"])
def test_every_tile_size_from_one_to_past_the_order(schedule):
    _check_short(schedule)

STENCIL = """
pipeline iir_st
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    rf(x, y) = (c(x - 1, y) + c(x + 1, y) + c(x, y - 1)) / 3.0f
    rf.iir(-x, 0..img.width, 0.5f, [0.5f])
    rf.iir(-y, 0..img.height, 0.5f, [0.5f])
    out(x, y) = rf(x, y) + 1.0f
}
schedule s { rf.compute_root().tile_iir(x, y, 4, 4) }
"""


@pytest.mark.parametrize("h,w", [(1, 1), (6, 9), (12, 12)])
def test_a_pure_definition_that_reads_a_stencil(h, w):
    """What the filters read is computed once (`rf.part`) when it reads more than two values;
    the input through repeat_edge."""
    p = hdsl.loads(STENCIL, "iir_st.hl")
    img = np.random.RandomState(w).rand(h, w).astype(np.float32)
    np.testing.assert_allclose(p.compile("host", schedule="s")(img=img), p(img=img), rtol=1e-5, atol=1e-6)


def test_the_image_is_read_twice():
    """The input is read by the intra chain (per tile, inside rf.edges) and by the final
    chain (per tile of rf); nothing else reads it, and the recursions are vectorized."""
    text = _loops(FLOAT, "joint")
    loads = [ln for ln in text.splitlines() if "img[" in ln]
    owners = {ln.strip().split("[")[0] for ln in loads}
    assert owners == {"rf.intra_x", "rf.final_x"}, owners
    for stage in ("rf.intra_x.s1", "rf.intra_y.s1", "rf.final_x.s2", "rf.final_y.s2"):
        assert f"vectorized for {stage}" in text, stage
    assert "parallel for rf.edges" in text and "parallel for rf.s0" in text


def test_reading_past_the_box_is_a_run_time_error():
    text = FLOAT.replace("out(x, y) = rf(x, y)", "out(x, y) = rf(x + 1, y)")
    p = hdsl.loads(text, "iir.hl")
    with pytest.raises(hdsl.HdslError) as e:
        p.compile("host", schedule="joint")(img=np.zeros((4, 4), np.float32))
    msg = str(e.value)
    assert "'rf' is needed at x = 1 .. 4, but tile_iir(x, y, 8, 16) computes it on its filters' range only, " \
           "x = 0 .. 3" in msg
    assert "iir.hl:15:" in msg and "hint: read 'rf' inside its filters' ranges" in msg


@pytest.mark.parametrize("algo,sched,message", [
    ("rf.iir(+x, 0..img.width, 0.5f, [0.5f])\n    rf.iir(+y, 0..img.height, 0.5f, [0.5f])\n"
     "    rf.iir(-x, 0..img.width, 0.5f, [0.5f])", "rf.tile_iir(x, y, 8, 8)",
     "needs the filters along one dim first, then those along the other; update(2) of 'rf' goes back to 'x'"),
    ("rf.iir(+x, 0..img.width, 0.5f, [0.5f])\n    rf(x, y) = rf(x, y) + 1.0f\n"
     "    rf.iir(+y, 0..img.height, 0.5f, [0.5f])", "rf.tile_iir(x, y, 8, 8)",
     "update(1) of 'rf' is not a recursive filter (.iir)"),
    ("rf.iir(+x, 0..img.width, 0.5f, [0.5f])", "rf.tile_iir(x, y, 8, 8)",
     "'rf' has no filter along 'y' to tile with its filters along 'x'"),
    ("rf.iir(+x, 0..img.width, 0.5f, [0.5f])\n    rf.iir(+y, 0..img.height, 0.5f, [0.5f])",
     "rf.tile_iir(x, x, 8, 8)", "tile_iir(x, x, ...) names one dim twice"),
    ("rf.iir(+x, 0..img.width, 0.5f, [0.5f])\n    rf.iir(-x, 1..img.width, 0.5f, [0.5f])\n"
     "    rf.iir(+y, 0..img.height, 0.5f, [0.5f])", "rf.tile_iir(x, y, 8, 8)",
     "needs one range for the filters along 'x'"),
    ("rf.iir(+x, 0..img.width, 0.5f, [0.5f])\n    rf.iir(+y, 0..img.height, 0.5f, [0.5f])",
     "rf.tile_iir(x, y, 8, 8).tile_iir(x, 8)", "'rf' is tiled twice"),
    ("rf.iir(+x, 0..img.width, 0.5f, [0.5f])\n    rf.iir(+y, 0..img.height, 0.5f, [0.5f])",
     "rf.tile_iir(x, y, 8, 8)\n    rf.update(1).vectorize(x, 8)",
     "'rf.update(1)' is one of the filters that tile_iir(x, y, ...) replaces"),
])
def test_unsupported_shapes_are_positioned_errors(algo, sched, message):
    text = f"""pipeline p
input  img: f32[2]
output out: f32[2]
algorithm {{
    rf(x, y) = img(x, y)
    {algo}
    out(x, y) = rf(x, y)
}}
schedule {{
    rf.compute_root()
    {sched}
}}
"""
    p = hdsl.loads(text, "p.hl")
    with pytest.raises(hdsl.HdslError) as e:
        p.compile("host")
    msg = str(e.value)
    assert message in msg, msg
    assert "p.hl:" in msg and "hint:" in msg and "^" in msg


NAMED = FLOAT.replace("schedule joint {", """schedule named {
    rf.compute_root().tile_iir(x, y, 8, 16)
    rf.final_y.compute_root().parallel(y_tile)
    rf.final_x.compute_at(rf.final_y, x_tile)
    rf.edges.parallel(x_tile)
}
schedule joint {""")


def test_named_stages_take_their_directives():
    """rf.intra_x, rf.intra_y, rf.edges, rf.final_x and rf.final_y are named like Funcs;
    their directives replace the stage's defaults, and the values stay the serial filter's."""
    p = hdsl.loads(NAMED, "named.hl")
    for h, w in ((1, 1), (17, 33)):
        img = np.random.RandomState(w).rand(h, w).astype(np.float32)
        np.testing.assert_allclose(p.compile("host", schedule="named")(img=img), p(img=img), rtol=1e-5, atol=1e-6)
    named, default = _loops(NAMED, "named"), _loops(NAMED, "joint")
    assert "parallel for rf.final_y.s0.y_tile" in named and "parallel for rf.final_y" not in default
    assert "parallel for rf.edges.s0.x_tile" in named and "parallel for rf.edges.s0.y_tile" in default


@pytest.mark.parametrize("stage,message", [
    ("rf.tile_iir(x, y, 8, 8)\n    rf.intra_z.compute_root()",
     "tile_iir(x, y, 8, 8) makes no stage 'intra_z' of 'rf'"),
    ("rf.final_y.compute_root()\n    rf.tile_iir(x, y, 8, 8)",
     "'rf.final_y' is a stage of rf.tile_iir(x, y, nx, ny), which this schedule has not given (yet)"),
])
def test_naming_a_stage_that_does_not_exist(stage, message):
    text = FLOAT.split("schedule joint")[0] + "schedule s {\n    rf.compute_root()\n    " + stage + "\n}\n"
    with pytest.raises(hdsl.HdslError) as e:
        hdsl.loads(text, "t.hl")
    assert message in str(e.value)
