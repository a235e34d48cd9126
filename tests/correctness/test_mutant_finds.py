"""Programs that once failed inside the compiler or the evaluator (found by mutating the
examples: tests/property/test_mutants.py), each now run on the evaluator and natively, or
refused with a positioned error. Expected values are worked out by hand in each test."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import hdsl
import hdsl.interp.evaluate as evaluate
from .helpers import assert_same, program

TARGETS = ["interp", "host"]


@pytest.mark.parametrize("target", TARGETS)
def test_a_func_read_only_through_an_empty_rdom_is_not_needed(target):
    """f is read only by an update over an empty rdom: no point of f is needed (the evaluator
    once stopped with "no region for f")."""
    p = program("""
pipeline emptyread
param n: i32 = 0
output out: i32[2]
algorithm {
    rdom r = [0..n]
    e(x, y) = x * 2
    f(x, y) = e(x, y) + y
    g(x, y) = 1
    g(x, y) += f(r.x, y)
    out(x, y) = g(x, y)
}
""").compile(target)
    assert_same(p.realize((3, 2)), np.ones((2, 3), np.int32))
    # and with a non-empty rdom the same program reads f: 1 + sum over r.x < 2 of (2 r.x + y)
    expected = 1 + np.array([[0 + 2 + 2 * y] * 3 for y in range(2)], np.int32)
    assert_same(p.realize((3, 2), n=2), expected)


def test_an_rdom_too_long_for_the_evaluator_is_a_positioned_error():
    """2^31 - 1 points: the evaluator once tried to hold them all at once."""
    p = program("""
pipeline longrdom
output out: i32[1]
algorithm {
    rdom r = [0..2147483647]
    h(x) = 0
    h(r.x % 4) += 1
    out(x) = h(x)
}
""", "longrdom.hl")
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((4,))
    assert str(e.value).startswith("longrdom.hl:5:5: error: rdom 'r' has 2147483647 points, more than the "
                                   "evaluator's limit")


def test_an_update_too_large_to_vectorize_at_once_goes_in_steps(monkeypatch):
    """Pure region times rdom points above the evaluator's array limit: the inner rdom dims
    are vectorized, the outer ones stepped through (the same values as all at once)."""
    p = program("""
pipeline steps
output out: i32[2]
algorithm {
    rdom r = [0..5, 0..7]
    h(x, y) = 0
    h(x, y) += (r.x * 3 + r.y + x) % 7
    h(r.x, 0) = h(r.x, 0) * 2 + r.y
    out(x, y) = h(x, y)
}
""")
    x = np.arange(6)[None, :]
    rx, ry = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    expected = np.broadcast_to(((rx * 3 + ry)[..., None, None] + x) % 7, (5, 7, 2, 6)).sum(axis=(0, 1))
    for ry_ in range(7):                 # the scan: r.x innermost
        for rx_ in range(5):
            expected[0, rx_] = expected[0, rx_] * 2 + ry_
    whole = p.realize((6, 2))
    assert_same(whole, expected.astype(np.int32))
    sizes = []
    step = evaluate.Evaluator._update_step

    def counted(self, f, u, r, pure, ranges, fixed, all_at_once):
        # the points one step evaluates: the pure region times the rdom dims not fixed
        sizes.append(int(np.prod(r.extents)) * int(np.prod([e for d, (_, e) in enumerate(ranges) if d not in fixed])))
        return step(self, f, u, r, pure, ranges, fixed, all_at_once)

    monkeypatch.setattr(evaluate.Evaluator, "_update_step", counted)
    for limit in (12 * 5 + 1, 40):      # room for r.x but not r.y; for no rdom dim
        monkeypatch.setattr(evaluate, "MAX_REGION", limit)
        sizes.clear()
        assert_same(p.realize((6, 2)), whole)
        assert max(sizes) <= limit, sizes


def test_the_largest_f32_literal_is_accepted_without_a_warning():
    """3.4028235e38 rounds to f32's largest value; 1e39f does not fit (tests/error/
    float_literal_too_large) and once gave inf with a NumPy overflow warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = program("""
pipeline biglit
output out: f32[1]
algorithm {
    out(x) = 3.4028235e38 + f32(x) * 1e-45
}
""")
        assert_same(p.realize((2,)), np.full(2, np.finfo(np.float32).max, np.float32))


NAN_COORDINATE = """
pipeline nancoord
output out: i32[1]
algorithm {
    h(x) = 0
    h(i32(sqrt(-1.0f))) += 1
    out(x) = h(x)
}
"""


def test_a_nan_update_coordinate_is_an_error_on_both_targets(tmp_path):
    """i32(NaN) is -2^31 (x86's cvttss2si, and the evaluator's rule), so h spans -2^31 .. 3.
    Native code once computed that extent in i32, got a negative size, and wrote outside its
    allocation (a segmentation fault): run in a child process so a regression cannot take
    the test run down with it."""
    import subprocess
    import sys
    with pytest.raises(hdsl.HdslError) as e:
        program(NAN_COORDINATE, "nancoord.hl").realize((4,))
    # (the evaluator's bounds of a float -> int cast are the whole i32 range)
    assert str(e.value).startswith("nancoord.hl:5:5: error: 'h' would need 4294967296 points")
    src = tmp_path / "nancoord.hl"
    src.write_text(NAN_COORDINATE)
    run = subprocess.run([sys.executable, "-m", "hdsl.cli", "run", str(src), "--size", "4",
                          "--output", str(tmp_path / "out.npy")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run
    assert "an intermediate buffer spans 2^31 or more elements" in run.stderr


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lo", ["i32(0.0f / 0.0f)", "lo"])
def test_an_rdom_whose_extent_wraps_negative_runs_no_iteration(target, lo):
    """[lo..4] from lo = -2^31 (a param, or i32 of a NaN, which is -2^31 by the cast rule) has
    the extent 4 - (-2^31), which wraps to a negative i32: no iteration, as for any extent
    <= 0. Native code looped from -2^31 while i < lo + extent, and lo + extent wraps back to
    4: 2^31 + 4 iterations (each bin then held 536870913 where the evaluator gave 0)."""
    p = program(f"""
pipeline wrapext
param lo: i32 = 0
output out: i32[1]
algorithm {{
    rdom r = [{lo}..4]
    h(x) = 0
    h(r.x % 4) += 1
    out(x) = h(x)
}}
""").compile(target)
    got = p.realize((4,), lo=-2**31)
    assert_same(got, np.zeros(4, np.int32))
    if lo == "lo":
        # a lo that does not wrap: each bin counts its points of [-4, 4), two each
        assert_same(p.realize((4,), lo=-4), np.full(4, 2, np.int32))
