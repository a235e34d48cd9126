"""A select on the parity of a vectorized or unrolled loop's var (`select(x % 2 == 0, …)`,
the Bayer interleavings of camera_pipe's demosaic) whose loop starts at a value known only at
run time: the loop is generated once per residue of its first value (a switch around the
copies; hdsl/codegen/llvm.py, by_residue), each copy with its selects decided while
generating. Values: NumPy's (the interleaving written with array slicing, an independent
oracle) and the evaluator's, with the output's first point at every parity in x and y (so
every copy runs), sizes that are not multiples of the tile, 8 to 32 lanes, `(x + 1) % 2` and
`x % 4` tests, on the host and on x86-64-avx2. IR: the copies are there (a switch on the
residue), and a loop whose selects do not test its var is generated once."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline bayer
input a: i32[2]
input b: i32[2]
output out: i32[2]
algorithm {
    var x, y
    ev(x, y) = a(x, y) + 2 * b(x, y)
    od(x, y) = a(x, y) * 3 - b(x, y)
    dem(x, y) = select(y % 2 == 0,
                       select(x % 2 == 0, ev(x / 2, y / 2), od(x / 2, y / 2)),
                       select((x + 1) % 2 == 0, od(x / 2 + 1, y / 2) - ev(x / 2, y / 2),
                              select(x % 4 == 1, ev(x / 2, y / 2) * 5, ev(x / 2, y / 2) + 7)))
    out(x, y) = dem(x, y) + 1
}
schedule {
    out.tile(x, y, xi, yi, LANES, 2)
    dem.compute_at(out, x).vectorize(x).unroll(y)
}
"""


def program(lanes):
    return hdsl.loads(SRC.replace("LANES", str(lanes)), "bayer.hl")


def by_numpy(a, b, x0, y0, w, h):
    """out over [x0, x0 + w) x [y0, y0 + h); a, b indexed [y, x] from 0 (half resolution)."""
    ys, xs = np.mgrid[y0:y0 + h, x0:x0 + w]
    hx, hy = xs // 2, ys // 2
    ev = a[hy, hx] + 2 * b[hy, hx]
    od = lambda px, py: a[py, px] * 3 - b[py, px]            # noqa: E731
    odd_row = np.where((xs + 1) % 2 == 0, od(hx + 1, hy) - ev, np.where(xs % 4 == 1, ev * 5, ev + 7))
    dem = np.where(ys % 2 == 0, np.where(xs % 2 == 0, ev, od(hx, hy)), odd_row)
    return (dem + 1).astype(np.int32)


@pytest.mark.parametrize("lanes", [8, 16, 32])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_parity_selects_give_numpys_and_the_evaluators_values(lanes, target):
    p = program(lanes)
    c = p.compile(target)
    rs = np.random.RandomState(lanes)
    a = rs.randint(-1000, 1000, (40, 3 * lanes)).astype(np.int32)
    b = rs.randint(-1000, 1000, a.shape).astype(np.int32)
    w, h = 3 * lanes + 5, 11                                 # (not multiples of the tile)
    for x0, y0 in [(0, 0), (1, 0), (0, 1), (1, 1), (3, 5), (2, 7)]:
        want = by_numpy(a, b, x0, y0, w, h)
        got = c.realize((w, h), min=(x0, y0), a=a, b=b)
        assert np.array_equal(got, want), (x0, y0)
        assert np.array_equal(got, p.realize((w, h), min=(x0, y0), a=a, b=b)), (x0, y0)


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_the_loops_are_generated_once_per_residue(target):
    """dem's vectorized x tests x % 2 and x % 4 (four copies) and its unrolled y tests y % 2
    (two per copy of x, but at most four copies in all: y is then generated once in each);
    out's own loops test nothing and are not copied."""
    ir = compiled_form(program(16).ir, "llvm", target=target, shifted=True)
    labels = [line.split(":")[0] for line in ir.splitlines() if re.match(r"residue\d+:", line)]
    assert sorted(labels) == ["residue0", "residue1", "residue2", "residue3"]
    assert ir.count("switch i32") == 1
