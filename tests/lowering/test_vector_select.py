"""Selects and accesses in vectorized loops (hdsl/codegen/llvm.py: vector_select, wide_ramp;
unrolled loops inside vectorized ones), the shapes camera_pipe's demosaic needs (issue 22):

- `select(x % 2 == 0, a(x / 2), b(x / 2))` over a vectorized x (Bayer interleaving) computes
  each arm on its own lane set, lanes / 2 wide and dense, not both arms on every lane;
- a select whose condition is the same on every lane (`y % 2 == 0`) computes only the chosen
  arm (a branch), not both;
- `unroll(c)` inside `vectorize(x)` unrolls, so selects on c fold;
- dense vector loads and stores take 64-bit offsets, as scalar ones (wide_index).

Every schedule must give the reference evaluator's values, whatever the parity of the
output's first x and y (known only at run time); the interleavings are also checked against
NumPy written out from the definitions."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

BAYER = """
pipeline bayer
input img: i32[2]
param k: i32 = 3
output out: i32[2]
algorithm {
    a(x, y) = img(2 * x + 4, y) * k + img(2 * x + 5, y) * 5 - (img(2 * x + 4, y) >> 2) + 7
    b(x, y) = img(2 * x + 5, y) * (k + 1) - img(2 * x + 4, y) * 3 + (img(2 * x + 5, y) >> 1) + 11
    c(x, y) = img(2 * x + 4, y) * 9 - img(2 * x + 5, y) * k + (img(2 * x + 4, y) >> 3) - 5
    row0(x, y) = select(x % 2 == 0, a(x / 2, y), b(x / 2, y))
    out(x, y) = select(y % 2 == 0, row0(x, y), c(x / 2, y) * 2 + img(x + 4, y))
}
schedule vec16 { out.vectorize(x, 16) }
schedule vec64 { out.vectorize(x, 64) }
schedule thirds { out.vectorize(x, 48) }
"""

THIRDS = """
pipeline thirds
input img: i32[2]
output out: i32[2]
algorithm {
    out(x, y) = select(x % 3 == 1, img(x / 3 + 2, y) * 7 - (img(x / 3 + 2, y) >> 1) + 3 * img(x / 3 + 3, y) + y,
                       img(x / 3 + 3, y) * 5 + (img(x / 3 + 2, y) >> 2) - 9 * img(x / 3 + 2, y) - y)
}
schedule vec48 { out.vectorize(x, 48) }
schedule vec12 { out.vectorize(x, 12) }
"""

PLANES = """
pipeline planes
input img: u16[2]
output out: u16[3]
algorithm {
    out(x, y, c) = select(c == 0, img(x, y) + 1, select(c == 1, img(x, y) * 2, img(x, y) / 3))
}
schedule unrolled { out.bound(c, 0, 3).reorder(c, x, y).vectorize(x, 32).unroll(c) }
"""


def _bayer_numpy(img, k, x0, y0, w, h):
    """out of BAYER over [x0, x0 + w) x [y0, y0 + h), from the definitions (Euclidean / and %)."""
    img = img.astype(np.int64)
    out = np.zeros((h, w), np.int64)
    for j in range(h):
        y = y0 + j
        for i in range(w):
            x = x0 + i
            hx = x // 2
            p, q = img[y, 2 * hx + 4], img[y, 2 * hx + 5]
            a = p * k + q * 5 - (p >> 2) + 7
            b = q * (k + 1) - p * 3 + (q >> 1) + 11
            c = p * 9 - q * k + (p >> 3) - 5
            out[j, i] = (a if x % 2 == 0 else b) if y % 2 == 0 else c * 2 + img[y, x + 4]
    return out.astype(np.int32)


@pytest.mark.parametrize("schedule", ["vec16", "vec64", "thirds"])
@pytest.mark.parametrize("x0, y0", [(0, 0), (1, 0), (0, 1), (3, 5), (2, 7)])
def test_interleaved_selects_at_every_parity(schedule, x0, y0):
    """Outputs whose first x and y are even or odd (run-time parities), widths that leave a
    tail: the evaluator's values and NumPy's."""
    p = hdsl.loads(BAYER, "bayer.hl")
    w, h = 150, 6
    img = np.random.RandomState(x0 * 7 + y0).randint(-5000, 5000, (y0 + h, 2 * (x0 + w) + 12)).astype(np.int32)
    got = p.compile("host", schedule=schedule).realize((w, h), min=(x0, y0), img=img, k=3)
    ref = p.realize((w, h), min=(x0, y0), img=img, k=3)
    assert np.array_equal(ref, _bayer_numpy(img, 3, x0, y0, w, h))
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("schedule", ["vec48", "vec12"])
@pytest.mark.parametrize("x0", [0, 1, 2, 5])
def test_a_condition_uniform_on_every_third_lane(schedule, x0):
    """`x % 3 == 1`: three lane sets, each with its own arm."""
    p = hdsl.loads(THIRDS, "thirds.hl")
    w, h = 100, 3
    img = np.random.RandomState(x0).randint(-999, 999, (h, (x0 + w) // 3 + 6)).astype(np.int32)
    got = p.compile("host", schedule=schedule).realize((w, h), min=(x0, 0), img=img)
    ref = p.realize((w, h), min=(x0, 0), img=img)
    assert np.array_equal(got, ref)


def test_unrolled_channels_inside_a_vector_of_pixels():
    p = hdsl.loads(PLANES, "planes.hl")
    img = np.random.RandomState(3).randint(0, 65535, (5, 77)).astype(np.uint16)
    got = p.compile("host", schedule="unrolled").realize((77, 5, 3), img=img)
    ref = p.realize((77, 5, 3), img=img)
    assert np.array_equal(got, ref)
    want = np.stack([img + 1, img * 2, img // 3], axis=-1).astype(np.uint16)
    assert np.array_equal(ref, want)


def _vector_body(ir: str, loop: str) -> str:
    """The LLVM IR from the first block of `loop`'s serial loop (the vectorized loop's
    enclosing row loop) to the end of the function."""
    return ir[ir.index(loop):]


def test_each_lane_set_computes_only_its_arm_half_wide():
    """With vectorize(x, 16), the arms a(x / 2) and b(x / 2) are multiplied 8 lanes wide (each
    lane set's own dense vector), never 16 wide (both arms on every lane, then a blend); the
    row select (y % 2 == 0, one value for all lanes) is a branch whose join is a phi of 16
    lanes. (Before: `mul <16 x i32>` on interleaved duplicates, and one select per arm.)"""
    src = BAYER.replace("out(x, y) = select(y % 2 == 0, row0(x, y), c(x / 2, y) * 2 + img(x + 4, y))",
                        "out(x, y) = row0(x, y)")
    body = _vector_body(compiled_form(hdsl.loads(src, "bayer.hl").ir, "llvm", schedule="vec16"), "out.s0.y")
    steady = body[:body.index("out.s0.x$1.head.1:")]      # (the first row loop: the steady one)
    assert "mul <8 x i32>" in body and re.search(r"phi\s+<8 x i32>", body)
    assert _muls_of_16(steady) == ""
    body = _vector_body(compiled_form(hdsl.loads(BAYER, "bayer.hl").ir, "llvm", schedule="vec16"), "out.s0.y")
    assert re.search(r"phi\s+<16 x i32>", body)


def _muls_of_16(body: str) -> str:
    """The 16-lane multiplications of body that are not by a constant (the image's index
    arithmetic of the tail, if any, multiplies by constants)."""
    return "\n".join(line for line in body.splitlines()
                     if "mul <16 x i32>" in line and "<i32 " not in line.split("mul <16 x i32>")[1])


def test_unrolled_channels_fold_their_selects():
    """unroll(c) inside vectorize(x): three straight-line stores, no serial c loop (whose
    header block would be named out.s0.c.head) and no select on c left."""
    ir = compiled_form(hdsl.loads(PLANES, "planes.hl").ir, "llvm", schedule="unrolled")
    assert "out.s0.c.head" not in ir
    body = _vector_body(ir, "out.s0.y")
    assert not re.search(r"select\s+i1 %[^,]*, <32 x i16>", body)


BLUR = """
pipeline blur3
input img: u16[2]
output out: u16[2]
algorithm { out(x, y) = img(x - 1, y) / 3 + img(x, y) / 3 + img(x + 1, y + 1) / 3 }
schedule vec { out.vectorize(x, 32) }
"""


def test_dense_vector_accesses_take_64_bit_offsets():
    """The vector loads and store of a vectorized row address through i64 offsets, so LLVM
    keeps one pointer per stream instead of an i32 offset and a sign extension each (camera_pipe's
    denoise kept ten i32 counters, spilled to the stack)."""
    ir = compiled_form(hdsl.loads(BLUR, "blur3.hl").ir, "llvm", schedule="vec")
    lines = ir[ir.index("out.s0.y"):].splitlines()
    vec = [i for i, line in enumerate(lines) if ("load <32 x i16>" in line or "store <32 x i16>" in line)]
    assert len(vec) >= 4
    for i in vec:
        ptr = lines[i].rsplit("ptr ", 1)[1].split(",")[0].strip()
        gep = next(line for line in lines[:i][::-1] if line.strip().startswith(ptr + " = getelementptr"))
        assert ", i64 " in gep, gep


@pytest.mark.parametrize("x0, y0", [(-2 ** 31 + 40, 3), (2 ** 31 - 200, -4), (-7, 2 ** 31 - 9)])
def test_vector_accesses_at_the_ends_of_the_i32_range(x0, y0):
    """Vectorized outputs starting near the ends of the i32 range: the 64-bit offsets give the
    evaluator's values."""
    src = """
pipeline edge
input img: i32[2]
output out: i32[2]
algorithm {
    g(x, y) = img(x - XMIN, y - YMIN) * 2
    out(x, y) = x * 3 + y * 1000 + g(x + 1, y) - g(x, y)
}
schedule vec {
    g.compute_at(out, y).vectorize(x, 8)
    out.vectorize(x, 16)
}
""".replace("XMIN", str(x0)).replace("YMIN", str(y0))
    p = hdsl.loads(src, "edge.hl")
    w, h = 61, 4
    img = np.random.RandomState(2).randint(-1000, 1000, (h, w + 1)).astype(np.int32)
    got = p.compile("host", schedule="vec").realize((w, h), min=(x0, y0), img=img)
    ref = p.realize((w, h), min=(x0, y0), img=img)
    assert np.array_equal(got, ref)


EDGE = """
pipeline edges
use boundary
input img: u16[2]
param lo: i32 = 3
param hi: i32 = 40
output out: u16[2]
algorithm {
    e = repeat_edge(img)
    out(x, y) = e(x - 2, y) / 4 + e(x + 3, y) / 4 + img(clamp(x, lo, hi), y) / 4 + img(min(max(x - 1, hi), lo), y) / 4
}
schedule vec { out.vectorize(x, 32) }
schedule vec8 { out.vectorize(x, 8) }
"""


@pytest.mark.parametrize("schedule", ["vec", "vec8"])
@pytest.mark.parametrize("w, x0, lo, hi", [(100, 0, 3, 40), (100, -20, 3, 40), (20, -5, 3, 40), (7, 0, 3, 40),
                                           (60, -3, 10, 2), (45, 5, 0, 43)])
def test_clamped_indices_in_vector_loads(schedule, w, x0, lo, hi):
    """repeat_edge's clamps and user clamps (both orders of min and max, bounds crossed) in
    the vectors where they bind, including an output narrower than a vector and one whose
    both ends are clamped in one vector: the evaluator's values (hdsl/codegen/cpu.py:
    clamped_load)."""
    p = hdsl.loads(EDGE, "edges.hl")
    img = np.random.RandomState(w + x0).randint(0, 65535, (3, 44)).astype(np.uint16)
    got = p.compile("host", schedule=schedule).realize((w, 3), min=(x0, 0), img=img, lo=lo, hi=hi)
    ref = p.realize((w, 3), min=(x0, 0), img=img, lo=lo, hi=hi)
    assert np.array_equal(got, ref)
    xs = np.arange(x0, x0 + w)
    f = img.astype(np.int64)
    want = (f[:, np.clip(xs - 2, 0, 43)] // 4 + f[:, np.clip(xs + 3, 0, 43)] // 4
            + f[:, np.maximum(np.minimum(xs, hi), lo)] // 4 + f[:, np.minimum(np.maximum(xs - 1, hi), lo)] // 4)
    assert np.array_equal(ref, want.astype(np.uint16))


def test_clamped_vector_loads_are_not_gathered():
    """The vectors where repeat_edge binds load the dense lanes with one masked load: no
    pattern checks (llvm.vector.reduce.and) and no gathers are left in the program (its
    shifted form: the last vector of a row moved inwards, unguarded, as the JIT runs outputs
    at least a vector wide)."""
    src = EDGE.replace(" + img(clamp(x, lo, hi), y) / 4 + img(min(max(x - 1, hi), lo), y) / 4", "")
    ir = compiled_form(hdsl.loads(src, "edges.hl").ir, "llvm", schedule="vec", shifted=True)
    assert "llvm.masked.load" in ir
    assert "llvm.masked.gather" not in ir and "llvm.vector.reduce.and" not in ir
