"""Two-dimensional vectorization (hdsl/codegen/transpose.py): loop nests that move a block
between row-major and lane-major layouts load dense rows and transpose them in registers
(or transpose and store dense rows) instead of gathering or scattering element by element.

Oracles: NumPy's transpose (`img.T`), exact in f32 (x2 and +1 are exact on these values), and
the reference evaluator for the tiled recursive filters, whose x passes stage their tiles
through these transposes."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.codegen.cpu import generate
from hdsl.lower.lower import lower
from hdsl.runtime.jit import assembly

# out reads img down its columns: along the vector lanes (x) the read steps by img's row
# stride; along y (the loop around the lanes) by one element
TRANSPOSED_READ = """
pipeline tr
input img: f32[2]
output out: f32[2]
algorithm {
    out(x, y) = img(y, x) * 2.0f
}
schedule unrolled {
    out.tile(x, y, xo, yo, xi, yi, 16, 16).vectorize(xi).unroll(yi)
}
schedule serial {
    out.split(x, xo, xi, 16).reorder(xi, y, xo).vectorize(xi)
}
schedule eight {
    out.tile(x, y, xo, yo, xi, yi, 8, 8).vectorize(xi).unroll(yi)
}
"""

# the block read is u8, widened after the transpose
TRANSPOSED_U8 = """
pipeline tr8
input img: u8[2]
output out: f32[2]
algorithm {
    out(x, y) = f32(img(y, x)) * 0.5f
}
schedule {
    out.tile(x, y, xo, yo, xi, yi, 16, 16).vectorize(xi).unroll(yi)
}
"""

# t is stored with y innermost (reorder_storage), computed along x in the lanes: each
# vector of x's lanes is written down t's storage columns
TRANSPOSED_WRITE = """
pipeline tw
input img: f32[2]
output out: f32[2]
algorithm {
    t(x, y) = img(x, y) + 1.0f
    out(x, y) = t(x, y) * 2.0f
}
schedule {
    t.compute_root().reorder_storage(y, x).split(x, xo, xi, 16).reorder(xi, y, xo).vectorize(xi)
    out.split(y, yo, yi, 16).reorder(yi, x, yo).vectorize(yi)
}
"""


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("schedule", ["unrolled", "serial", "eight"])
@pytest.mark.parametrize("w, h", [(32, 48), (16, 16), (37, 21), (5, 3), (100, 17)])
def test_a_transposed_read_gives_numpys_transpose(target, schedule, w, h):
    """Sizes that are and are not multiples of the block: whole blocks transposed in
    registers, the rest (a serial loop's last h mod 16 rows, a tile's clamped edge) one row
    at a time, every value NumPy's."""
    p = hdsl.loads(TRANSPOSED_READ, "tr.hl")
    img = np.random.RandomState(w * h).uniform(-8, 8, (w, h)).astype(np.float32)   # (rows w, cols h)
    out = p.compile(target, schedule=schedule).realize((w, h), img=img)
    assert np.array_equal(out, img.T * np.float32(2)), (w, h)


@pytest.mark.parametrize("w, h", [(32, 16), (19, 40)])
def test_a_transposed_read_of_another_type_gives_numpys_transpose(w, h):
    p = hdsl.loads(TRANSPOSED_U8, "tr8.hl")
    img = np.random.RandomState(w).randint(0, 256, (w, h)).astype(np.uint8)
    out = p.compile("host").realize((w, h), img=img)
    assert np.array_equal(out, img.T.astype(np.float32) * np.float32(0.5)), (w, h)
    text = _asm(TRANSPOSED_U8, "tr8", None, "x86-64-avx512")
    assert not re.search(r"gather", text)


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("w, h", [(32, 32), (37, 21), (16, 5), (3, 40)])
def test_a_transposed_write_gives_the_same_values(target, w, h):
    p = hdsl.loads(TRANSPOSED_WRITE, "tw.hl")
    img = np.random.RandomState(w + h).uniform(-8, 8, (h, w)).astype(np.float32)
    out = p.compile(target)(img=img)
    assert np.array_equal(out, (img + np.float32(1)) * np.float32(2)), (w, h)


def _asm(src: str, name: str, schedule: str | None, target: str) -> str:
    p = hdsl.loads(src, f"{name}.hl")
    return assembly(str(generate(p.ir, lower(p.ir, schedule, shift_outputs=True).stmt, f"hdsl_{name}")), target)


@pytest.mark.parametrize("target", ["x86-64-avx512", "x86-64-avx2"])
def test_whole_transposed_blocks_have_no_gathers(target):
    """16 rows of 16 lanes, unrolled: the block is 16 dense loads and a shuffle network
    (Halide's 2-D vectorization of a transpose does the same); a gather per row before."""
    text = _asm(TRANSPOSED_READ, "tr", "unrolled", target)
    assert not re.search(r"gather", text), target
    assert re.search(r"vunpck|vperm|vshuf", text), target


def test_transposed_writes_are_dense_stores():
    """t's blocks (and out's, whose lanes run down its rows) are transposed in registers and
    stored as dense vectors: every store of this pipeline was a scatter before."""
    p = hdsl.loads(TRANSPOSED_WRITE, "tw.hl")
    ll = str(generate(p.ir, lower(p.ir, shift_outputs=True).stmt, "hdsl_tw"))
    assert ll.count("store <16 x float>") >= 2 * 16
    assert re.search(r"vunpck|vperm|vshuf", assembly(ll, "x86-64-avx512"))


IIR_X = """
pipeline ix
input img: f32[2]
output out: f32[2]
algorithm {
    rf(x, y) = img(x, y)
    rf.iir(+x, 0..img.width, 0.5f, [0.5f])
    rf.iir(-x, 0..img.width, 0.5f, [0.5f])
    out(x, y) = rf(x, y)
}
schedule {
    rf.compute_root().tile_iir(x, 64)
}
"""


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("w, h", [(128, 32), (130, 37), (64, 16), (17, 5)])
def test_tiled_x_filters_equal_the_evaluator(target, w, h):
    """The x passes of tile_iir (causal then anticausal, a cascade) stage their tiles through
    the transposes: the same values as the reference evaluator, bit for bit (the same
    association of the sums), at sizes that are and are not multiples of 16 and 64."""
    p = hdsl.loads(IIR_X, "ix.hl")
    img = np.random.RandomState(w * h).rand(h, w).astype(np.float32)
    assert np.array_equal(p.compile(target)(img=img), p(img=img)), (w, h)


def test_the_staged_x_pass_transposes_in_registers():
    """Each of the x pass's stagings (rows -> a tile's lanes for intra, final and the
    cascade's copy of final; the tile's lanes -> rows for the result) is a loop over
    transposed blocks (whose code is gather-free: test_whole_transposed_blocks_have_no_gathers);
    gathers and scatters remain on the paths for partial blocks and in other stages."""
    p = hdsl.loads(IIR_X, "ix.hl")
    ll = str(generate(p.ir, lower(p.ir, shift_outputs=True).stmt, "hdsl_ix"))
    blocked = set(re.findall(r'^"?([^":\s]+)\.blocks"?:', ll, re.M))
    for loop in ("rf.intra0.s0.y", "rf.final0.s0.y", "rf.final0.for_last.s0.y", "rf.s0.y.lv"):
        assert loop in blocked, (loop, sorted(blocked))


# Serial scans along x with rows in the lanes (Halide's schedule for an x filter): each update
# reads what the iterations before it stored. A third-order causal filter and a second-order
# anticausal one (its index moves down as the scan goes on), coefficients of mixed sign.
SCAN_X = """
pipeline sx
input img: f32[2]
output out: f32[2]
algorithm {
    rf(x, y) = img(x, y)
    rf.iir(+x, 0..img.width, 0.4f, [0.9f, -0.5f, 0.2f])
    rf.iir(-x, 0..img.width, 0.6f, [0.7f, -0.3f])
    out(x, y) = rf(x, y)
}
schedule {
    rf.compute_root().split(y, yo, yi, 16).reorder(yi, x, yo).vectorize(yi).parallel(yo)
    rf.update(0).split(y, yo, yi, 16).reorder(yi, x, yo).vectorize(yi).parallel(yo)
    rf.update(1).split(y, yo, yi, 16).reorder(yi, x, yo).vectorize(yi).parallel(yo)
}
schedule eight {
    rf.compute_root()
    rf.update(0).split(y, yo, yi, 8).reorder(yi, x, yo).vectorize(yi)
    rf.update(1).split(y, yo, yi, 8).reorder(yi, x, yo).vectorize(yi)
}
"""


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("schedule", [None, "eight"])
@pytest.mark.parametrize("w, h", [(128, 32), (130, 37), (17, 5), (5, 40), (40, 3), (16, 16)])
def test_serial_x_scans_in_transposed_blocks_equal_the_evaluator(target, schedule, w, h):
    """Serial scans along x with 16 (or 8) rows in the lanes run as transposed blocks, each
    iteration reading the values the iterations before it computed in registers (and from
    memory before the block): the evaluator's values bit for bit, at widths that are and are
    not multiples of the block, narrower than one, and at fewer rows than lanes."""
    p = hdsl.loads(SCAN_X, "sx.hl")
    img = np.random.RandomState(w + 7 * h).uniform(-1, 1, (h, w)).astype(np.float32)
    assert np.array_equal(p.compile(target, schedule=schedule)(img=img), p(img=img)), (w, h)


def test_serial_x_scans_are_transposed_blocks_with_dense_stores():
    """Both scans (the causal one upward, the anticausal one downward through memory) are
    loops over transposed blocks that store dense vectors; before, a scan that reads its own
    buffer ran one vector of scattered lanes at a time."""
    p = hdsl.loads(SCAN_X, "sx.hl")
    ll = str(generate(p.ir, lower(p.ir, shift_outputs=True).stmt, "hdsl_sx"))
    blocked = set(re.findall(r'^"?([^":\s]+)\.blocks"?:', ll, re.M))
    for loop in ("rf.s1.rf.iir0.x", "rf.s2.rf.iir1.x"):
        assert loop in blocked, (loop, sorted(blocked))
    text = assembly(ll, "x86-64-avx512")
    assert re.search(r"vunpck|vperm|vshuf", text)
