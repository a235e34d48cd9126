"""Every example's `schedule cuda` compiled to PTX as `--target cuda` does and assembled by ptxas
for sm_75, sm_80 and sm_90 (its values are checked under cuda-emulate against the evaluator by
tests/gpu). Strict floating point holds in the PTX: no flush to zero, no approximate division
or square root, and no fma except inside libdevice's own functions."""
from __future__ import annotations

from pathlib import Path

import pytest

import hdsl
from hdsl.codegen.ptx import kernels_llvm
from hdsl.lower.gpu import kernels_of
from hdsl.lower.lower import lower
from hdsl.runtime.cuda import device_code
from hdsl.target import parse_target
from tests.cuda.ptxas_check import assembled

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CUDA_EXAMPLES = sorted(p.name for p in EXAMPLES.glob("*.hl") if "schedule cuda" in p.read_text())


def test_the_examples_have_cuda_schedules():
    assert {"blur.hl", "unsharp.hl", "harris.hl", "hist_equalize.hl"} <= set(CUDA_EXAMPLES)


@pytest.mark.parametrize("name", CUDA_EXAMPLES)
def test_example_cuda_schedule_assembles(name):
    target = parse_target("cuda")
    p = hdsl.load(EXAMPLES / name)
    low = lower(p.ir, None, target)
    kernels = [k.kernel for k in kernels_of(low.stmt)]
    ptx = assembled(device_code(low.stmt, target).ptx)
    assert ptx.count(".entry ") == len(kernels) > 0
    assert ".ftz" not in ptx and "approx" not in ptx and "div.full" not in ptx
    if "__nv_" not in str(kernels_llvm(kernels)):
        assert "fma" not in ptx            # (libdevice's functions use fma themselves)
