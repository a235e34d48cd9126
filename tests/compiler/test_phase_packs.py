"""A deinterleave's phases on AVX2 (hdsl/codegen/gather_groups.py: prepare, prepare_lets,
_phase_sets, _phase_pack; CodeGenCPU.SHARE_PHASES, before_let). camera_pipe's deinterleave
reads denoised(2x, 2y), (2x + 1, 2y), (2x, 2y + 1), (2x + 1, 2y + 1), each a stride-2 load
bound by a let (c unrolled). Before, each loaded its own dense vectors (the odd phase's
shifted by one element, the even phase's last one overlapping: 16 loads per iteration where
the four phases need 8) and LLVM lowered each 16-bit pick with 4 shuffles (even) or 6
(odd): 40 per iteration (Halide's app: 8 loads, 32 shuffles). Now the phases of one stride,
whether in one store's value or in consecutive lets of loads, read the same dense vectors,
and a 16-bit (8-bit) phase is picked by a mask or a shift of 32-bit (16-bit) lanes, one
vpackusdw (vpackuswb) and one vpermq per 256 bits: 8 loads and 16 packs and permutes per
iteration. Sets of taps that are not phases of one stride (a [1 2 1] filter's 2x - 1, 2x,
2x + 1) keep their own loads on AVX2 (CodeGenCPU.SHARE_STRIDED_AVX2: slower there).
Values against NumPy's slices and the evaluator; assembly checks fail without the rule."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.codegen.cpu import CodeGenCPU

# the four phases as camera_pipe's deinterleave has them: a mux over c, c unrolled (its
# loads become lets ahead of the four stores)
PLANES = """
pipeline planes
input raw: T[2]
output out: T[3]
algorithm {
    var x, y, c
    out(x, y, c) = select(c == 0, raw(2 * x, 2 * y), select(c == 1, raw(2 * x + 1, 2 * y),
                   select(c == 2, raw(2 * x, 2 * y + 1), raw(2 * x + 1, 2 * y + 1))))
}
schedule {
    out.bound(c, 0, 4).reorder(c, x, y).vectorize(x, LANES).unroll(c)
}
"""

# both phases in one store's value (a 2x horizontal sum, wrapping)
PAIRS = """
pipeline pairs
input raw: T[2]
output out: T[2]
algorithm {
    var x, y
    out(x, y) = raw(2 * x, y) + raw(2 * x + 1, y) * T(3)
}
schedule {
    out.vectorize(x, LANES)
}
"""


def planes(t="u16", lanes=32):
    return hdsl.loads(PLANES.replace("T", t).replace("LANES", str(lanes)), "planes.hl")


def pairs(t="u16", lanes=32):
    return hdsl.loads(PAIRS.replace("T", t).replace("LANES", str(lanes)), "pairs.hl")


def _raw(t, w, h, seed):
    dt = np.uint16 if t == "u16" else np.uint8
    return np.random.RandomState(seed).randint(0, np.iinfo(dt).max + 1, (2 * h + 1, 2 * w + 3)).astype(dt)


@pytest.mark.parametrize("target", ["x86-64-avx2", "host"])
@pytest.mark.parametrize("t, lanes", [("u16", 32), ("u16", 16), ("u8", 32), ("u8", 64)])
@pytest.mark.parametrize("w", [32, 45, 128])
def test_planes_give_numpys_and_the_evaluators_values(target, t, lanes, w):
    """Widths of whole vectors and a guarded tail (45); every bit pattern of the element
    type (a pack saturates: the masked or shifted lanes must fit exactly)."""
    h = 3
    raw = _raw(t, w, h, w + lanes)
    p = planes(t, lanes)
    got = p.compile(target).realize((w, h, 4), raw=raw)
    want = np.stack([raw[0:2 * h:2, 0:2 * w:2], raw[0:2 * h:2, 1:2 * w:2],
                     raw[1:2 * h:2, 0:2 * w:2], raw[1:2 * h:2, 1:2 * w:2]], axis=-1)     # (y, x, c)
    assert np.array_equal(got, want)
    assert np.array_equal(got, p.realize((w, h, 4), raw=raw))


@pytest.mark.parametrize("t", ["u16", "u8"])
@pytest.mark.parametrize("w", [32, 37, 96])
def test_pairs_give_numpys_and_the_evaluators_values(t, w):
    h = 2
    raw = _raw(t, w, h, 3 * w)
    p = pairs(t)
    got = p.compile("x86-64-avx2").realize((w, h), raw=raw)
    dt = raw.dtype
    want = (raw[:h, 0:2 * w:2].astype(np.int64) + raw[:h, 1:2 * w:2].astype(np.int64) * 3).astype(dt)
    assert np.array_equal(got, want)
    assert np.array_equal(got, p.realize((w, h), raw=raw))


def _loads(loop: str) -> int:
    """Vector loads of the images (a base and an index; not the constant pool's)."""
    return len(re.findall(r"vmovdq[ua]\s+-?\w*\(%\w+,%\w+", loop))


def _stores(loop: str) -> int:
    return len(re.findall(r"vmovdq[ua]\s+%ymm\d+, ", loop))


def _steady_loop(asm: str) -> str:
    """The loop with the most whole-vector stores (the vectorized steady state: the tails'
    stores are masked)."""
    lines = asm.splitlines()
    best = ""
    for i, line in enumerate(lines):
        m = re.match(r"(\.LBB\w+):", line)
        if not m:
            continue
        for j in range(i + 1, len(lines)):
            if re.match(r"\.LBB\w+:", lines[j]):
                break                      # (not an innermost loop, or not a loop)
            if re.match(rf"\s+j\w+\s+{re.escape(m.group(1))}$", lines[j]):
                body = "\n".join(lines[i + 1:j])
                if _stores(body) > _stores(best):
                    best = body
                break
    return best


@pytest.mark.parametrize("t, pack", [("u16", "vpackusdw"), ("u8", "vpackuswb")])
def test_the_four_phases_load_each_vector_once_and_pack(t, pack):
    """32 lanes of u16 from two rows: the 64 elements of each row are 4 ymm loads, each
    read by two phases; 8 loads, 8 packs and 8 vpermq per iteration (u8: 64 lanes, the
    same counts)."""
    lanes = 32 if t == "u16" else 64
    loop = _steady_loop(compiled_form(planes(t, lanes).ir, "asm", target="x86-64-avx2"))
    assert _loads(loop) == 8, loop
    assert loop.count(pack) == 8, loop
    assert loop.count("vpermq") == 8, loop


def test_without_the_rule_each_phase_loads_its_own(monkeypatch):
    monkeypatch.setattr(CodeGenCPU, "SHARE_PHASES", False)
    loop = _steady_loop(compiled_form(planes().ir, "asm", target="x86-64-avx2"))
    assert "vpackusdw" not in loop
    assert _loads(loop) == 16, loop


def test_the_phases_in_one_store_pack():
    loop = _steady_loop(compiled_form(pairs().ir, "asm", target="x86-64-avx2"))
    assert loop.count("vpackusdw") == 4 and _loads(loop) == 4, loop


def test_three_taps_keep_their_own_loads_on_avx2():
    """x * 2 - 1, x * 2, x * 2 + 1: not phases of one stride (the first and last share their
    elements' parity), so no pack on AVX2 (SHARE_STRIDED_AVX2 stays off there)."""
    src = PAIRS.replace("raw(2 * x, y) + raw(2 * x + 1, y) * T(3)",
                        "raw(2 * x, y) + raw(2 * x + 1, y) * T(3) + raw(2 * x + 2, y)")
    loop = _steady_loop(compiled_form(hdsl.loads(src.replace("T", "u16").replace("LANES", "32"), "t.hl").ir,
                                      "asm", target="x86-64-avx2"))
    assert "vpackusdw" not in loop
