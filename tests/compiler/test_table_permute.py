"""Look-ups in an 8-bit table that the pipeline computes into an allocation of constant size
of at most 1024 bytes (camera_pipe's tone curve) are byte permutes on CPUs with AVX-512 VBMI
(hdsl/codegen/cpu.py, table_lookup): the table's 64-byte chunks indexed in pairs by vpermi2b,
the pair chosen by the index's higher bits. The values are NumPy's table look-ups (an
independent oracle: `table[index]` over an array built by the same formula) and the
evaluator's, for tables of 1 to 1024 entries (sizes not a multiple of the 128 bytes of a
pair, an odd number of 64-byte chunks), 1025 (too large: the scalar loads stay), tables not
starting at 0, indices at both ends of the tables, 16 to 64 lanes with a tail, u8 and i8, and
a table allocated inside the parallel loop's task rather than outside it. Without VBMI
(x86-64-avx2) look-ups in tables of up to 2^16 bytes load each lane on its own but take the
indices out of the vector four at a time (packed_lookup): tables of 4000 and 65530 entries,
8 to 64 lanes, and the IR's 64-bit extracts."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.codegen.cpu import has_features

VBMI = has_features("host", "+avx512vbmi")

SRC = """
pipeline lut
input img: u16[2]
output out: i32[2]
algorithm {
    var x, y, i
    t(i) = TYPE(i * 7 + 3 + i / 251)
    let k = clamp(i32(img(x, y)), LO, HI)
    out(x, y) = i32(t(k)) * 3 + i32(t(HI + LO - k))
}
schedule {
    t.PLACE
    out.vectorize(x, LANES).parallel(y)
}
"""


def program(n, lanes=64, typ="u8", lo=0, place="compute_root()"):
    src = SRC.replace("LANES", str(lanes)).replace("TYPE", typ).replace("LO", str(lo)) \
        .replace("HI", str(lo + n - 1)).replace("PLACE", place)
    return hdsl.loads(src, "lut.hl")


def by_numpy(img, n, typ, lo):
    i = np.arange(lo, lo + n, dtype=np.int64)
    table = (i * 7 + 3 + i // 251).astype(typ).astype(np.int64)     # (not periodic in 2^k)
    k = np.clip(img.astype(np.int64), lo, lo + n - 1)
    return (table[k - lo] * 3 + table[(lo + n - 1 + lo - k) - lo]).astype(np.int32)


def image(n, lanes, lo, seed):
    rs = np.random.RandomState(seed)
    img = rs.randint(max(0, lo - 5), lo + n + 5, (7, 3 * lanes + 5)).astype(np.uint16)
    img[0, :4] = [lo, lo + n - 1, lo + n, 65535]        # both ends, and clamped past them
    return img


@pytest.mark.parametrize("n, lanes, typ, lo, place", [
    (1024, 64, "u8", 0, "compute_root()"),
    (1024, 16, "i8", 0, "compute_root()"),
    (1000, 32, "u8", 0, "compute_root()"),     # 16 chunks, the last one partly the table's
    (320, 64, "u8", 0, "compute_root()"),      # 5 chunks: the last pair half empty
    (64, 64, "i8", 0, "compute_root()"),       # one chunk: no blend
    (1, 16, "u8", 0, "compute_root()"),
    (700, 64, "u8", 37, "compute_root()"),     # a table starting at 37
    (1025, 64, "u8", 0, "compute_root()"),     # too large for permutes
    (512, 64, "u8", 0, "compute_at(out, y)"),  # allocated inside the parallel loop's task
    (4000, 32, "u8", 0, "compute_root()"),     # without VBMI (x86-64-avx2): packed_lookup,
    (65530, 16, "i8", 0, "compute_root()"),    # indices of 16 bits up to the table's end
    (3000, 8, "u8", 1000, "compute_root()"),
])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_table_lookups_give_numpys_and_the_evaluators_values(n, lanes, typ, lo, place, target):
    img = image(n, lanes, lo, n + lanes)
    p = program(n, lanes, typ, lo, place)
    got = p.compile(target).realize(img.shape[::-1], img=img)
    assert np.array_equal(got, by_numpy(img, n, np.dtype(np.uint8 if typ == "u8" else np.int8), lo))
    assert np.array_equal(got, p.realize(img.shape[::-1], img=img))


# (hardware: the permutes exist only with VBMI, and hdsl names no CPU variant that has it
# besides "host"; the values above, and the no-VBMI check below, run on every machine)
@pytest.mark.skipif(not VBMI, reason="the host has no AVX-512 VBMI (the values above still ran)")
def test_the_lookups_are_byte_permutes_with_vbmi():
    """Two look-ups of 64 lanes in a table of 1024 bytes: 8 permutes each (4 pairs of
    chunks for 512 bytes), no scalar load per lane; a table of 1025 entries keeps them."""
    ir = compiled_form(program(1024).ir, "llvm")
    calls = [line for line in ir.splitlines() if "call" in line and "vpermi2var" in line]
    assert len(calls) == 2 * 8
    assert ir.count("load i8, ptr") == 0
    ir = compiled_form(program(512, place="compute_at(out, y)").ir, "llvm")
    assert len([line for line in ir.splitlines() if "call" in line and "vpermi2var" in line]) == 2 * 4
    ir = compiled_form(program(1025).ir, "llvm")
    assert "vpermi2var" not in ir and ir.count("load i8, ptr") == 2 * 64


def test_no_byte_permutes_without_vbmi():
    """x86-64-avx512 (Skylake: no VBMI) keeps one scalar load per lane."""
    ir = compiled_form(program(1024).ir, "llvm", target="x86-64-avx512")
    assert "vpermi2var" not in ir and ir.count("load i8, ptr") == 2 * 64


def test_lookups_without_vbmi_take_four_indices_an_extract():
    """x86-64-avx2: one byte load per lane, the indices narrowed to 16 bits and taken out as
    64-bit words (a quarter as many extracts as lanes), not a 32-bit extract per lane; a table
    of more than 2^16 bytes keeps the per-lane extracts."""
    for n, lanes in [(1024, 64), (4000, 32), (65530, 16)]:
        ir = compiled_form(program(n, lanes).ir, "llvm", target="x86-64-avx2")
        assert ir.count("load i8, ptr") == 2 * lanes
        assert ir.count(f"extractelement <{lanes // 4} x i64>") == 2 * lanes // 4
        assert f"extractelement <{lanes} x i32>" not in ir
    ir = compiled_form(program(70000, 16).ir, "llvm", target="x86-64-avx2")
    assert "extractelement <4 x i64>" not in ir and "extractelement <16 x i32>" in ir
