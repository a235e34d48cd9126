"""Observable facts about compiled schedules (counted, not timed)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.codegen.cpu import generate
from hdsl.lower.lower import lower
from hdsl.runtime.jit import assembly

COUNTING_BLUR = """
pipeline blur
use boundary
input img: u16[2]
output out: u16[2]
algorithm {
    clamped = repeat_edge(img)
    # print evaluates to its first argument and reports where blur_x is computed
    blur_x(x, y) = print((clamped(x - 1, y) + clamped(x, y) + clamped(x + 1, y)) / 3, "bx", x, y)
    out(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3
}
schedule sliding { blur_x.store_root().compute_at(out, y) }
schedule per_row { blur_x.compute_at(out, y) }
"""


def _computed_points(capfd, pipeline, img):
    capfd.readouterr()
    out = pipeline(img=img)
    lines = [l for l in capfd.readouterr().out.splitlines() if " bx " in l]
    points = [tuple(int(v) for v in l.split(" bx ")[1].split()) for l in lines]
    return out, points


def test_sliding_window_computes_each_producer_row_once(capfd):
    p = hdsl.loads(COUNTING_BLUR, "count.hl")
    img = np.random.RandomState(3).randint(0, 20000, (9, 6)).astype(np.uint16)
    expected = p(img=img)          # the evaluator prints too; discard it
    out, points = _computed_points(capfd, p.compile("host", schedule="sliding"), img)
    assert np.array_equal(out, expected)
    # rows -1 .. 9 of blur_x, 6 columns each, every point exactly once
    assert sorted(points) == sorted({(x, y) for x in range(6) for y in range(-1, 10)})
    assert len(points) == 6 * 11


def test_without_sliding_rows_are_recomputed(capfd):
    p = hdsl.loads(COUNTING_BLUR, "count.hl")
    img = np.random.RandomState(3).randint(0, 20000, (9, 6)).astype(np.uint16)
    out, points = _computed_points(capfd, p.compile("host", schedule="per_row"), img)
    assert len(points) == 6 * 3 * 9          # three rows of blur_x for each of out's nine rows
    assert len(set(points)) == 6 * 11


def test_sliding_window_storage_is_folded_to_four_rows():
    p = hdsl.loads(COUNTING_BLUR, "count.hl")
    from hdsl.ir.printer import stmt_str
    text = stmt_str(lower(p.ir, "sliding").stages["schedule_functions"])
    assert "folded y mod 4" in text


COUNTING_UPSAMPLE = """
pipeline up
use boundary
input img: i32[2]
output out: i32[2]
algorithm {
    clamped = repeat_edge(img)
    # two upsampling levels, as in a pyramid's collapse: each output row needs rows
    # (y - 1) / 2 and (y + 1) / 2 of the coarser level
    c2(x, y) = print(clamped(x, y) * 3, "c2", x, y)
    c1(x, y) = print(c2(x / 2, (y - 1) / 2) + c2(x / 2, (y + 1) / 2), "c1", x, y)
    out(x, y) = c1(x / 2, (y - 1) / 2) + c1(x / 2, (y + 1) / 2)
}
schedule sliding {
    out.split(y, yo, yi, 8)
    c1.store_at(out, yo).compute_at(out, yi)
    c2.store_at(out, yo).compute_at(out, yi)
}
"""


def test_sliding_window_with_a_half_rate_footprint(capfd):
    """c1's rows for out's row y are (y - 1) / 2 .. (y + 1) / 2: a window whose step is 0 or 1,
    never constant; and c2's region follows c1's slid one. Both are monotonic, so each row of
    c1 and of c2 is computed once per strip of 8 output rows (before, every output row
    recomputed two rows of each)."""
    p = hdsl.loads(COUNTING_UPSAMPLE, "up.hl")
    img = np.random.RandomState(5).randint(-100, 100, (6, 5)).astype(np.int32)
    w, h = 16, 24
    expected = p.realize((w, h), img=img)
    capfd.readouterr()
    c = p.compile("host", schedule="sliding")
    out = c.realize((w, h), img=img)
    text = capfd.readouterr().out.splitlines()
    assert np.array_equal(out, expected)
    for tag in ("c1", "c2"):
        points = [tuple(int(v) for v in l.split(f" {tag} ")[1].split()) for l in text if f" {tag} " in l]
        per_strip = {}
        for yo in range(h // 8):
            ys = range(yo * 8, yo * 8 + 8)
            rows = sorted({r for y in ys for r in ((y - 1) // 2, (y + 1) // 2)})
            if tag == "c2":
                rows = sorted({r for y in rows for r in ((y - 1) // 2, (y + 1) // 2)})
            per_strip[yo] = rows
        expected_rows = [r for yo in per_strip for r in per_strip[yo]]
        width = (w // 2) if tag == "c1" else (w // 4)
        assert len(points) == width * len(expected_rows), tag
        assert sorted(y for _, y in points) == sorted(r for r in expected_rows for _ in range(width)), tag


VEC = """
pipeline scale
input img: f32[2]
output out: f32[2]
algorithm { out(x, y) = img(x, y) * 2.0f + 1.0f }
schedule { out.vectorize(x, 16) }
"""


def test_vectorize_16_f32_uses_512_bit_registers_on_avx512():
    p = hdsl.loads(VEC, "vec.hl")
    module = str(generate(p.ir, lower(p.ir).stmt, "hdsl_scale"))
    asm = assembly(module, "x86-64-avx512")
    assert re.search(r"\bzmm\d+", asm), "no 512-bit vector registers in the avx512 code"
    asm2 = assembly(module, "x86-64-avx2")
    assert not re.search(r"\bzmm\d+", asm2)
    assert re.search(r"\bymm\d+", asm2)


def test_vectorized_loop_is_explicit_vector_ir():
    p = hdsl.loads(VEC, "vec.hl")
    module = str(generate(p.ir, lower(p.ir).stmt, "hdsl_scale"))
    assert "<16 x float>" in module


@pytest.mark.parametrize("target", ["x86-64-avx2", "x86-64-avx512"])
def test_explicit_targets_run_and_match(target):
    p = hdsl.loads(VEC, "vec.hl")
    img = np.random.RandomState(0).rand(7, 37).astype(np.float32)
    assert np.array_equal(p.compile(target)(img=img), p(img=img))


FMA = """
pipeline fma
input a: f32[1]
input b: f32[1]
output out: f32[1]
algorithm { out(x) = a(x) * b(x) + 1.0f }
schedule { out.vectorize(x, 8) }
"""


def test_strict_math_never_fuses_but_fast_math_may():
    p = hdsl.loads(FMA, "fma.hl")
    strict = str(generate(p.ir, lower(p.ir).stmt, "hdsl_fma"))
    fast = str(generate(p.ir, lower(p.ir).stmt, "hdsl_fma", fast_math=True))
    assert "contract" not in strict
    assert "fmul contract" in fast
    assert not re.search(r"vfmadd", assembly(strict, "x86-64-avx2"))
    assert re.search(r"vfmadd", assembly(fast, "x86-64-avx2"))


def test_strict_results_are_bit_exact_with_the_evaluator():
    p = hdsl.loads(FMA, "fma.hl")
    rs = np.random.RandomState(5)
    a, b = rs.randn(1000).astype(np.float32), rs.randn(1000).astype(np.float32)
    assert np.array_equal(p.compile("host")(a=a, b=b), p(a=a, b=b))
    fast = p.compile("host-fast_math")(a=a, b=b)
    assert np.allclose(fast, p(a=a, b=b), rtol=1e-6, atol=1e-6)


NAN_ZERO = """
pipeline nz
input a: f32[1]
input b: f32[1]
output lo: f32[1]
output hi: f32[1]
output neg: f32[1]
output sat: f32[1]
input d: f64[1]
algorithm {
    lo(x) = min(a(x), b(x))
    hi(x) = max(a(x), b(x))
    neg(x) = -a(x)
    sat(x) = f32_sat(d(x))
}
"""


@pytest.mark.parametrize("schedule", [None, "vec"])
def test_nan_signed_zero_and_float_saturation_match_the_evaluator(schedule):
    src = NAN_ZERO + "schedule vec { lo.vectorize(x, 4)\n hi.vectorize(x, 4)\n neg.vectorize(x, 4) }\n"
    p = hdsl.loads(src, "nz.hl")
    a = np.array([np.nan, 1.0, 0.0, -0.0, 2.0, np.nan, -1.0, 0.0], np.float32)
    b = np.array([1.0, np.nan, -0.0, 0.0, np.nan, np.nan, 3.0, 5.0], np.float32)
    d = np.array([1e300, -1e300, 1.5, np.inf, 0.0, -2.0, 7.0, 3.0], np.float64)
    ref = p.realize([[8]] * 4, a=a, b=b, d=d)
    got = p.compile("host", schedule=schedule).realize([[8]] * 4, a=a, b=b, d=d)
    for r, g in zip(ref, got):
        assert r.tobytes() == g.tobytes()          # bit for bit: NaNs, the sign of zero, inf
    assert np.signbit(ref[2][2]) == False and ref[3][0] == np.inf


INLINE_SUM = """
pipeline box
use boundary
input img: u8[2]
param r: i32 = 3
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    rdom k = [-r..r + 1]
    hsum(x, y) = sum(f32(c(x + k.x, y)))
    out(x, y) = sum(hsum(x, y + k.x)) / f32((2 * r + 1) * (2 * r + 1))
}
schedule s {
    out.vectorize(x, 8).parallel(y)
    hsum.compute_at(out, y).vectorize(x, 8)
}
"""


def test_inline_reductions_read_by_vector_code_are_vectorized():
    """sum(...) inside a vectorized Func: computed above the consumer's loops over that dim
    (over a row of lanes, not per lane) with its update's lanes innermost and vectorized;
    before, its per-point loops and allocation inside the vector loop made the consumer's
    whole vector loop scalar (the unsharp benchmark ran 11x slower than Halide)."""
    from hdsl.ir.printer import stmt_str
    p = hdsl.loads(INLINE_SUM, "box.hl")
    text = stmt_str(lower(p.ir, "s").stages["schedule_functions"])
    vec = [l.strip() for l in text.splitlines() if l.strip().startswith("vectorized for")]
    assert any("sum" in l and ".s1." in l for l in vec), vec     # the sums' updates
    assert any(l.startswith("vectorized for out.s0.x_i") for l in vec)
    c = p.compile("host", schedule="s")
    for w, h, r in ((1, 1, 1), (7, 3, 2), (8, 5, 3), (29, 11, 3), (64, 9, 5)):
        img = np.random.RandomState(w).randint(0, 255, (h, w)).astype(np.uint8)
        assert np.array_equal(c(img=img, r=r), p(img=img, r=r)), (w, h, r)


REVERSED = """
pipeline rev
input img: f32[2]
output out: f32[2]
output back: f32[2]
algorithm {
    # read downwards: lanes x, x + 1, ... read img at w - 1 - x, w - 2 - x, ...
    out(x, y) = img(img.width - 1 - x, y) * 2.0f
    # write downwards: lane r.x writes back(w - 1 - r.x)
    back(x, y) = 0.0f
    rdom r = [0..img.width]
    back(img.width - 1 - r.x, y) = img(r.x, y) + 1.0f
}
schedule {
    out.vectorize(x, 8)
    back.update(0).vectorize(r.x, 8)
}
"""


@pytest.mark.parametrize("width", [8, 29])
def test_reversed_vector_loads_and_stores_are_dense_not_gathers(width):
    """Lanes whose index runs downwards (stride -1, an anticausal filter's input) are one
    dense load or store and a lane reversal, not a gather or a scatter; the values are
    NumPy's flip (odd widths: the loop's tail lanes too)."""
    p = hdsl.loads(REVERSED, "rev.hl")
    img = np.random.RandomState(5).uniform(-4, 4, (5, width)).astype(np.float32)
    out, back = p.compile("host")(img=img)
    assert np.array_equal(out, img[:, ::-1] * np.float32(2))
    assert np.array_equal(back, img[:, ::-1] + np.float32(1))
    # out's tiles shifted inwards (the JIT's form for outputs of a vector width or more):
    # every lane in range, nothing guarded by masks
    p = hdsl.loads(REVERSED.replace("output back: f32[2]", "").split("    # write downwards")[0] + "}\n"
                   "schedule { out.vectorize(x, 8) }\n", "rev_out.hl")
    module = str(generate(p.ir, lower(p.ir, shift_outputs=True).stmt, "hdsl_rev"))
    for target in ("x86-64-avx512", "x86-64-avx2"):
        assert not re.search(r"gather|scatter", assembly(module, target)), target
