"""Mesa's llvmpipe ends every loop of a shader invocation, silently, once 65535 iterations of
all its loops have run (LP_MAX_TGSI_LOOP_ITERATIONS in Mesa's gallivm/lp_bld_limits.h: "Maximum
iterations before loop termination, shared between every loop"; lp_exec_endloop in
lp_bld_ir_common.c decrements it at every back edge and leaves the loop at zero). hdsl's shaders
check after each loop that it ran to its extent and the launch raises where one did not: a
kernel either gives the evaluator's values or fails with that sentence, never wrong values."""
import numpy as np
import pytest

import hdsl

# found by the schedule fuzzer (argmax_tuple's first derandomized GPU schedule), minimised by
# hand: it gave wrong values from row 4 on (a strict xfail, tests/opengl/test_known_bugs.py, last
# session). Each invocation recomputes `best` (37 columns, each a 5x3 maximum) for 9 values of t6
# in each of the serial loop's iterations over pairs of rows: about 43,000 loop iterations per
# pair of rows, so llvmpipe cut the loops short in the second pair.
TWICE_TILED = """pipeline m
use boundary
input  img: u8[2]
output out: i32[2]
algorithm {
    var x, y
    c = repeat_edge(img)
    rdom r = [-2..3, -1..2]
    best(x, y) = i32(maximum(c(x + r.x, y + r.y)))
    out(x, y) = best(x, y)
}
schedule opengl {
    out.tile(y, x, t1, t2, t3, t4, 2, 9)
    out.tile(t2, t3, t5, t6, 5, 9)
    out.gpu_tile(t4, t2, t7, t8, 9, 1)
    best.compute_at(out, t6)
    best.tile(y, x, t1, t2, t3, t4, 6, 2)
    best.tile(t4, t1, t5, t6, 4, 5)
}
"""

# each invocation's loop over r runs n times (n a parameter: no unrolling), nothing else loops
LONG_LOOP = """pipeline longloop
input  img: i32[1]
param  n: i32 = 1
output out: i32[1]
algorithm {
    var x
    rdom r = [0..n]
    out(x) = sum(img(x) * r.x + 1)
}
schedule opengl {
    out.gpu_tile(x, xi, 8)
}
"""

LIMIT = 65535


def _load(tmp_path, text, name):
    path = tmp_path / f"{name}.hl"
    path.write_text(text)
    return hdsl.load(path)


def _llvmpipe(gl) -> bool:
    return "llvmpipe" in gl.renderer


def test_twice_tiled_func_per_invocation(gl, tmp_path):
    """The fuzzer's case: on a 2-row image the loops stay under the limit and the values are the
    evaluator's; on its 29 rows llvmpipe would cut them short, and the launch says so."""
    p = _load(tmp_path, TWICE_TILED, "m")
    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (2, 48)).astype(np.uint8)
    np.testing.assert_array_equal(p.compile("opengl")(img=small), p.compile("interp")(img=small))
    img = rng.integers(0, 256, (29, 48)).astype(np.uint8)
    if _llvmpipe(gl):
        with pytest.raises(hdsl.HdslError, match="more loop iterations in one invocation"):
            p.compile("opengl")(img=img)
    else:
        np.testing.assert_array_equal(p.compile("opengl")(img=img), p.compile("interp")(img=img))


# the same on the fragment path: each fragment's reduction is its loop
LONG_LOOP_2D = """pipeline longloop2
input  img: i32[2]
param  n: i32 = 1
output out: i32[2]
algorithm {
    var x, y
    rdom r = [0..n]
    out(x, y) = sum(img(x, y) * r.x + 1)
}
schedule opengl {
    out.glsl(x, y)
}
"""


@pytest.mark.parametrize("n", [LIMIT - 200, LIMIT + 200])
@pytest.mark.parametrize("path", ["compute", "fragment"])
def test_a_long_loop_gives_right_values_or_the_error(gl, tmp_path, n, path):
    """One loop of n iterations per invocation (or fragment), either side of the limit: the sum
    over r of img * r + 1 is img * n(n-1)/2 + n (wrapping in i32), computed here independently."""
    text, shape = (LONG_LOOP, (16,)) if path == "compute" else (LONG_LOOP_2D, (4, 4))
    p = _load(tmp_path, text, path)
    img = np.arange(-8, 8, dtype=np.int32).reshape(shape)
    want = (img.astype(np.int64) * (n * (n - 1) // 2) + n).astype(np.uint64).astype(np.uint32).view(np.int32)
    f = p.compile("opengl")
    if n > LIMIT and _llvmpipe(gl):
        with pytest.raises(hdsl.HdslError, match="65535 iterations"):
            f(img=img, n=n)
        # the context is fine after it: a short loop runs right at once
        np.testing.assert_array_equal(f(img=img, n=10), img * 45 + 10)
    else:
        np.testing.assert_array_equal(f(img=img, n=n), want)
