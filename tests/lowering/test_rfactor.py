"""rfactor: the factored reduction gives the evaluator's results (exactly for integers and max)."""
import numpy as np
import pytest

import hdsl

SRC = """
pipeline rf
input img: i32[2]
input fimg: f32[2]
output total: i32[1]
output mx: f32[1]
output fsum: f32[1]
algorithm {
    rdom r = img
    total(c) = 0
    total(c) += img(r.x, r.y) * (c + 1)
    mx(c) = -1000.0f
    mx(c) = max(mx(c), f32(img(r.x, r.y)) + f32(c))
    rdom s = fimg
    fsum(c) = 0.0f
    fsum(c) += fimg(s.x, s.y) * f32(c + 1)
}
schedule {
    total.update(0).rfactor(r.y, v)
    mx.update(0).rfactor(r.x, u)
    fsum.update(0).rfactor(s.y, w)
}
schedule predicated {
    total.update(0).rfactor(r.x, v)
}
"""


@pytest.fixture(scope="module")
def data():
    rs = np.random.RandomState(0)
    return dict(img=rs.randint(-1000, 1000, (23, 31)).astype(np.int32), fimg=rs.rand(17, 9).astype(np.float32))


@pytest.fixture(scope="module")
def pipe():
    return hdsl.loads(SRC, "rf.hl")


def assert_both(p, sizes, want, schedule=None, **inputs):
    """The evaluator and native code (with `schedule`) both give `want`, exactly."""
    assert np.array_equal(p.realize(sizes, **inputs), want)
    assert np.array_equal(p.compile("host", schedule=schedule).realize(sizes, **inputs), want)


def test_rfactor_matches_the_evaluator(pipe, data):
    ref = pipe.realize([[4], [4], [4]], **data)
    got = pipe.compile("host").realize([[4], [4], [4]], **data)
    assert np.array_equal(got[0], ref[0])          # integer sums: exact
    assert np.array_equal(got[1], ref[1])          # max: exact
    assert np.allclose(got[2], ref[2], rtol=1e-5)  # float sums: reassociated
    assert np.array_equal(got[0], data["img"].sum() * np.arange(1, 5))


def test_rfactor_over_the_other_dimension(pipe, data):
    ref = pipe.realize([[4], [4], [4]], **data)
    got = pipe.compile("host", schedule="predicated").realize([[4], [4], [4]], **data)
    assert np.array_equal(got[0], ref[0])


def test_rfactor_of_a_non_associative_update_is_refused():
    src = """
pipeline bad
input img: i32[1]
output f: i32[1]
algorithm {
    rdom r = img
    f(x) = 1
    f(x) = f(x) * 2 - img(r.x)
}
schedule { f.update(0).rfactor(r.x, u) }
"""
    p = hdsl.loads(src, "bad.hl")
    with pytest.raises(hdsl.HdslError, match="rfactor needs an associative update"):
        p.compile("host")


# ---------------------------------------------------------------- computed left-hand sides (issue 14 item 5)

HIST = """
pipeline hist
input img: u8[2]
output hist: i32[1]
algorithm {
    rdom r = img
    hist(i) = 0
    hist(i32(img(r.x, r.y)) / 4) += 1
}
schedule by_rows { hist.update(0).rfactor(r.y, y) }
schedule by_columns { hist.update(0).rfactor(r.x, x) }
schedule by_rows_vectorized {
    hist.vectorize(i, 8)
    hist.update(0).rfactor(r.y, y)
}
"""


@pytest.mark.parametrize("schedule", ["by_rows", "by_columns", "by_rows_vectorized"])
@pytest.mark.parametrize("shape", [(13, 17), (1, 5), (40, 3)])
def test_rfactor_of_a_histogram(schedule, shape):
    """Halide's tutorial lesson 18 (tutorial/lesson_18_parallel_associative_reductions.cpp, lines
    116-135): `histogram(input(r.x, r.y) / 32) += 1` — a computed left-hand side — factored with
    `rfactor({{r.y, y}})` gives the serial histogram. The merge stage runs over every bin
    (Halide's Stage::rfactor writes it over the pure vars), so bins no pixel falls in stay 0."""
    p = hdsl.loads(HIST, "hist.hl")
    img = np.random.RandomState(sum(shape)).randint(0, 256, shape).astype(np.uint8)
    want = np.bincount(img.ravel() // 4, minlength=70)[:70].astype(np.int32)
    assert_both(p, [70], want, schedule=schedule, img=img)


NON_TRIVIAL_LHS = """
pipeline lhs
input a: i32[3]
input b: i32[3]
input c: i32[3]
output g: i32[2]
algorithm {
    rdom r = [0..5, 0..5, 0..5]
    f(x, y) = 1
    f(clamp(a(r.x, r.y, r.z), 0, 19), clamp(b(r.x, r.y, r.z), 0, 29)) += c(r.x, r.y, r.z)
    g(x, y) = 2 * f(x, y)
}
schedule {
    f.compute_root()
    f.update(0).rfactor(RV, u)
}
"""


@pytest.mark.parametrize("rvar", ["r.z", "r.y", "r.x"])
def test_rfactor_of_a_two_dimensional_computed_left_hand_side(rvar):
    """Halide's test/correctness/rfactor.cpp, non_trivial_lhs_rfactor_test: both coordinates of
    the left-hand side computed, `f(clamp(a(r), 0, 19), clamp(b(r), 0, 29)) += c(r)`; each
    single reduction variable factored out gives the serial result."""
    p = hdsl.loads(NON_TRIVIAL_LHS.replace("RV", rvar), "lhs.hl")
    rs = np.random.RandomState(5)
    # (arrays are (z, y, x): img(x, y, z) reads array[z, y, x])
    a, b, c = (rs.randint(-3, 25, (5, 5, 5)).astype(np.int32) for _ in range(3))
    want = np.ones((20, 20), np.int64)             # indexed [x, y]
    for z in range(5):
        for y in range(5):
            for x in range(5):
                xi, yi = min(max(a[z, y, x], 0), 19), min(max(b[z, y, x], 0), 29)
                if yi < 20:
                    want[xi, yi] += c[z, y, x]
    want = (2 * want.T).astype(np.int32)           # g(x, y) as a (y, x) array
    assert_both(p, [20, 20], want, a=a, b=b, c=c)


# ---------------------------------------------------------------- tuple updates (argmin, argmax)

ARGMIN = """
pipeline am
input img: i32[2]
output pos: i32[1]
algorithm {
    rdom r = img
    am(c) = (1000, -1, -1)
    am(c) = (min(am(c)[0], img(r.x, r.y) * (c + 1)),
             select(am(c)[0] CMP img(r.x, r.y) * (c + 1), am(c)[1], r.x),
             select(am(c)[0] CMP img(r.x, r.y) * (c + 1), am(c)[2], r.y))
    pos(c) = am(c)[0] * 10000 + am(c)[1] * 100 + am(c)[2]
}
schedule {
    am.compute_root()
    am.update(0).rfactor(r.y, v)
}
"""


def _argmin_reference(img, strict):
    """(min, x, y) with ties going to the last point in rdom order (`<`: keep the old one only
    when strictly smaller) or the first (`<=`); rdom order is row-major, r.x innermost."""
    flat = img.ravel()
    m = flat.min()
    hits = np.flatnonzero(flat == m)
    k = hits[-1] if strict else hits[0]
    y, x = divmod(int(k), img.shape[1])
    return int(m) * 10000 + x * 100 + y


@pytest.mark.parametrize("cmp", ["<", "<=", "CMPFLIP"])
def test_rfactor_of_an_argmin_tuple(cmp):
    """Halide's test/correctness/rfactor.cpp, argmin_rfactor_test: a three-element tuple
    (min, x, y) whose index elements are `select(g()[0] < f(r.x, r.y), g()[1], r.x)`, factored
    over the outer reduction variable, gives the serial result. Halide's table also has the
    comparison written as `y0 > x0` (AssociativeOpsTable.cpp, argmin patterns)."""
    if cmp == "CMPFLIP":
        src = ARGMIN.replace("am(c)[0] CMP img(r.x, r.y) * (c + 1)", "img(r.x, r.y) * (c + 1) > am(c)[0]")
        strict = True
    else:
        src = ARGMIN.replace("CMP", cmp)
        strict = cmp == "<"
    p = hdsl.loads(src, "am.hl")
    img = np.random.RandomState(7).randint(0, 4, (9, 7)).astype(np.int32)     # many ties
    want = np.array([_argmin_reference(img * (c + 1), strict) for c in range(2)], np.int32)
    assert_both(p, [2], want, img=img)


def test_argmin_agrees_with_halide():
    """The same argmin in Halide (the `halide` package) with its rfactor(r.y, u) schedule."""
    hl = pytest.importorskip("halide")
    img = np.random.RandomState(8).randint(0, 3, (6, 5)).astype(np.int32)
    r = hl.RDom([hl.Range(0, 5), hl.Range(0, 6)])
    g = hl.Func("g")
    g[()] = (hl.i32(1000), hl.i32(-1), hl.i32(-1))
    v = hl.Buffer(img)[r.x, r.y]
    g[()] = (hl.min(g[()][0], v), hl.select(g[()][0] < v, g[()][1], r.x), hl.select(g[()][0] < v, g[()][2], r.y))
    g.update(0).rfactor(r.y, hl.Var("u"))
    m, x, y = (int(o[()]) for o in g.realize([]))
    p = hdsl.loads(ARGMIN.replace("CMP", "<"), "am.hl")
    assert p.compile("host").realize([1], img=img)[0] == m * 10000 + x * 100 + y


def test_rfactor_of_an_argmax_with_the_index_first():
    """AssociativeOpsTable.cpp, populate_ops_table_double_general_select: argmax with the index
    as the first tuple element, `{select(x1 > y1, x0, y0), max(x1, y1)}`."""
    src = """
pipeline amx
input img: f32[2]
output pos: i32[1]
algorithm {
    rdom r = img
    am(c) = (0, -1000.0f)
    am(c) = (select(am(c)[1] > img(r.x, r.y), am(c)[0], r.x + 100 * r.y), max(am(c)[1], img(r.x, r.y)))
    pos(c) = am(c)[0]
}
schedule {
    am.compute_root()
    am.update(0).rfactor(r.y, v)
}
"""
    p = hdsl.loads(src, "amx.hl")
    img = np.random.RandomState(9).randint(0, 5, (8, 6)).astype(np.float32)
    flat = img.ravel()
    k = int(np.flatnonzero(flat == flat.max())[-1])         # ties: the last (`>` keeps only a larger old)
    want = np.array([k % 6 + 100 * (k // 6)], np.int32)
    assert_both(p, [1], want, img=img)


def test_rfactor_of_independent_tuple_elements():
    """Halide's test/correctness/rfactor.cpp, tuple_rfactor_test: `Tuple(g[0] + f(r)[0] + 3,
    min(g[1], f(r)[1]))` — each element its own associative operator (the sum written as a
    chain with g[0] inside, which Halide's solver moves to the left)."""
    src = """
pipeline tup
input img: i32[2]
output out: i32[2]
algorithm {
    rdom r = img
    g(x, y) = (1, 3)
    g(x, y) = (g(x, y)[0] + (img(r.x, r.y) + x) + 3, min(g(x, y)[1], img(r.x, r.y) - y))
    out(x, y) = g(x, y)[0] * 1000 + g(x, y)[1]
}
schedule {
    g.compute_root()
    g.update(0).rfactor(r.x, u)
}
"""
    p = hdsl.loads(src, "tup.hl")
    img = np.random.RandomState(10).randint(-50, 50, (5, 7)).astype(np.int32)
    ys, xs = np.mgrid[0:3, 0:4]
    s = 1 + img.sum() + img.size * (xs + 3)
    m = np.minimum(3, img.min() - ys)
    want = (s * 1000 + m).astype(np.int32)
    assert_both(p, [4, 3], want, img=img)


def test_rfactor_of_an_inner_variable_of_an_argmin_is_refused():
    """Halide marks argmin commutative and factors its inner reduction variable too, which
    changes the point chosen among ties (with the `halide` package, rfactor(r.x, u) of
    argmin_rfactor_test's form over [[3, 1, 5, 1], [1, 0, 2, 0], [0, 7, 0, 9]] picks (3, 1) where
    the serial reduction picks (2, 2)); hdsl refuses it, as Halide does for non-commutative
    operators (Func.cpp, rfactor_validate_args)."""
    src = ARGMIN.replace("CMP", "<").replace("rfactor(r.y, v)", "rfactor(r.x, v)")
    p = hdsl.loads(src, "am.hl")
    with pytest.raises(hdsl.HdslError, match="would change which point an argmin/argmax picks") as e:
        p.compile("host")
    assert "rfactor(r.y, v)" in str(e.value)


@pytest.mark.parametrize("update", [
    "f(x) = f(x) - img(r.x)",                   # subtraction: not in Halide's table
    "f(x) = img(r.x)",                          # no previous value: no identity
    "f(x) = f(x) * 2 + img(r.x)",               # x op (y op' x): not one operator
    "f(x) = max(f(x), img(r.x) + f(x))",        # the new value reads f
])
def test_non_associative_updates_are_refused(update):
    """Halide's prove_associativity (src/Associativity.cpp) refuses these forms."""
    src = f"""
pipeline bad
input img: i32[1]
output f: i32[1]
algorithm {{
    rdom r = [0..img.width, 0..2]
    f(x) = 1
    {update.replace("img(r.x)", "img(r.x) * (r.y + 1)")}
}}
schedule {{ f.update(0).rfactor(r.y, u) }}
"""
    p = hdsl.loads(src, "bad.hl")
    with pytest.raises(hdsl.HdslError, match="rfactor needs an associative update"):
        p.compile("host")


@pytest.mark.parametrize("written", ["canonical", "swapped"])
def test_rfactor_of_a_complex_product(written):
    """Halide's test/correctness/rfactor.cpp, complex_multiply_rfactor_test: the tuple
    `(g[0] * f[0] - g[1] * f[1], g[0] * f[1] + g[1] * f[0])` (AssociativeOpsTable.cpp's
    two-element subtraction pattern, factors and terms in either order) is a complex product,
    associative with identity (1, 0): factored, it gives the serial product exactly (integers)."""
    if written == "canonical":
        update = "g(x) = (g(x)[0] * re(r.x, r.y) - g(x)[1] * im(r.x, r.y), g(x)[0] * im(r.x, r.y) + g(x)[1] * re(r.x, r.y))"
    else:
        update = "g(x) = (re(r.x, r.y) * g(x)[0] - im(r.x, r.y) * g(x)[1], re(r.x, r.y) * g(x)[1] + im(r.x, r.y) * g(x)[0])"
    src = f"""
pipeline cm
input a: i32[2]
output out: i32[2]
algorithm {{
    rdom r = [0..3, 0..2]
    re(x, y) = a(x, y) + x
    im(x, y) = a(x, y) - y
    g(x) = (10 + x, 20)
    {update}
    out(x, c) = select(c == 0, g(x)[0], g(x)[1])
}}
schedule {{
    g.compute_root()
    g.update(0).rfactor(r.y, u)
}}
"""
    p = hdsl.loads(src, "cm.hl")
    arr = np.random.RandomState(12).randint(-2, 3, (2, 3)).astype(np.int32)
    want = np.zeros((2, 4), np.int64)
    for x in range(4):
        z = complex(10 + x, 20)
        for yy in range(2):
            for xx in range(3):
                z *= complex(arr[yy, xx] + xx, arr[yy, xx] - yy)
        want[:, x] = [round(z.real), round(z.imag)]
    assert_both(p, [4, 2], want.astype(np.int32), a=arr)


ROUTED = """
pipeline sr
input img: i32[2]
output total: i32[1]
algorithm {
    rdom r = img
    total(c) = 0
    total(c) += img(r.x, r.y) * (c + 1)
}
schedule { SCHED }
"""


@pytest.mark.parametrize("sched", [
    "total.update(0).split(r.x, a, b, 4).unroll(b).rfactor(r.y, v)",      # r.x's loops: the intermediate's
    "total.update(0).split(r.y, a, b, 2).rfactor(r.y, v)",                # r.y's loops: the merge's
    "total.update(0).reorder(r.y, r.x).rfactor(r.x, v)",                  # both: reordered in the intermediate
    "total.update(0).split(r.x, a, b, 2).reorder(r.y, b, a).rfactor(r.y, v)",   # (the merge has no a, b)
    "total.update(0).rfactor(r.x, v)\n total.update(0).parallel(c, 2)",   # the merge stage, afterwards
])
def test_directives_before_rfactor_go_with_their_loops(sched):
    """Halide's Stage::rfactor copies the stage's schedule (its RVar splits) to the intermediate
    and keeps the preserved RVar for the merge (Func.cpp: intm's `schedule() =
    definition.schedule().get_copy()`, `definition.schedule().dims() = reducing_dims`); a split
    of r.x written before rfactor(r.y, v) used to reach the merge stage and fail there
    ("internal compiler error: KeyError: 'r.x'")."""
    p = hdsl.loads(ROUTED.replace("SCHED", sched), "sr.hl")
    img = np.random.RandomState(13).randint(-50, 50, (7, 9)).astype(np.int32)
    assert_both(p, [3], (img.sum() * np.arange(1, 4)).astype(np.int32), img=img)


def test_a_directive_mixing_kept_and_moved_rvars_is_refused():
    p = hdsl.loads(ROUTED.replace("SCHED", "total.update(0).fuse(r.x, r.y, q).rfactor(r.y, v)"), "sr.hl")
    with pytest.raises(hdsl.HdslError, match="'fuse' here mixes r.y, which rfactor keeps"):
        p.compile("host")


def test_rfactor_of_a_one_dimensional_predicated_rdom():
    """Halide's rfactor.cpp, rdom_with_predicate_rfactor_test, in one dimension: the `where`
    condition goes to the intermediate (refused before: "not supported")."""
    src = """
pipeline p1
input img: i32[1]
output s: i32[1]
algorithm {
    rdom r = [0..img.width] where r.x % 3 != 1
    s(c) = 0
    s(c) += img(r.x) * (c + 1)
}
schedule { s.update(0).rfactor(r.x, u) }
"""
    p = hdsl.loads(src, "p1.hl")
    img = np.random.RandomState(14).randint(-9, 9, 17).astype(np.int32)
    keep = np.arange(17) % 3 != 1
    assert_both(p, [2], (img[keep].sum() * np.arange(1, 3)).astype(np.int32), img=img)


DOT = """
pipeline dot
input a: f32[1]
input b: i32[1]
output s: i32[1]
output fs: f32[1]
algorithm {
    rdom r = [0..b.width]
    s(c) = 0
    s(c) += b(r.x) * (c + 1)
    fs(c) = 0.0f
    fs(c) += a(r.x) * f32(c + 1)
}
schedule {
    s.update(0).split(r.x, rxo, rxi, N).PART(rxo, u)
    fs.update(0).split(r.x, rxo, rxi, N).rfactor(rxo, u)
}
"""


@pytest.mark.parametrize("n", [1, 4, 5, 128])
@pytest.mark.parametrize("part", ["rfactor", "unroll(rxi).rfactor"])
@pytest.mark.parametrize("length", [1, 23, 40])
def test_rfactor_of_a_split_reduction_variable(n, part, length):
    """Halide's rfactor.cpp, parallel_dot_product_rfactor_test: `dot.update(0).split(r.x, rxo,
    rxi, 128)` then `rfactor(rxo, u)` — a one-dimensional reduction made parallel over its
    tiles; the last tile's points past the end are skipped (n need not divide the length)."""
    sched_part = part.replace("(rxo, u)", "")
    src = DOT.replace("N", str(n)).replace("PART(rxo, u)", f"{sched_part}(rxo, u)")
    p = hdsl.loads(src, "dot.hl")
    rs = np.random.RandomState(length + n)
    b = rs.randint(-1000, 1000, length).astype(np.int32)
    a = rs.rand(length).astype(np.float32)
    got = p.compile("host").realize([[3], [3]], a=a, b=b)
    ref = p.realize([[3], [3]], a=a, b=b)
    want = (int(b.sum()) * np.arange(1, 4)).astype(np.int32)
    assert np.array_equal(ref[0], want) and np.array_equal(got[0], want)
    assert np.allclose(got[1], ref[1], rtol=1e-5) and np.allclose(ref[1], a.sum() * np.arange(1, 4), rtol=1e-5)


def test_rfactor_of_the_outer_half_of_a_split_argmin():
    """An argmin factored over the outer loop of its outermost reduction variable's split keeps
    the reduction's order, so its ties resolve as serially."""
    src = ARGMIN.replace("CMP", "<").replace("rfactor(r.y, v)", "split(r.y, ryo, ryi, 2).rfactor(ryo, v)")
    p = hdsl.loads(src, "am.hl")
    img = np.random.RandomState(15).randint(0, 3, (9, 5)).astype(np.int32)
    want = np.array([_argmin_reference(img * (c + 1), True) for c in range(2)], np.int32)
    assert_both(p, [2], want, img=img)


def test_rfactor_of_a_fused_loop_is_refused():
    p_src = ROUTED.replace("SCHED", "total.update(0).fuse(r.x, r.y, q).rfactor(q, v)")
    with pytest.raises(hdsl.HdslError, match="'q' is not a reduction variable of this update"):
        hdsl.loads(p_src, "sr.hl").compile("host")
