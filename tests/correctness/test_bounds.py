"""Bounds inference: producers read at coordinates built from every kind of
operator (negative division and modulus, shifts, bit masks, casts, select,
min/max, data-dependent lookups), and updates that write or read outside
the region their consumer asks for. The evaluator must compute exactly the
needed region (reads outside it are internal errors), and the values must
match a reference that evaluates the producer's formula directly."""
from __future__ import annotations

import numpy as np
import pytest

from hdsl import HdslError

from .helpers import assert_same, load, program, rand_image


def g_ref(i):
    """The producer g(i) = i * 7 - 3 with i32 wrap-around."""
    return (np.asarray(i, np.int64) * 7 - 3).astype(np.int32)


COORDS = [
    # (hdsl coordinate expression in x, NumPy reference of the same)
    ("(x - 20) / 3", lambda x: (x - 20) // 3),
    ("(x - 20) % 3", lambda x: np.mod(x - 20, 3)),
    ("(x - 20) / -3", lambda x: -((x - 20) // 3)),
    ("(20 - x) % -4", lambda x: np.mod(20 - x, 4)),
    ("(x - 20) >> 2", lambda x: (x - 20) >> 2),
    ("(x - 3) << 2", lambda x: (x - 3) << 2),
    ("(x * 37) & 15", lambda x: (x * 37) & 15),
    ("(x * 37) | 3", lambda x: (x * 37) | 3),
    ("(x * 5) ^ 6", lambda x: (x * 5) ^ 6),
    ("~x", lambda x: -x - 1),
    ("-x * 2", lambda x: -x * 2),
    ("select(x > 10, x - 100, x + 100)", lambda x: np.where(x > 10, x - 100, x + 100)),
    ("x > 10 ? 2 * x : -x", lambda x: np.where(x > 10, 2 * x, -x)),
    ("min(x, 7) + max(x - 30, -2)", lambda x: np.minimum(x, 7) + np.maximum(x - 30, -2)),
    ("clamp(x * 3 - 5, 2, 40)", lambda x: np.clip(x * 3 - 5, 2, 40)),
    ("i32(u8(x * 11))", lambda x: (x * 11) % 256),
    ("i32(i8(x * 11))", lambda x: (x * 11 + 128) % 256 - 128),
    ("i32(abs(x - 15))", lambda x: np.abs(x - 15)),
    ("i32(absd(x, 15))", lambda x: np.abs(x - 15)),
    ("i32(f32(x) * 0.5f - 3.0f)", lambda x: np.trunc(x.astype(np.float32) * np.float32(0.5) - np.float32(3)).astype(np.int64)),
    ("i32(floor(f32(x - 20) / 3.0f))", lambda x: np.floor((x - 20).astype(np.float32) / np.float32(3)).astype(np.int64)),
    ("i32(ceil(f32(x) / 4.0f)) - i32(round(f32(x) * 0.3f))",
     lambda x: np.ceil(x.astype(np.float32) / np.float32(4)).astype(np.int64)
     - np.round(x.astype(np.float32) * np.float32(0.3)).astype(np.int64)),
    # integer lerp: zero + (one - zero) * w / 255, rounded to nearest (exact rationals)
    ("i32(lerp(u8(x), u8(200), u8(128)))", lambda x: (2 * (x * 127 + 200 * 128) + 255) // 510),
    ("(x - 20) / 0 + (x - 20) % 0 + x", lambda x: x),
    ("x * x - 30 * x", lambda x: x * x - 30 * x),
    ("i32(i16(x) * i16(3000))", lambda x: (x * 3000 + 32768) % 65536 - 32768),
    ("i32(u16(x) - u16(5))", lambda x: (x - 5) % 65536),
]


@pytest.mark.parametrize("expr,ref", COORDS, ids=[c[0] for c in COORDS])
def test_producer_read_at_computed_coordinates(expr, ref):
    p = program(f"""
pipeline coords
input img: i32[1]
output out: i32[1]
algorithm {{
    g(i) = i * 7 - 3
    out(x) = g({expr}) + img(x) * 0
}}
""")
    n = 41
    out = p(img=np.zeros(n, np.int32))
    x = np.arange(n, dtype=np.int64)
    assert_same(out, g_ref(ref(x)))


def test_lookup_table_indexed_by_data(rng):
    """A u8 value as a coordinate: the table is computed over 0..255 only."""
    p = program("""
pipeline lut
input img: u8[2]
input shift: i8[2]
output out: i32[2]
algorithm {
    lut(i) = i * i - 1000
    lut2(i) = i * 3
    out(x, y) = lut(i32(img(x, y))) + lut2(clamp(i32(shift(x, y)) * 5, -50, 50))
}
""")
    img = rand_image(rng, (11, 13), np.uint8)
    shift = rand_image(rng, (11, 13), np.int8)
    i = img.astype(np.int64)
    s = np.clip(shift.astype(np.int64) * 5, -50, 50)
    assert_same(p(img=img, shift=shift), (i * i - 1000 + s * 3).astype(np.int32))


def test_pure_func_at_unbounded_coordinates_is_computed_where_used():
    """Halide inlines such a Func; the evaluator falls back to computing it per use."""
    p = program("""
pipeline unbounded
input img: i32[1]
output out: i32[1]
algorithm {
    g(i) = i * 2 + 1
    out(x) = g(img(x))
}
""")
    v = np.array([5, -7, 2 ** 30, 0, 3], np.int32)
    assert np.array_equal(p(img=v), (v * 2 + 1).astype(np.int32))


def test_unbounded_data_dependent_coordinate_is_an_error():
    """A reduction can't be computed per use: an unbounded region of it is an error."""
    import hdsl
    p = program("""
pipeline unbounded
input img: i32[1]
output out: i32[1]
algorithm {
    g(i) = i
    g(i) += 1
    out(x) = g(img(x))
}
""")
    with pytest.raises(hdsl.HdslError) as e:
        p(img=np.zeros(5, np.int32))
    assert "'g'" in str(e.value)


def test_update_writes_outside_consumer_region():
    """The update's LHS footprint widens the region of the pure definition."""
    p = program("""
pipeline widen
input v: i32[1]
output out: i32[1]
algorithm {
    f(x) = x * 10
    rdom r = [0..5]
    f(r.x + 8) = f(r.x) + f(r.x + 12)
    f(r.x * 3 - 4) += 1
    out(x) = f(x)
}
""")
    out = p.realize((10,), v=np.zeros(1, np.int32))
    f = {i: i * 10 for i in range(-4, 30)}
    for rx in range(5):
        f[rx + 8] = f[rx] + f[rx + 12]
    for rx in range(5):
        f[rx * 3 - 4] += 1
    assert_same(out, np.array([f[i] for i in range(10)], np.int32))


def test_rdom_bounds_from_params_and_empty_rdom():
    p = program("""
pipeline rparams
input v: i32[1]
param lo: i32 = 2
param n: i32 = 3
output out: i32[1]
algorithm {
    f(x) = v(x)
    rdom r = [lo..lo + n]
    f(r.x) = f(r.x) * 100 + r.x
    out(x) = f(x)
}
""")
    v = np.arange(1, 9, dtype=np.int32)
    ref = v.copy()
    ref[2:5] = ref[2:5] * 100 + np.arange(2, 5)
    assert_same(p(v=v), ref)
    ref = v.copy()
    ref[6:8] = ref[6:8] * 100 + np.arange(6, 8)
    assert_same(p(v=v, lo=6, n=2), ref)
    assert_same(p(v=v, lo=3, n=0), v)          # an empty rdom runs nothing
    assert_same(p(v=v, lo=3, n=-4), v)


def test_chain_of_stencils_grows_regions():
    """Four stages, each a 3-tap stencil in x and y: the first is needed
    over a region 4 wider on each side; all read the input through mirror."""
    p = program("""
pipeline chain
use boundary
input img: i16[2]
output out: i32[2]
algorithm {
    c = mirror_interior(img)
    s0(x, y) = i32(c(x, y))
    s1(x, y) = s0(x - 1, y + 1) - s0(x + 1, y - 1)
    s2(x, y) = s1(x, y - 1) * 2 + s1(x + 1, y)
    s3(x, y) = s2(x - 1, y) + s2(x + 1, y + 1)
    out(x, y) = s3(x, y) - s3(x, y - 1)
}
""")
    rng = np.random.default_rng(5)
    img = rand_image(rng, (7, 9), np.int16)
    h, w = img.shape

    def mi(i, n):
        m = np.mod(i, 2 * (n - 1))
        return np.where(m < n, m, 2 * (n - 1) - m)

    s0 = lambda x, y: img[mi(y, h), mi(x, w)].astype(np.int64)
    s1 = lambda x, y: s0(x - 1, y + 1) - s0(x + 1, y - 1)
    s2 = lambda x, y: s1(x, y - 1) * 2 + s1(x + 1, y)
    s3 = lambda x, y: s2(x - 1, y) + s2(x + 1, y + 1)
    ys, xs = np.mgrid[0:h, 0:w]
    assert_same(p(img=img), (s3(xs, ys) - s3(xs, ys - 1)).astype(np.int32))


def test_reduction_domain_read_through_a_consumer_offset():
    """An inline reduction's Func is needed at shifted coordinates by two consumers."""
    p = program("""
pipeline redshift
input img: i32[1]
output out: i32[1]
algorithm {
    var x
    rdom r = [0..3]
    s(x) = sum(img(x + r.x))
    out(x) = s(x + 2) - s(x)
}
""")
    img = np.arange(20, dtype=np.int32) ** 2
    out = p.realize((15,), img=img)
    s = np.array([img[i:i + 3].sum() for i in range(18)])
    assert_same(out, (s[2:17] - s[0:15]).astype(np.int32))


def test_gather_through_data_dependent_clamped_index(rng):
    p = program("""
pipeline gather
input img: f32[2]
input idx: i16[1]
output out: f32[2]
algorithm {
    out(x, y) = img(clamp(i32(idx(x)), 0, img.width - 1), y)
}
""")
    img = rand_image(rng, (5, 9), np.float32)
    idx = rng.integers(-5, 15, 12).astype(np.int16)
    out = p.realize((12, 5), img=img, idx=idx)
    assert_same(out, img[:, np.clip(idx, 0, 8)])


def test_output_read_by_another_output():
    p = program("""
pipeline chained_outputs
input v: i32[1]
output a: i32[1]
output b: i32[1]
algorithm {
    a(x) = v(x) * 2
    rdom r = [1..v.width]
    a(r.x) = a(r.x) + a(r.x - 1)
    b(x) = a(x + 3) - a(x)
}
""")
    v = np.arange(10, dtype=np.int32)
    c = np.cumsum(v * 2).astype(np.int32)
    for q in (p, p.compile("host")):
        a, b = q.realize([[10], [7]], v=v)
        assert_same(a, c)
        assert_same(b, c[3:10] - c[:7])
        # a's update writes a(1 .. 9), and b reads a(x + 3): an output a's buffer does not
        # hold is an error in the evaluator as in native code (as in Halide), not a larger
        # region computed and cut down in silence
        with pytest.raises(HdslError) as e:
            q.realize((4,), v=v)
        assert str(e.value).startswith("error: output 'a' is written at x = 0 .. 9, but the buffer covers x = 0 .. 3")


def test_rdom_bounds_from_an_input_and_bad_bounds():
    import hdsl
    src = """
pipeline rb
input v: i32[1]
output a: i32[1]
algorithm {
    n(x) = 3
    rdom r = [0..BOUND]
    a(x) = 0
    a(x) += r.x
}
"""
    v = np.arange(10, dtype=np.int32) + 3
    assert_same(program(src.replace("BOUND", "v(1)")).realize((2,), v=v), np.array([6, 6], np.int32))
    with pytest.raises(hdsl.HdslError) as e:
        program(src.replace("BOUND", "v(20)")).realize((2,), v=v)
    assert "input 'v' is read at x = 20" in str(e.value)
    with pytest.raises(hdsl.HdslError) as e:
        program(src.replace("BOUND", "n(0)")).realize((2,), v=v)
    assert "the bounds of rdom 'r' read Func 'n'" in str(e.value)


BOUNDED = """
pipeline bounded
input img: u8[2]
param w: i32 = 8
output out: u8[2]
algorithm {
    f(x, y) = img(x, y) + 1
    out(x, y) = f(x, y) + f(x + 1, y)
}
schedule {
    f.compute_root().bound(x, 0, w)
}
schedule on_output {
    out.bound(x, 0, 4)
}
"""


def test_bound_too_small_is_the_same_error_in_the_evaluator_and_native_code():
    """Halide's Func::bound (src/Func.h, its doc comment): "If bounds inference decides that it
    requires more of this function than the bounds you have stated, a runtime error will
    occur when you try to run your pipeline." out needs f at x = 0 .. 8 for 8 columns; the bound
    covers 0 .. 7. The evaluator used to ignore bound() and return values; both now name the
    Func, the var, the region needed and the bound, at the directive."""
    p = program(BOUNDED, "bounded.hl")
    img = np.arange(80, dtype=np.uint8).reshape(8, 10)
    expected = ("bounded.hl:11:5: error: 'f' is needed at x = 0 .. 8, but its bound(x, 0, 8) covers x = 0 .. 7\n"
                "        f.compute_root().bound(x, 0, w)\n")
    for q in (p, p.compile("host")):
        with pytest.raises(HdslError) as e:
            q.realize((8, 8), img=img)
        assert str(e.value).startswith(expected)
        assert "hint: widen the bound, or shrink the output" in str(e.value)
        # 7 columns need f at x = 0 .. 7: within the bound, and the values are those of no bound
        ref = (img[:, :7] + np.uint8(1)) + (img[:, 1:8] + np.uint8(1))
        assert_same(q.realize((7, 8), img=img), ref)
        # a param bound: widened, the 8 columns run
        assert_same(q.realize((8, 8), img=img, w=9), (img[:, :8] + np.uint8(1)) + (img[:, 1:9] + np.uint8(1)))
    # on an output: the caller asks for more than the bound allows
    for q in (p.compile("interp", schedule="on_output"), p.compile("host", schedule="on_output")):
        with pytest.raises(HdslError) as e:
            q.realize((5, 8), img=img)
        assert str(e.value).startswith("bounded.hl:14:5: error: 'out' is needed at x = 0 .. 4, but its "
                                       "bound(x, 0, 4) covers x = 0 .. 3")


HISTOGRAM = """
pipeline hist
input img: u8[2]
output h: i32[1]
algorithm {
    rdom r = [0..img.width, 0..img.height]
    h(i) = 0
    h(i32(img(r.x, r.y))) += 1
}
"""


def test_histogram_written_past_its_output_is_the_same_error_everywhere():
    """A 100-bin output whose update writes bins 0 .. 255: native code reported it, the
    evaluator computed 256 bins and returned the first 100 (losing counts in silence).
    Halide checks an output buffer against the region its updates touch and fails with
    halide_error_access_out_of_bounds ("h is accessed at 255, which is beyond the max (99)",
    src/runtime/errors.cpp)."""
    p = program(HISTOGRAM, "hist.hl")
    img = (np.arange(64, dtype=np.int64).reshape(8, 8) * 37 % 256).astype(np.uint8)
    for q in (p, p.compile("host")):
        with pytest.raises(HdslError) as e:
            q.realize((100,), img=img)
        assert str(e.value) == ("error: output 'h' is written at x = 0 .. 255, but the buffer covers x = 0 .. 99\n"
                                "hint: make the output larger, or keep computed coordinates within it")
        assert_same(q.realize((256,), img=img), np.bincount(img.ravel(), minlength=256).astype(np.int32))


def test_outputs_with_an_origin_run_a_stencil_without_a_boundary_condition():
    """The spec's first program reads img(x - 1, y - 1) and img(x + 1, y + 1): on an output
    whose first point is (1, 1) and that is 2 smaller, it reads exactly the input. Checked
    against NumPy (u16 arithmetic wraps, as in hdsl) in the evaluator and native code, through
    realize(min=...) and realize_into(min=...), as Halide runs a pipeline into a buffer whose
    mins were moved with Buffer::set_min (python_bindings PyBuffer.cpp, "set_min")."""
    p = load("spec_blur")     # (its 256x32 tiles: an input at least one tile wide)
    img = np.random.RandomState(3).randint(0, 65536, (37, 300)).astype(np.uint16)
    bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) // 3
    ref = (bx[:-2] + bx[1:-1] + bx[2:]) // 3
    for q in (p, p.compile("host")):
        assert_same(q.realize((298, 35), min=(1, 1), img=img), ref)
        # a window further in: the output's element [0, 0] is out(5, 3)
        assert_same(q.realize((20, 10), min=(5, 3), img=img), ref[2:12, 4:24])
        into = np.zeros((35, 298), np.uint16)
        q.realize_into(into, min=(1, 1), img=img)
        assert_same(into, ref)
        # at the default origin the stencil reads img(-1, y)
        with pytest.raises(HdslError) as e:
            q.realize((298, 35), img=img)
        assert "input 'img' is read at x = -1 .. 298, but the buffer covers x = 0 .. 299" in str(e.value)
        with pytest.raises(HdslError) as e:
            q.realize((298, 35), min=(1, 1, 0), img=img)
        assert "output 'out' has 2 dimensions, but the min given has 3" in str(e.value)
