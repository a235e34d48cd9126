"""Accesses inside a loop address off a pointer hoisted out of it (CodeGenLLVM.hoisted_base):
the loop-invariant terms of each access's 64-bit offset are summed into `base + invariant`,
which LLVM moves out of the loop, and the access is that pointer plus the offset's varying
terms. And `f(x / 2)`'s interleaved indices are addressed in 64 bits too
(CodeGenLLVM._wide_interleave). Both only reassociate wrapping 64-bit sums, so values never
change: checked against NumPy (exact here: small integers, halves and quarters in f32) and
the evaluator, for output regions whose first x is even, odd, negative, and near the ends
of the i32 range (where the 32-bit parts of an offset wrap). The assembly and IR checks
fail without the rules (each test switches its rule off to show it)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.codegen.cpu import CodeGenCPU
from hdsl.codegen.llvm import CodeGenLLVM

# interpolate's level 1 (examples/interpolate.hl, Halide's apps/interpolate): four planes
# premultiplied row by row into a folded buffer (the input loop: four loads and four stores
# a vector), then downsampled [1 2 1] in x and y
LEVEL1 = """
pipeline level1
use boundary
input img: f32[3]
output out: f32[3]
algorithm {
    clamped = repeat_edge(img)
    pre(x, y, c) = select(c < 3, clamped(x, y, c) * clamped(x, y, 3), clamped(x, y, 3))
    dx(x, y, c) = (pre(x * 2 - 1, y, c) + 2.0f * pre(x * 2, y, c) + pre(x * 2 + 1, y, c)) * 0.25f
    down(x, y, c) = (dx(x, y * 2 - 1, c) + 2.0f * dx(x, y * 2, c) + dx(x, y * 2 + 1, c)) * 0.25f
    out(x, y, c) = down(x, y, c)
}
schedule {
    out.bound(c, 0, 4)
    down.compute_root().reorder(x, c, y).split(y, yo, yi, 8).parallel(yo).vectorize(x, 8)
    pre.store_at(down, yo).compute_at(down, yi).reorder(c, x, y).unroll(c).vectorize(x, 8)
}
schedule scalar {
    out.bound(c, 0, 4)
    down.compute_root()
    pre.store_at(down, y).compute_at(down, y)
}
"""

# interpolate's upsampling (up() in examples/interpolate.hl): x / 2 and (x + 1) / 2 of a
# vectorized x, interleaved indices
UP = """
pipeline upx
use boundary
input img: f32[2]
output out: f32[2]
algorithm {
    var x, y
    clamped = repeat_edge(img)
    f(x, y) = clamped(x, y) * 2.0f + 1.0f
    out(x, y) = (f(x / 2, y) + f((x + 1) / 2, y)) / 2.0f + f(x / 2, y + 1)
}
schedule {
    f.compute_root()
    out.vectorize(x, 8)
}
"""


def level1_numpy(img, x0, y0, w, h):
    """LEVEL1 over x0 .. x0 + w - 1, y0 .. y0 + h - 1 for planes img[c][y][x] (origin 0):
    repeat_edge as clipped indices, in float64 (exact here). Returns [c][y][x]."""
    i = img.astype(np.float64)
    H, W = i.shape[1:]

    def pre(x, y):                    # all four planes at x (an array), row y
        xs, ys = np.clip(x, 0, W - 1), min(max(y, 0), H - 1)
        a = i[3, ys, xs]
        return np.stack([i[0, ys, xs] * a, i[1, ys, xs] * a, i[2, ys, xs] * a, a])
    xs = np.arange(x0, x0 + w)

    def dx(y):
        return (pre(2 * xs - 1, y) + 2 * pre(2 * xs, y) + pre(2 * xs + 1, y)) * 0.25
    rows = [(dx(2 * y - 1) + 2 * dx(2 * y) + dx(2 * y + 1)) * 0.25 for y in range(y0, y0 + h)]
    return np.stack(rows, axis=1)            # [c][y][x]


@pytest.mark.parametrize("target", ["x86-64-avx2", "host"])
@pytest.mark.parametrize("schedule", [None, "scalar"])
@pytest.mark.parametrize("x0, y0, w", [(0, 0, 24), (-3, -2, 19), (5, 1, 8), (-2 ** 30 + 9, 3, 13),
                                       (2 ** 30 - 40, -5, 21)])
def test_level1_values(target, schedule, x0, y0, w):
    """Vector and scalar loops, even and odd first x, a guarded tail, and a region whose
    premultiplied row starts near -2^31 (2x - 1 for x near -2^30: the offsets' 32-bit parts
    wrap there; the image is read at clipped coordinates)."""
    h = 5
    rs = np.random.RandomState(abs(x0) % 1000 + w)
    img = rs.randint(0, 16, (4, 9, 23)).astype(np.float32)
    p = hdsl.loads(LEVEL1, "level1.hl")
    planes = img.transpose(1, 2, 0)                 # (H, W, C), channels as planes
    got = p.compile(target, schedule=schedule).realize((w, h, 4), min=(x0, y0, 0), img=planes)
    assert np.array_equal(got, level1_numpy(img, x0, y0, w, h).transpose(1, 2, 0).astype(np.float32))
    if schedule is None and target == "host" and abs(x0) < 100:
        assert np.array_equal(got, p.realize((w, h, 4), min=(x0, y0, 0), img=planes))


def _loops(asm: str):
    """Bodies of the loops (a label that a jump at the end of its block returns to)."""
    for m in re.finditer(r"^(\.LBB\S+):[^\n]*\n(.*?)(?=^\.LBB|\Z)", asm, re.S | re.M):
        if re.search(r"\bj\w+\s+" + re.escape(m.group(1)) + r"\b", m.group(2)):
            yield [ln.strip() for ln in m.group(2).splitlines()
                   if ln.strip() and not ln.strip().startswith((".", "#"))]


def _input_loop(monkeypatch, hoist: bool) -> list[str]:
    """The premultiplying loop of LEVEL1 on AVX2: the loop with vmulps and no shuffles."""
    monkeypatch.setattr(CodeGenLLVM, "HOIST_BASES", hoist)
    asm = compiled_form(hdsl.loads(LEVEL1, "level1.hl").ir, "asm", target="x86-64-avx2")
    loops = [body for body in _loops(asm) if any(ln.startswith("vmulps") for ln in body)
             and not any(ln.startswith(("vshufps", "vperm")) for ln in body)]
    assert loops
    return max(loops, key=lambda body: sum(ln.startswith("vmulps") for ln in body))


def test_the_input_loop_addresses_off_hoisted_pointers(monkeypatch):
    """Per vector the loop is its 4 loads (one folded into each vmulps), 3 multiplies and 4
    stores, plus the counter: at most 7 instructions a vector (LLVM unrolls it by 2: 25
    instructions for two vectors when this was written), and nothing reloaded from the
    stack frame. Without the rule the invariant parts of the eight offsets are summed in
    the loop and spilled (45 instructions for two vectors, 15 stack reloads)."""
    def frame(body):
        return sum(bool(re.search(r"\(%r[sb]p\)|\(%rbx\)", ln)) for ln in body if not ln.startswith("vmovups %"))
    body = _input_loop(monkeypatch, True)
    vectors = sum(ln.startswith("vmulps") for ln in body) // 3
    assert vectors >= 1
    assert len(body) <= 13 * vectors, body
    assert frame(body) <= 1, body
    without = _input_loop(monkeypatch, False)
    assert len(without) > 13 * vectors and frame(without) > 4


@pytest.mark.parametrize("target", ["x86-64-avx2", "host"])
@pytest.mark.parametrize("x0, w", [(0, 32), (1, 29), (-7, 8), (6, 3), (-2 ** 31 + 3, 17)])
def test_upsampling_values(target, x0, w):
    """x / 2 and (x + 1) / 2 from even and odd first lanes (floor division: -7 / 2 = -4), a
    region narrower than a vector, and one near -2^31 (the image read at clipped x)."""
    h = 3
    img = np.random.RandomState(w).randint(-20, 20, (h + 1, 11)).astype(np.float32)
    xs = np.arange(x0, x0 + w, dtype=np.int64)
    f = img.astype(np.float64) * 2 + 1

    def fx(x, rows):
        return f[rows][:, np.clip(x, 0, f.shape[1] - 1)]
    want = ((fx(xs // 2, slice(0, h)) + fx((xs + 1) // 2, slice(0, h))) / 2 + fx(xs // 2, slice(1, h + 1)))
    p = hdsl.loads(UP, "upx.hl")
    got = p.compile(target).realize((w, h), min=(x0, 0), img=img)
    assert np.array_equal(got, want.astype(np.float32))
    if abs(x0) < 100:
        assert np.array_equal(got, p.realize((w, h), min=(x0, 0), img=img))


def test_interleaved_loads_address_in_64_bits(monkeypatch):
    """The x / 2 taps' half-vector loads take i64 offsets off a hoisted pointer; without the
    rule they were i32 sums, sign-extended by the gep (one per half-vector)."""
    def narrow_half_loads(ll):
        return len(re.findall(r"getelementptr float, ptr %\S+, i32 %\S+\n\s+%\S+ = load <4 x float>", ll))
    ll = compiled_form(hdsl.loads(UP, "upx.hl").ir, "llvm", target="x86-64-avx2")
    assert "load <4 x float>" in ll
    assert narrow_half_loads(ll) == 0
    monkeypatch.setattr(CodeGenLLVM, "WIDE_INTERLEAVE", False)
    ll = compiled_form(hdsl.loads(UP, "upx.hl").ir, "llvm", target="x86-64-avx2")
    assert narrow_half_loads(ll) >= 4


ROWS = """
pipeline rows
input img: f32[2]
output out: f32[2]
algorithm {
    var x, y
    out(x, y) = SUM
}
schedule {
    out.vectorize(x, 8)
}
"""


def rows_program(k: int):
    return hdsl.loads(ROWS.replace("SUM", " + ".join(f"img(x, y + {j})" for j in range(k))), "rows.hl")


def hoisted_pointers(ll: str) -> int:
    """geps off a pointer that is itself a gep at a variable offset (base + invariant)."""
    geps = dict(re.findall(r'(%"?[\w.$]+"?) = getelementptr \w+, ptr (%"?[\w.$]+"?), i64 %', ll))
    return sum(1 for ptr in geps.values() if ptr in geps)


@pytest.mark.parametrize("k", [4, 20])
def test_row_sums_values(k):
    """k rows summed (k + 1 accesses a vector: under and over HOIST_ACCESSES), as NumPy sums
    them (small integers: exact), from an odd first x with a tail."""
    w, h = 21, 3
    img = np.random.RandomState(k).randint(-50, 50, (h + k, w + 3)).astype(np.float32)
    got = rows_program(k).compile("x86-64-avx2").realize((w, h), min=(3, 0), img=img)
    want = sum(img[j:j + h, 3:3 + w].astype(np.float64) for j in range(k))
    assert np.array_equal(got, want.astype(np.float32))


def test_a_loop_with_many_accesses_hoists_nothing(monkeypatch):
    """Four rows read (and one written) off pointers hoisted out of the vector loop; twenty
    rows (21 accesses: more than HOIST_ACCESSES) none, as with the rule off. (The local
    Laplacian's largest loop, dozens of gathers with vectors already spilled, spilled the
    hoisted pointers too: 5.6% more instructions.)"""
    def form(k):
        return compiled_form(rows_program(k).ir, "llvm", target="x86-64-avx2")
    assert CodeGenLLVM.HOIST_ACCESSES < 21
    assert hoisted_pointers(form(4)) >= 4
    assert hoisted_pointers(form(20)) == 0
    monkeypatch.setattr(CodeGenLLVM, "HOIST_BASES", False)
    assert hoisted_pointers(form(4)) == 0


def test_x_over_2_and_x_plus_1_over_2_share_their_common_half(monkeypatch):
    """UP reads f at x / 2 and (x + 1) / 2 of row y and x / 2 of row y + 1: half-vectors
    starting at x0 / 2, (x0 + 1) / 2 (both taps of row y), (x0 + 2) / 2, and x0 / 2,
    (x0 + 1) / 2 of row y + 1. Addressed as rest + each half's own first lane
    (CodeGenLLVM._interleave_terms), the common half of row y is one load: 5 half-vector
    loads in the steady loop on AVX2, where lane 0 plus a difference made 6."""
    def half_loads():
        asm = compiled_form(hdsl.loads(UP, "upx.hl").ir, "asm", target="x86-64-avx2")
        loop = max((body for body in _loops(asm) if any(ln.startswith("vpermilps") for ln in body)), key=len)
        return sum(1 for ln in loop if re.match(r"(vbroadcastf128|vmovups)\s+[-0-9]*\(", ln))
    assert half_loads() == 5
    monkeypatch.setattr(CodeGenLLVM, "SHARED_HALVES", False)
    assert half_loads() == 6


# interpolate's output: 2x2 upsampling of two Funcs, 8 loads at x / 2 and (x + 1) / 2 a vector
UP8 = """
pipeline up8
use boundary
input img: T[2]
output out: T[2]
algorithm {
    var x, y
    clamped = repeat_edge(img)
    f(x, y) = clamped(x, y) * K2 + K1
    g(x, y) = clamped(x, y) - K1
    uf(x, y) = f(x / 2, y / 2) + f((x + 1) / 2, y / 2) + f(x / 2, (y + 1) / 2) + f((x + 1) / 2, (y + 1) / 2)
    ug(x, y) = g(x / 2, y / 2) + g((x + 1) / 2, y / 2) + g(x / 2, (y + 1) / 2) + g((x + 1) / 2, (y + 1) / 2)
    out(x, y) = uf(x, y) * K2 - ug(x, y)
}
schedule {
    f.compute_root()
    g.compute_root()
    out.vectorize(x, 8)
}
"""


def up8(t: str):
    k1, k2 = ("1.0f", "2.0f") if t == "f32" else ("1", "2")
    return hdsl.loads(UP8.replace("T[", t + "[").replace("K1", k1).replace("K2", k2), "up8.hl")


@pytest.mark.parametrize("t", ["f32", "i32"])
@pytest.mark.parametrize("target", ["x86-64-avx2", "host"])
@pytest.mark.parametrize("x0, y0, w", [(0, 0, 32), (1, 1, 29), (-7, -3, 8), (5, 2, 3), (-2 ** 31 + 3, 0, 17)])
def test_parity_loads_values(t, target, x0, y0, w):
    """Even and odd first x (the halves' first lanes differ by 0 or 1), a region narrower than
    a vector, floor division of negative x, and f32 and i32 lanes (the permute is of floats:
    i32 goes through bitcasts), against NumPy in int64 / float64 (exact here)."""
    h = 4
    dt = np.float32 if t == "f32" else np.int32
    img = np.random.RandomState(w + x0 % 7).randint(-20, 20, (6, 11)).astype(dt)
    i = img.astype(np.int64)

    def at(x, y):
        return i[np.clip(y, 0, i.shape[0] - 1)][:, np.clip(x, 0, i.shape[1] - 1)]
    xs = np.arange(x0, x0 + w, dtype=np.int64)
    ys = np.arange(y0, y0 + h, dtype=np.int64)
    taps = [at(a, b) for b in (ys // 2, (ys + 1) // 2) for a in (xs // 2, (xs + 1) // 2)]
    want = sum(v * 2 + 1 for v in taps) * 2 - sum(v - 1 for v in taps)
    p = up8(t)
    got = p.compile(target).realize((w, h), min=(x0, y0), img=img)
    assert np.array_equal(got, want.astype(dt))
    if abs(x0) < 100:
        assert np.array_equal(got, p.realize((w, h), min=(x0, y0), img=img))


def test_parity_loads_shape(monkeypatch):
    """On AVX2 each of the 8 loads is one permute of [f[p .. p + 3] | f[p + d .. p + d + 3]]
    (vinsertf128, vpermilps with a control made from d); with the rule off, the fixed
    interleave of two half-vectors: vpermilps twice and a blend each, no insert. UP's 3
    such loads (fewer than PARITY_MIN_LOADS) keep the fixed interleave."""
    def loop(p):
        asm = compiled_form(p.ir, "asm", target="x86-64-avx2")
        return max((body for body in _loops(asm) if any(ln.startswith("vpermilps") for ln in body)), key=len)
    body = loop(up8("f32"))
    assert sum(ln.startswith("vinsertf128") for ln in body) >= 6
    assert sum(ln.startswith("vpermilps") for ln in body) == 8
    assert not any(ln.startswith("vblendps") for ln in body)
    assert not any(ln.startswith("vinsertf128") for ln in loop(hdsl.loads(UP, "upx.hl")))
    monkeypatch.setattr(CodeGenCPU, "PARITY_LOADS", False)
    body = loop(up8("f32"))
    assert not any(ln.startswith("vinsertf128") for ln in body)
    assert sum(ln.startswith("vpermilps") for ln in body) >= 12
