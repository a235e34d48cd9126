"""A let of the vectorized loop divided by 2 in its body (`x / 2`, `(x + 1) / 2`:
upsampling) generated once per parity of its first lane (CodeGenLLVM.let_residue_split,
off by default: CodeGenLLVM.LET_RESIDUES, docs/compiler.md says why), so that x / 2 and
(x + 1) / 2 of an even x read one shared vector. Values: NumPy's (exact: small integers and
halves in f32) and the evaluator's, for output regions starting at even and odd x (the
first lane's parity) and widths with a guarded tail, with the switch on; the IR check
fails without the split."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.codegen.llvm import CodeGenLLVM

UP = """
pipeline upx
input img: f32[2]
output out: f32[2]
algorithm {
    var x, y
    f(x, y) = img(x, y) * 2.0f + 1.0f
    out(x, y) = (f(x / 2, y) + f((x + 1) / 2, y)) * 0.5f
}
schedule {
    out.vectorize(x, 8)
}
"""


@pytest.fixture
def residues(monkeypatch):
    monkeypatch.setattr(CodeGenLLVM, "LET_RESIDUES", True)


def program():
    return hdsl.loads(UP, "upx.hl")


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("x0, w", [(0, 32), (1, 32), (3, 13), (2, 8)])
def test_split_by_parity_gives_numpys_and_the_evaluators_values(residues, target, x0, w):
    h = 3
    img = np.random.RandomState(x0 + w).randint(0, 50, (h, (x0 + w) // 2 + 2)).astype(np.float32)
    f = img.astype(np.float64) * 2 + 1
    xs = np.arange(x0, x0 + w)
    want = ((f[:, xs // 2] + f[:, (xs + 1) // 2]) * 0.5).astype(np.float32)
    p = program()
    got = p.compile(target, use_cache=False).realize((w, h), min=(x0, 0), img=img)
    assert np.array_equal(got, want)
    assert np.array_equal(got, p.realize((w, h), min=(x0, 0), img=img))


def test_the_vector_body_is_split_by_parity(residues, monkeypatch):
    """With the switch on, the vector body sits in a switch on its first lane's parity
    (blocks residue0 and residue1); off, it does not."""
    ll = compiled_form(program().ir, "llvm", target="x86-64-avx2")
    assert "residue0" in ll and "residue1" in ll
    monkeypatch.setattr(CodeGenLLVM, "LET_RESIDUES", False)
    assert "residue1" not in compiled_form(program().ir, "llvm", target="x86-64-avx2")
