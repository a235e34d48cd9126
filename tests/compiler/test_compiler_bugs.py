"""Minimal reproductions of native-compiler bugs found by the corpus and the
schedule fuzzer (test_compiler_fuzz.py), one test each: the smallest program,
schedule and size that show the bug, compared with the evaluator (and with
the values worked out by hand)."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl


def both(text, schedule, size, **args):
    p = hdsl.loads(text, "<repro>")
    expected = p.realize(size, **args)
    got = p.compile("host", schedule=schedule).realize(size, **args)
    return got, expected


def test_tuple_update_reads_old_values():
    """All values of a tuple update are computed before any is stored (Halide's rule)."""
    text = """
pipeline tuple_update
output out: i32[1]
algorithm {
    f(x) = (x, 0)
    f(x) = (f(x)[0] + 1, f(x)[0])
    out(x) = f(x)[1]
}
"""
    got, expected = both(text, None, (3,))
    assert expected.tolist() == [0, 1, 2]
    assert got.tolist() == [0, 1, 2]          # was [1, 2, 3]: f[1] read the new f[0]


@pytest.mark.parametrize("schedule", ["at", None])
def test_later_update_reads_rows_an_earlier_update_must_produce(schedule):
    """s computed per row of out: the x-scan (update 0) must still run over every row
    that the y-scan (update 1) reads, not only the row out asks for."""
    text = """
pipeline sat_min
input  img: u8[2]
output out: i32[2]
algorithm {
    s(x, y) = i32(img(x, y))
    rdom rx = [1..img.width]
    s(rx.x, y) = s(rx.x - 1, y) + s(rx.x, y)
    rdom ry = [1..img.height]
    s(x, ry.x) = s(x, ry.x - 1) + s(x, ry.x)
    out(x, y) = s(x, y)
}
schedule at {
    s.compute_at(out, y)
}
"""
    img = np.array([[1, 2], [3, 4]], np.uint8)
    got, expected = both(text, schedule, (2, 2), img=img)
    assert expected.tolist() == [[1, 3], [4, 10]]
    assert got.tolist() == [[1, 3], [4, 10]]   # was [[1, 3], [4, 9]]


def test_division_by_a_negative_constant():
    """Euclidean division and modulo by a negative constant in scalar code."""
    text = """
pipeline negdiv
input  img: i32[1]
output q: i32[1]
output r: i32[1]
algorithm {
    q(x) = img(x) / -3
    r(x) = img(x) % -3
}
"""
    img = np.array([-4, -3, -1, 0, 1, 4, 7], np.int32)
    (gq, gr), (eq, er) = both(text, None, (7,), img=img)
    assert eq.tolist() == [2, 1, 1, 0, 0, -1, -2] and er.tolist() == [2, 0, 2, 0, 1, 1, 1]
    assert gq.tolist() == eq.tolist()           # was [0, 1, -1, 0, 0, -1, -2]
    assert gr.tolist() == er.tolist()           # was [-4, 0, -4, 0, 1, 1, 1]


@pytest.mark.parametrize("schedule", ["s", "plain"])
def test_unscheduled_reduction_with_two_consumers(schedule):
    """An unscheduled reduction is computed at the innermost loop around *all* its uses:
    here cdf (at the root) and out both read hist."""
    text = """
pipeline hist_twice
input  img: u8[1]
output out: i32[1]
algorithm {
    rdom r = img
    hist(i) = 0
    hist(i32(img(r.x))) += 1
    cdf(i) = hist(i) * 2
    rdom k = [1..4]
    cdf(k.x) = cdf(k.x - 1) + cdf(k.x)
    out(i) = cdf(i) + hist(i)
}
schedule s {
    cdf.compute_root()
}
schedule plain {
}
"""
    img = np.array([0, 1, 2, 3, 4, 0, 1], np.uint8)
    got, expected = both(text, schedule, (4,), img=img)   # was InternalError: unknown buffer / unbound hist.min.0
    assert expected.tolist() == [6, 10, 11, 13]
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("schedule", ["out_only", "producer_root", "producer_at"])
def test_fuse(schedule):
    """fuse keeps each fused loop's range, so bounds inference still knows it."""
    text = """
pipeline fuse_min
input  img: u8[2]
output out: u8[2]
algorithm {
    f(x, y) = img(x, y) + 1
    out(x, y) = f(x, y)
}
schedule out_only {
    out.fuse(x, y, t)
}
schedule producer_root {
    f.compute_root().fuse(x, y, t)
}
schedule producer_at {
    out.fuse(x, y, t)
    f.compute_at(out, t)
}
"""
    img = np.arange(6, dtype=np.uint8).reshape(2, 3)
    # was HdslError: cannot tell which part of input 'img' is read / how much storage 'f' needs
    got, expected = both(text, schedule, (3, 2), img=img)
    assert got.tolist() == expected.tolist() == (img + 1).tolist()


@pytest.mark.parametrize("factor", [2, 3, 5])
def test_sliding_window_with_a_split_of_the_sliding_dimension(factor):
    """f stored at the root and computed per row of out (a sliding window over y, folded
    storage), with f's y split: the rounded-up rows must not clobber rows still needed."""
    text = f"""
pipeline slide
use boundary
input  img: i32[2]
output out: i32[2]
algorithm {{
    c = repeat_edge(img)
    f(x, y) = c(x, y)
    out(x, y) = f(x, y - 1) * 10 + f(x, y + 1)
}}
schedule s {{
    f.split(y, yo, yi, {factor})
    f.compute_at(out, y)
    f.store_root()
}}
"""
    img = np.array([[1], [2], [3], [4], [5], [6]], np.int32)
    got, expected = both(text, "s", (1, 6), img=img)
    assert expected.ravel().tolist() == [12, 13, 24, 35, 46, 56]
    assert got.ravel().tolist() == expected.ravel().tolist()   # factor 3 gave [12, 33, 33, ...]


def test_compute_at_a_renamed_fn_local():
    """compute_at inside a Func created by the second call of an fn (internally 'b.bx$1')."""
    text = """
pipeline dollar
input  img: i32[2]
output out: i32[2]
fn blur(f) {
    bx(x, y) = f(x - 1, y) + f(x + 1, y)
    by(x, y) = bx(x, y - 1) + bx(x, y + 1)
    return by
}
algorithm {
    c(x, y) = img(clamp(x, 0, img.width - 1), clamp(y, 0, img.height - 1))
    a = blur(c)
    b = blur(a)
    out(x, y) = b(x, y)
}
schedule s {
    b.bx.compute_root()
    a.compute_at(b.bx, y)
}
"""
    img = np.arange(12, dtype=np.int32).reshape(3, 4)
    # was HdslError: 'a' is computed at loop 'y' of 'b.bx$1', but 'b.bx$1' has no such loop
    got, expected = both(text, "s", (4, 3), img=img)
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("schedule", ["bounded", "unbounded"])
def test_unroll_of_the_channel_loop(schedule):
    """unroll(c) with bound(c, 0, 3) (a constant extent, Halide's idiom) compiles; without the
    bound hdsl may run the loop serially or refuse with an HdslError, but the IR verifier
    (HDSL_VERIFY=1, as in the tests) must not raise InternalError."""
    text = """
pipeline unroll_bound
input  img: u8[3]
output out: u8[3]
algorithm {
    out(x, y, c) = img(x, y, 2 - c)
}
schedule bounded {
    out.bound(c, 0, 3).reorder(c, x, y).unroll(c)
}
schedule unbounded {
    out.reorder(c, x, y).unroll(c)
}
"""
    img = np.arange(18, dtype=np.uint8).reshape(2, 3, 3)
    p = hdsl.loads(text, "<repro>")
    try:
        c = p.compile("host", schedule=schedule)
    except hdsl.HdslError:
        if schedule == "bounded":
            raise
        return
    assert c(img=img).tolist() == p(img=img).tolist() == img[:, :, ::-1].tolist()


# ---------------------------------------------------------------- found by the -m slow fuzz
SPLIT_BY_ONE = {
    # a mirror_image boundary computed at the root, split by 1, the inner loop moved outside
    # (the input bounds check read the loop var c.s0.xi outside its loop)
    "reorder": ("""
pipeline reorder_split
use boundary
input  img: i32[2]
output out: i32[2]
algorithm {
    c = mirror_image(img)
    out(x, y) = c(x - 1, y) + c(x + 1, y)
}
schedule s {
    c.compute_root().split(_0, xo, xi, 1).reorder(xo, xi)
}
""", (5, 3)),
    # store_at one level out of compute_at across a split by 1 of a non-output Func
    # (unbound g.s0.yi)
    "store_at": ("""
pipeline split1_store
input  img: i32[2]
output out: i32[2]
algorithm {
    f(x, y) = img(clamp(x, 0, img.width - 1), clamp(y, 0, img.height - 1)) * 2
    g(x, y) = f(x, y - 1) + f(x, y + 1)
    out(x, y) = g(x, y)
}
schedule s {
    g.compute_root().split(y, yo, yi, 1)
    f.compute_at(g, yi).store_at(g, yo)
}
""", (3, 4)),
    # a fused output split twice, the second split by 1, a producer computed at its outer loop
    # (unbound out.s0.toi)
    "fuse": ("""
pipeline fuse_split_at
input  img: i32[2]
output out: i32[2]
algorithm {
    f(x, y) = img(clamp(x, 0, img.width - 1), clamp(y, 0, img.height - 1)) * 2
    out(x, y) = f(x, y) + 1
}
schedule s {
    out.fuse(x, y, t).split(t, to, ti, 4).split(to, too, toi, 1)
    f.compute_at(out, too)
}
""", (3, 2)),
}


@pytest.mark.parametrize("case", sorted(SPLIT_BY_ONE))
def test_split_by_one(case):
    """A split by 1 makes a loop of one iteration; its var must stay bound wherever it is used
    (these raised InternalError: 'unbound variable', from the IR verifier or from codegen)."""
    text, (w, h) = SPLIT_BY_ONE[case]
    img = (np.arange(w * h).reshape(h, w) % 7 + 1).astype(np.int32)
    got, expected = both(text, "s", (w, h), img=img)
    assert got.tolist() == expected.tolist()


def test_fuse_split_split_compute_at():
    """A fused output split by 3, the inner loop split again by 6 (more than its extent),
    a producer computed at the outer loop (was InternalError: unbound variable out.s0.tio)."""
    text = """
pipeline fuse_split_at2
input  img: i32[2]
output out: i32[2]
algorithm {
    f(x, y) = img(clamp(x, 0, img.width - 1), clamp(y, 0, img.height - 1)) * 2
    out(x, y) = f(x, y) + 1
}
schedule s {
    out.fuse(x, y, t).split(t, to, ti, 3).split(ti, tio, tii, 6)
    f.compute_at(out, to)
}
"""
    img = (np.arange(35).reshape(5, 7) % 7 + 1).astype(np.int32)
    got, expected = both(text, "s", (7, 5), img=img)
    assert got.tolist() == expected.tolist() == (img * 2 + 1).tolist()


def test_parallel_loop_inside_many_serial_iterations_does_not_overflow_the_stack():
    """f computed per x of out with a parallel loop over y: 360000 calls of the thread pool.
    Each call's closure was an alloca inside the loop body, so the stack grew by one closure
    per iteration until SIGSEGV (8 MiB stack). Run in a subprocess so a crash is a failure."""
    import os
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import numpy as np, hdsl
        p = hdsl.loads('''
        pipeline nested_parallel
        input  img: i32[2]
        output out: i32[2]
        algorithm {
            f(x, y) = img(x, y) * 2
            out(x, y) = f(x, y) + 1
        }
        schedule s {
            f.compute_at(out, x).parallel(y)
        }
        ''', "nested_parallel.hl")
        img = (np.arange(600 * 600).reshape(600, 600) % 7).astype(np.int32)
        r = p.compile("host", schedule="s")(img=img)
        assert np.array_equal(r, img * 2 + 1)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert r.returncode == 0 and r.stdout.strip() == "ok", \
        f"exit {r.returncode} (-11: SIGSEGV)\nstdout: {r.stdout}\nstderr: {r.stderr[-2000:]}"


def test_store_root_with_compute_at_the_outermost_of_three_splits():
    """g's x split three times and the outermost piece reordered outside y; f stored at the root
    and computed at that loop (was InternalError: unbound variable g.s0.t1o, from the IR
    verifier, and from codegen without it)."""
    text = """
pipeline split3_slide
input  img: i32[2]
output out: i32[2]
algorithm {
    f(x, y) = img(clamp(x, 0, img.width - 1), clamp(y, 0, img.height - 1)) * 2
    g(x, y) = f(x, y - 1) + f(x, y + 1)
    out(x, y) = g(x, y)
}
schedule s {
    g.compute_root().split(x, xo, xi, 6).split(xo, xoo, t1, 6).split(t1, t1o, t4, 9).reorder(xi, t4, y, t1o)
    f.compute_at(g, t1o).store_root()
}
"""
    for w, h in ((1, 1), (13, 9)):
        img = (np.arange(w * h).reshape(h, w) % 7 + 1).astype(np.int32)
        got, expected = both(text, "s", (w, h), img=img)
        assert got.tolist() == expected.tolist()


def test_a_long_chain_of_root_stages_compiles():
    """60 stages computed at the root nest the loop nest hundreds of levels deep (was
    RecursionError, an internal compiler error)."""
    lines = ["pipeline chain", "input img: f32[2]", "output out: f32[2]", "algorithm {", "    g0(x, y) = img(x, y)"]
    lines += [f"    g{i}(x, y) = g{i - 1}(x, y) * 0.5f + 1.0f" for i in range(1, 60)]
    lines += ["    out(x, y) = g59(x, y)", "}", "schedule s {"]
    lines += [f"    g{i}.compute_root().parallel(y).vectorize(x, 4)" for i in range(1, 60)]
    lines += ["}"]
    img = np.random.RandomState(0).rand(5, 8).astype(np.float32)
    got, expected = both("\n".join(lines) + "\n", "s", (8, 5), img=img)
    assert np.array_equal(got, expected)
    ref = img
    for _ in range(59):
        ref = ref * np.float32(0.5) + np.float32(1.0)
    assert np.array_equal(got, ref)


def test_per_iteration_allocations_do_not_grow_the_stack():
    """f computed (and allocated) per pixel of out: 360000 small allocations on the stack, each
    released before the next (stacksave/stackrestore); a leak would overflow the 8 MiB stack.
    A 512 x 64 i32 tile (128 KiB) goes to the heap. In a subprocess, so a crash is a failure."""
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import numpy as np, hdsl
        p = hdsl.loads('''
        pipeline per_pixel
        input  img: i32[2]
        output out: i32[2]
        algorithm {
            f(x, y) = img(x, y) * 2
            g(x, y) = img(x, y) + 1
            out(x, y) = f(x, y) + g(x, y)
        }
        schedule s {
            out.tile(x, y, xi, yi, 512, 64)
            f.compute_at(out, xi)
            g.compute_at(out, x)
        }
        ''', "per_pixel.hl")
        img = (np.arange(600 * 600).reshape(600, 600) % 7).astype(np.int32)
        r = p.compile("host", schedule="s")(img=img)
        assert np.array_equal(r, img * 3 + 1)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", \
        f"exit {r.returncode} (-11: SIGSEGV)\nstdout: {r.stdout}\nstderr: {r.stderr[-2000:]}"


def test_llvm_slp_vectorizer_assertion_is_avoided():
    """This fuzzer schedule made LLVM's SLP vectorizer fail an internal assertion and abort the
    process (llvmlite's LLVM is built with assertions). hdsl vectorizes explicitly, so the SLP
    pass is off. In a subprocess: an abort must show as a failure, not kill the test run."""
    import subprocess
    import sys
    from pathlib import Path
    block = """schedule fuzz {
    lp[0].compute_at(out, x)
    up[0].compute_root()
    up[1].split(y, t1, t2, 1)
    up[1].reorder(x, t2, t1)
    up[1].compute_at(up[0], x)
    gp[2].fuse(x, y, t1)
    gp[2].compute_at(up[1], t2)
    gp[2].dx.unroll(x, 1)
    gp[2].dx.compute_root()
    gp[1].compute_root()
    gp[1].dx.tile(x, y, t1, t2, 8, 4)
    gp[1].dx.fuse(y, t2, t3)
    gp[1].dx.vectorize(t3, 5)
    gp[1].dx.compute_at(gp[1], x)
    gp[0].compute_root()
    c.parallel(_0, 7)
    c.compute_at(gp[0], x)
}"""
    repro = Path(__file__).with_name("repro.py")
    r = subprocess.run([sys.executable, str(repro), "pyramid", "1", "4", "1", block],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "same as the evaluator" in r.stdout, \
        f"exit {r.returncode}\nstdout: {r.stdout[-1000:]}\nstderr: {r.stderr[-2000:]}"


def test_bounds_of_wide_products_do_not_overflow_the_compiler():
    """Interval arithmetic on a sum of i16 * i32 products / 256 made a constant past i32 (was an
    internal compiler error, OverflowError): folded i32 constants wrap like i32 arithmetic."""
    text = """
pipeline ov
input  a: i16[1]
input  m: i16[1]
output o: u8[1]
algorithm {
    lut(x) = u8(x)
    v(x) = i16((m(0) * i32(a(x)) + m(1) * i32(a(x)) + m(2) * i32(a(x))) / 256)
    o(x) = lut(i32(clamp(v(x), 0, 1023)))
}
schedule s { lut.compute_root() }
"""
    a = np.array([0, 1, 300, -5000, 32767], np.int16)
    m = np.array([100, -200, 300, 4], np.int16)
    got, expected = both(text, "s", (5,), a=a, m=m)
    v = ((100 - 200 + 300) * a.astype(np.int64)) // 256
    assert expected.tolist() == (np.clip(v.astype(np.int16), 0, 1023) % 256).tolist()
    assert got.tolist() == expected.tolist()


UNROLL_AFTER_BOUNDS = """
pipeline unroll_after_bounds
input  img: u8[3]
output out: u16[3]
output sums: i32[2]
algorithm {
    g(x, y, c) = u16(img(x, y, c)) * u16(c + 1)
    two(x, y) = g(x, y, 0) + g(x, y, 1)          # g is read at c = 0 and 1 only
    k(x, y, c) = u16(img(x, y, c)) + u16(c)
    out(x, y, c) = k(x, y, c) + two(x, y)
    h(x, y, c) = i32(0)
    h(x, y, c) = h(x, y, c) + i32(img(x, y, c)) * (c + 1)
    sums(x, y) = h(x, y, 0) + h(x, y, 1) + h(x, y, 2)
}
schedule s {
    out.bound(c, 0, 3).reorder(c, x, y)
    k.compute_at(out, x).unroll(c)               # per x of out, all of out's bound c = 0 .. 2
    h.compute_at(sums, x).bound(c, 0, 3)
    h.update(0).unroll(c)
}
schedule pair {
    g.compute_at(two, y).unroll(c)               # g's region in c: exactly 0 .. 1
    two.compute_root()
    h.compute_root()
}
schedule refused {
    g.compute_root().unroll(x)
}
"""


@pytest.mark.parametrize("schedule", ["s", "pair"])
def test_unroll_of_a_loop_whose_extent_bounds_inference_makes_constant(schedule):
    """(found by helper-9 and helper-10 writing camera_pipe) unroll(c) of a producer read at
    c = 0 and 1, of a producer inside an output's bound(c, 0, 3), and of an update whose
    Func has bound(c, 0, 3) were refused ("needs a loop of constant extent"); Halide accepts
    them. The extent is now judged after bounds inference."""
    p = hdsl.loads(UNROLL_AFTER_BOUNDS, "<repro>")
    from hdsl.lower.lower import lower
    from hdsl.ir.stmt import For
    stmt = lower(p.ir, schedule).stages["schedule_functions"]
    unrolled = []

    def visit(s):
        if isinstance(s, For) and s.kind == "unrolled":
            unrolled.append((s.var, s.extent.value))
        from hdsl.ir.stmt import children
        for k in children(s):
            visit(k)
    visit(stmt)
    if schedule == "s":
        assert ("k.s0.c", 3) in unrolled and ("h.s1.c", 3) in unrolled
    else:
        assert ("g.s0.c", 2) in unrolled
    img = np.random.RandomState(1).randint(0, 255, (5, 7, 3)).astype(np.uint8)
    c = p.compile("host", schedule=schedule)
    got = c(img=img)
    expected = p(img=img)
    for a, b in zip(got, expected):
        assert np.array_equal(a, b)


def test_unroll_of_a_loop_of_run_time_extent_is_a_positioned_error():
    p = hdsl.loads(UNROLL_AFTER_BOUNDS, "repro.hl")
    with pytest.raises(hdsl.HdslError) as e:
        p.compile("host", schedule="refused")
    text = e.value.render() if hasattr(e.value, "render") else str(e.value)
    assert "unroll(x) needs a loop of constant extent" in text
    assert "repro.hl:" in text


def test_compute_at_a_loop_that_does_not_enclose_every_use_is_a_user_error():
    """g.compute_at(two, y) while out also reads g: was an internal compiler error (codegen:
    unbound variable g.min.0); now the schedule line is shown."""
    text = """pipeline bad
input  img: u8[2]
output out: u16[2]
algorithm {
    g(x, y) = u16(img(x, y)) * u16(2)
    two(x, y) = g(x, y) + g(x + 1, y)
    out(x, y) = g(x, y) + two(x, y)
}
schedule {
    g.compute_at(two, y)
    two.compute_root()
}
"""
    p = hdsl.loads(text, "bad.hl")
    with pytest.raises(hdsl.HdslError) as e:
        p.compile("host")
    text = e.value.render() if hasattr(e.value, "render") else str(e.value)
    assert "'g' is used by 'out' outside the loops it is computed in" in text
    assert "bad.hl:10:" in text and "g.compute_at(two, y)" in text


@pytest.mark.parametrize("name,schedule", [
    ("sat", "out.vectorize(x, 1)\n    c.split(_0, t1, t2, 1)\n    c.compute_at(out, x_i)\n    c.store_root()"),
    ("sat", "out.vectorize(x, 1)\n    c.compute_at(out, x_i)"),
    ("iir", "out.vectorize(x, 1)\n    out.split(x, t1, t2, 1)\n    c.compute_at(out, x_i)"),
    # the outer loop of vectorize(y, 1) is `out.s0.y$1`, still "y" to compute_at
    ("argmax_tuple", "out.vectorize(y, 1)\n    c.compute_at(out, y)"),
    ("rdom_where", "out.split(x, t1, t2, 1)\n    out.vectorize(y, 1)\n    out.split(t2, t3, t4, 1)\n"
                   "    evens.compute_at(out, y)\n    c.split(_0, t1, t2, 1)\n    c.compute_at(out, y)\n    c.store_root()"),
])
def test_unscheduled_reduction_stays_inside_the_vector_loop_its_input_is_computed_in(name, schedule):
    """(fuzzer) An unscheduled reduction read by vector code is now computed above the
    vector loop; when a Func it reads is computed inside that loop (c.compute_at(out, x_i)),
    it must stay inside: moved out, it read c before c was computed (wrong values with
    store_root) or outside c's scope (a false 'used outside' error)."""
    from pathlib import Path
    src = (Path(__file__).parent / "pipelines" / f"{name}.hl").read_text()
    src += "\nschedule fuzz {\n    " + schedule + "\n}\n"
    p = hdsl.loads(src, f"{name}.hl")
    ins = {b.name: np.random.RandomState(0).randint(0, 100, (3, 4)).astype(b.type.dtype) for b in p.ir.inputs}
    got, expected = p.compile("host", schedule="fuzz")(**ins), p(**ins)
    got = got if isinstance(got, list) else [got]
    expected = expected if isinstance(expected, list) else [expected]
    for a, b in zip(got, expected):
        assert np.array_equal(a, b)


def test_parallel_with_a_factor_on_a_narrow_output():
    """(fuzzer) out.parallel(y, 2) splits y by 2: the shifted form needs the output 2 rows
    high, and a 1-row output must run the guarded form (it wrote row -1)."""
    text = """pipeline par
input  img: u8[2]
output out: u16[2]
algorithm { out(x, y) = u16(img(x, y)) * u16(3) }
schedule { out.parallel(y, 2) }
"""
    p = hdsl.loads(text, "par.hl")
    from hdsl.lower.loops import shift_requirements
    assert shift_requirements(p.ir, None) == [(0, 1, 2)]
    c = p.compile("host", use_cache=False)
    for h in (1, 2, 3, 5):
        img = np.arange(4 * h, dtype=np.uint8).reshape(h, 4)
        assert np.array_equal(c(img=img), p(img=img)), h


@pytest.mark.parametrize("w,h", [(1, 1), (2, 1), (3, 2), (7, 5)])
def test_saturated_copy_keeps_stores_vector_under_a_one_lane_vector_loop(w, h):
    """(fuzzer) A vectorize(t3) of extent 1 around the real vector loop made a pinned tail
    clamp look lane-varying: the saturated copy of the loop stored a vector at one scalar
    address and codegen failed ('IntType' has no attribute 'count'). The lanes are now
    the innermost vector loop's of at least 2 lanes."""
    from test_compiler_fuzz import run_schedule
    block = """schedule fuzz {
    exact.tile(x, y, t1, t2, 2, 1)
    exact.vectorize(t1, 2)
    exact.tile(t2, t1, t3, t4, 1, 1)
    exact.vectorize(t3)
    t.compute_root()
}"""
    run_schedule("math_f32", block, w, h, 0)


# ---------------------------------------------------------------- found by the widened oracle and fuzzer
# (issue 14 item 7: the Halide oracle's programs run natively, the schedule fuzzer with rfactor,
# bound, reorder_storage, larger sizes, unbounded inputs and multi-output pipelines)

def _f64_to_f16_cases() -> np.ndarray:
    """f64 values around every kind of f16 rounding decision: exact halfway points between
    f16 neighbours (ties to even both ways), one f64 ulp either side of them (an f32 in
    between would round those to the tie: double rounding), subnormals, overflow, signed
    zeros, infinities and NaN."""
    h = np.arange(0, 0x7c00, 37, dtype=np.uint16).view(np.float16).astype(np.float64)
    nxt = np.nextafter(h.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    mid = (h + nxt) / 2                                   # exact in f64
    vals = np.concatenate([h, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf),
                           [65504.0, 65519.99, 65520.0, 1e300, 2.0 ** -25, 2.0 ** -25 * 1.000001,
                            2.0 ** -26, 1e-300, 0.0, np.inf, np.nan]])
    return np.concatenate([vals, -vals])


@pytest.mark.parametrize("schedule", ["scalar", "vector"])
def test_f64_to_f16_cast_is_correctly_rounded(schedule):
    """An f64 -> f16 cast (explicit, or lerp's f64 weight arithmetic for an f16 result) crashed
    the process natively: LLVM lowers it to a call of __truncdfhf2, which the JIT left unresolved.
    The expected values are NumPy's f64 -> f16 conversion (IEEE round to nearest, ties to even,
    in one step), written out for a few ties by hand."""
    text = """
pipeline f64_to_f16
input a: f64[1]
input w: u8[1]
output out: f16[1]
output l: f16[1]
algorithm {
    out(x) = f16(a(x))
    l(x) = lerp(f16(0.0), f16(1.0), w(x))
}
schedule vector {
    out.vectorize(x, 8)
    l.vectorize(x, 8)
}
"""
    a = _f64_to_f16_cases()
    w = np.arange(a.size, dtype=np.uint64).astype(np.uint8)
    (got, gl), (exp, el) = both(text, None if schedule == "scalar" else "vector", (a.size,), a=a, w=w)
    with np.errstate(all="ignore"):
        assert exp.view(np.uint16).tolist() == a.astype(np.float16).view(np.uint16).tolist()
        assert got.view(np.uint16).tolist() == a.astype(np.float16).view(np.uint16).tolist()
        assert gl.view(np.uint16).tolist() == (w / 255.0).astype(np.float16).view(np.uint16).tolist()
    # ties by hand: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 (even: 1), 1 + 3 * 2^-11 between
    # 1 + 2^-10 and 1 + 2^-9 (even: 1 + 2^-9); one f64 ulp above the first rounds up
    b = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, np.nextafter(1 + 2.0 ** -11, 2.0)])
    (got, _), _ = both(text, None, (3,), a=b, w=np.zeros(3, np.uint8))
    assert got.astype(np.float64).tolist() == [1.0, 1 + 2.0 ** -9, 1 + 2.0 ** -10]


def test_bound_and_reorder_storage_name_dimensions_after_splits():
    """bound() and reorder_storage() name a Func's dimensions (its pure vars), not loops: after
    `split(x, xo, xi, 3)` Halide still takes `bound(x, ...)` and `reorder_storage(y, x)`
    (Func::bound and Func::reorder_storage take the Func's Vars; Halide's Func.h). hdsl's checker
    rejected them ("'x' is not a loop of 'f'") once a split had renamed the loop."""
    text = """
pipeline dims
input img: u8[2]
output out: u8[2]
algorithm {
    f(x, y) = img(x, y) + 1
    out(x, y) = f(x, y) * 2
}
schedule s {
    f.compute_root().split(x, xo, xi, 3).fuse(xi, y, t).reorder_storage(y, x).bound(x, 0, 9)
    out.split(x, xo, xi, 2).bound(x, 0, 9).bound(y, 0, 5)
}
"""
    img = np.arange(45, dtype=np.uint8).reshape(5, 9)
    got, expected = both(text, "s", (9, 5), img=img)
    assert expected.tolist() == ((img + 1) * 2).tolist()
    assert got.tolist() == expected.tolist()


def test_vectorized_producer_stored_inside_a_vectorized_tile_reads_no_more_than_the_evaluator():
    """Found by the fuzzer on `unbounded` (an input without a boundary condition, sized to what
    the evaluator reads): d computed per tile column and stored per vector of the output's
    vectorized tile. Halide's bounds inference asks for the region the consumers read, so a
    4 x 1 output reads img at x = 0 .. 4, y = 0 .. 2 (a 5 x 3 input suffices); native code
    asked for more and refused the input (x = 0 .. 8): a shifted-inwards split of a region
    that moves with an outer loop is lo + base + min(xi, ext - 1), whose bounds, taken term by
    term, lose that lo and ext move together. Bounds inference now sees the no-op clamp to the
    region's last point (loops.strip_region_clamps)."""
    text = """
pipeline vec_tile
input img: u8[2]
output out: u8[2]
algorithm {
    d(x, y) = img(x + 1, y) - img(x, y + 2)
    out(x, y) = d(x, y)
}
schedule s {
    out.tile(x, y, t1, t2, t3, t4, 6, 5)
    out.vectorize(t2, 7)
    d.vectorize(x, 6)
    d.compute_at(out, t3)
    d.store_at(out, t2_i)
}
"""
    img = np.arange(15, dtype=np.uint8).reshape(3, 5) * 7
    got, expected = both(text, "s", (4, 1), img=img)
    assert expected.tolist() == [[(int(img[0, x + 1]) - int(img[2, x])) % 256 for x in range(4)]]
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("target, size, block", [
    # (issue 15 item 6) the CPU fuzz case: v's fused loop `x = min + t % extent` over t in
    # 0 .. extent - 1 was bounded as min + min(max - min, ...), whose sides, bounded apart
    # over h's tiles, said v reads the output f at x = 0 .. 34 of 0 .. 27. Halide 21 (the
    # halide PyPI package) compiles and runs this schedule: the bug was hdsl's.
    ("host", (28, 21), """
    h.split(x, t1, t2, 8)
    h.tile(t1, t2, t3, t4, 5, 7)
    v.fuse(x, y, t1)
    v.compute_at(h, t1)
    w.split(x, t1, t2, 6)"""),
    # the GPU fuzz's (found by its 3-D and tail draws; the same on the host with splits):
    # w's fused loop at g's split fused loop; the lower bound of `t % extent` over an outer
    # loop was not capped at extent - 1, so f was read at y = 0 .. 114 of 0 .. 1
    ("host", (58, 2), """
    h.fuse(y, x, t1)
    h.split(t1, t1, t2, 4, guard_with_if)
    rs.split(y, t1, t2, 4)
    rs.tile(t2, t1, t3, t4, t5, t6, 5, 1)
    rs.update(0).tile(y, r.x, t1, t2, 4, 9)
    g.fuse(y, x, t1)
    g.split(t1, t1, t2, 2, guard_with_if)
    w.fuse(x, y, t1)
    w.compute_at(g, t1)
    f.split(y, t1, t2, 8)"""),
])
def test_fused_loops_read_an_output_within_its_buffer(target, size, block):
    from compiler_corpus import CORPUS, compare, for_schedule, load, reference
    spec = CORPUS["multi_feed"]
    block = "schedule fuzz {" + block + "\n}"
    c = load(spec, block).compile(target, schedule="fuzz")
    for seed in (0, 2):
        args, expected = reference(spec, *size, seed)
        got = c.realize(spec.sizes(*size), **args)
        compare(for_schedule(spec, block, expected), got, expected, f"seed {seed}: ")


def test_a_ring_lets_wide_offset_made_late_is_not_reused_above_it():
    """Found by the slow schedule fuzzer (argmax_tuple at 1x1): a ring let's i64 offset made
    at the builder's place, further down its block than a nested let's value, was reused
    by the nested let's own i64 offset, made right after that value: LLVM's verifier
    refused the module ("Instruction does not dominate all uses"). Since session 13 (fixed
    frame slots keep a tile's allocation in the same block)."""
    text = """
pipeline argmax_like
input img: u8[2]
output out: i32[2]
algorithm {
    c(x, y) = img(clamp(x, 0, img.width - 1), clamp(y, 0, img.height - 1))
    rdom r = [-2..3, -1..2]
    best(x, y) = (argmax(c(x + r.x, y + r.y))[0], maximum(c(x + r.x, y + r.y)))
    rdom s = [0..5]
    run(x, y) = (u8(0), -1)
    run(x, y) = (max(run(x, y)[0], c(x, y + s.x - 2)),
                 select(c(x, y + s.x - 2) > run(x, y)[0] || run(x, y)[1] < 0, s.x, run(x, y)[1]))
    out(x, y) = best(x, y)[0] + 16 * i32(best(x, y)[1]) + 4096 * (run(x, y)[1] + 8 * i32(run(x, y)[0]))
}
schedule fuzz {
    out.reorder(x, y)
    out.split(x, t1, t2, 1)
    out.reorder(t1, t2)
    out.split(t1, t3, t4, 1)
    run.tile(x, y, t1, t2, 1, 1)
    run.tile(t1, t2, t3, t4, 1, 1)
    run.compute_root()
    best.split(x, t1, t2, 1)
    best.compute_at(out, t4)
}
"""
    for size in [(1, 1), (3, 2)]:
        img = (np.arange(size[0] * size[1]) * 37 % 251).astype(np.uint8).reshape(size[1], size[0])
        got, expected = both(text, "fuzz", size, img=img)
        assert np.array_equal(got, expected)
    # by hand at 1x1: the window is the one pixel (argmax's first point, r.x = -2), and so is
    # every row of the scan (s.x = 0 sets the index, later rows never exceed it)
    one = np.array([[200]], dtype=np.uint8)
    got, _ = both(text, "fuzz", (1, 1), img=one)
    assert got.tolist() == [[-2 + 16 * 200 + 4096 * (0 + 8 * 200)]]


def test_a_store_of_one_index_under_a_vector_loops_mask():
    """Found by the slow schedule fuzzer (color at 25x6): mixed vectorized by 7 along the
    outer loop of two splits of ch, computed per iteration of sharp's split ch: its store
    index is the same for every lane, under the vector loop's tail mask, and code generation
    took the scalar index for a vector (an AttributeError: an internal error)."""
    text = open(__file__.replace("test_compiler_bugs.py", "pipelines/color.hl")).read()
    text = text[:text.index("schedule {")] + """
schedule fuzz {
    out.unroll(y, 8)
    sharp.parallel(ch, 6)
    sharp.tile(ch, ch_i, t1, t2, t3, t4, 1, 6)
    sharp.compute_at(out, ch)
    mixed.split(ch, t1, t2, 4)
    mixed.split(t1, t3, t4, 5)
    mixed.fuse(x, y, t5)
    mixed.vectorize(t3, 7)
    mixed.compute_at(sharp, t3)
    lin.split(ch, t1, t2, 6)
    lin.split(x, t3, t4, 5)
    lin.compute_root()
}
"""
    for w, h in [(25, 6), (3, 1)]:
        img = (np.arange(w * h * 3) * 53 % 256).astype(np.uint8).reshape(3, h, w)
        got, expected = both(text, "fuzz", (w, h, 3), img=img)
        assert np.array_equal(got, expected)


def test_a_rounded_up_inner_loop_of_a_shifted_split_stays_in_its_storage():
    """split(_0, t3, t4, 1) (shift_inwards: _0 = lo + clamp(t3) + min(t4, ext - 1), at most the
    region's end while t4 < 1), then t4 rounded up by 5 (tile ... round_up): t4 runs to 4, so
    the no-op clamp min(point, region end) that strip_region_clamps drops is no longer a
    no-op, and without it `c`'s stage wrote up to 4 points past its storage. Found by the GPU
    schedule fuzzer once cuda-emulate's device buffers ended at an unreadable page (a
    segmentation fault there; an illegal address on a GPU; on the CPU, a write past the end of
    the buffer). Run in a process of its own so that a fault fails this test alone."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    block = ("schedule fuzz {\n    c.split(_1, t1, t2, 9)\n    c.split(_0, t3, t4, 1)\n"
             "    c.gpu_tile(t3, t4, t5, t6, 4, 5, round_up)\n    c.compute_root()\n}")
    here = Path(__file__).parent
    for target, sched in (("cuda-emulate", block), ("host", block.replace("gpu_tile", "tile"))):
        r = subprocess.run([sys.executable, str(here / "repro.py"), "divmod", "14", "1", "1", sched, "2"],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, HDSL_TEST_TARGET=target))
        assert r.returncode == 0 and "same as the evaluator" in r.stdout, (target, r.returncode, r.stderr[-800:])
    from hdsl.lower.lower import lower
    from hdsl.ir.printer import stmt_str
    src = (here / "pipelines" / "divmod.hl").read_text().split("schedule {")[0]
    p = hdsl.loads(src + block.replace("gpu_tile", "tile").replace("schedule fuzz", "schedule cpu"))
    text = stmt_str(lower(p.ir, "cpu", "host").stmt)
    # every form of c's point keeps the clamp to the region's end, or is bounded otherwise:
    # the unclamped general form (before partitioning) is gone
    assert "let c.s0._0 = c.s0._0.min + max(min(c.s0.t3, c.s0._0.max - c.s0._0.min), 0) + " \
           "min(c.s0.t4, max(c.s0._0.max - c.s0._0.min, 0))\n" not in text + "\n"
