"""`store_nontemporal()`: a Func's dense vector stores are streaming stores (x86 movntps,
past the caches) where their address is aligned to the vector's size, ordinary stores
elsewhere, with an sfence at the end of every task and of the pipeline.

Oracles: NumPy (`img * 2 + 1` and `img.T * 2 + 1` in f32, the same IEEE operations), the
reference evaluator, and the assembly (no streaming store without the directive)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.codegen.cpu import generate
from hdsl.lower.lower import lower
from hdsl.runtime.jit import assembly

STREAMED = """
pipeline streamed
input img: f32[2]
output out: f32[2]
output tr: f32[2]
algorithm {
    out(x, y) = img(x, y) * 2.0f + 1.0f
    tr(x, y) = img(y, x) * 2.0f + 1.0f
}
schedule {
    out.split(y, yo, yi, 8).vectorize(x, 16).parallel(yo)
    out.store_nontemporal()
    tr.split(y, yo, yi, 16).reorder(yi, x, yo).vectorize(yi).parallel(yo)
    tr.store_nontemporal()
}
schedule plain {
    out.split(y, yo, yi, 8).vectorize(x, 16).parallel(yo)
    tr.split(y, yo, yi, 16).reorder(yi, x, yo).vectorize(yi).parallel(yo)
}
"""


def _outputs(shape, misalign: int):
    """An (h, w) f32 array whose first element is `misalign` elements past a 64-byte line."""
    raw = np.empty(shape[0] * shape[1] + 32, np.float32)
    off = (-raw.ctypes.data % 64) // 4 + misalign
    return raw[off:off + shape[0] * shape[1]].reshape(shape)


@pytest.mark.parametrize("shape", [(64, 256), (23, 37), (1, 1), (40, 40)])
@pytest.mark.parametrize("misalign", [0, 4, 1])
def test_streamed_values_equal_numpy(shape, misalign):
    """Aligned rows (w a multiple of 16: every vector streamed), rows whose vectors are
    aligned only now and then (w = 37, 40), and outputs starting 16 or 4 bytes into a line
    (none or few streamed): the values are NumPy's in every case. `tr` is stored through
    the transposed 16 x 16 blocks of codegen/transpose.py (its lanes run down a column)."""
    rng = np.random.default_rng(7)
    img = rng.uniform(-4, 4, shape).astype(np.float32)
    c = hdsl.loads(STREAMED, "streamed.hl").compile("host")
    out = _outputs(shape, misalign)
    tr = _outputs(shape[::-1], misalign)
    c.realize_into([out, tr], img=img)
    np.testing.assert_array_equal(out, img * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(tr, img.T * np.float32(2) + np.float32(1))


def test_evaluator_accepts_and_ignores_it():
    img = np.random.default_rng(1).uniform(-1, 1, (20, 20)).astype(np.float32)
    p = hdsl.loads(STREAMED, "streamed.hl")
    got = p.compile("interp")(img=img)
    np.testing.assert_array_equal(got[0], img * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(got[1], img.T * np.float32(2) + np.float32(1))


def _asm(schedule, target):
    p = hdsl.loads(STREAMED, "streamed.hl")
    low = lower(p.ir, schedule, shift_outputs=True)
    return assembly(str(generate(p.ir, low.stmt, "hdsl_streamed", nontemporal=low.nontemporal)), target)


@pytest.mark.parametrize("target,reg", [("x86-64-avx512", "zmm"), ("x86-64-avx2", "ymm")])
def test_streaming_stores_only_with_the_directive(target, reg):
    """With the directive: streaming stores of whole vectors, an ordinary store where the
    address is not aligned, and sfence; without it, none of either."""
    text = _asm(None, target)
    assert re.search(rf"vmovntps\s+%{reg}", text), target
    assert "sfence" in text
    plain = _asm("plain", target)
    assert "movnt" not in plain and "sfence" not in plain
