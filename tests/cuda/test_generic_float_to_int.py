"""The base code generator's f32 → i32 conversion (hdsl/codegen/llvm.py: float_to_i32), which
the CUDA back end uses (PTX's cvt.rzi saturates and gives 0 for NaN; the evaluator gives
INT_MIN), checked where it can run: on the CPU, with the x86 conversion swapped out for it.
Every special value of tests/compiler/test_casts.py against the evaluator."""
from __future__ import annotations

import pytest

from hdsl.codegen.cpu import CodeGenCPU
from hdsl.codegen.llvm import CodeGenLLVM
from tests.compiler.test_casts import INT_TYPES, _native_against_evaluator


@pytest.mark.parametrize("dst", INT_TYPES)
@pytest.mark.parametrize("lanes", [0, 8])
def test_generic_float_to_i32_matches_the_evaluator(monkeypatch, dst, lanes):
    calls = []
    generic = CodeGenLLVM.float_to_i32

    def counted(self, st, v):
        calls.append(v.type)
        return generic(self, st, v)
    monkeypatch.setattr(CodeGenCPU, "float_to_i32", counted)
    vals, expected = _native_against_evaluator("f32", dst, lanes)
    # (u32, u64 and i64 take the wide path, not this hook)
    assert bool(calls) == (dst not in ("u32", "u64", "i64"))
