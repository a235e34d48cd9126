"""Random GPU schedules of the compiler corpus (the fuzzer's generator, schedule_gen's
gpu_valid) compiled to PTX as `--target cuda` does and assembled by ptxas (for sm_75, sm_80
and sm_90): one derandomized schedule per corpus pipeline. Their values are compared with
the evaluator under cuda-emulate by test_compiler_fuzz.py; here the device code of the same
kind of kernels must compile (the first run found kernels that stopped LLVM: per-thread
arrays of run-time size, tests/cuda/test_ptx.py)."""
from __future__ import annotations

import pytest

from compiler_corpus import CORPUS, load
from hdsl.diagnostics import HdslError
from hdsl.lower.gpu import kernels_of
from hdsl.lower.lower import lower
from hdsl.runtime.cuda import device_code
from hdsl.target import parse_target
from schedule_gen import RandomChooser, generate
from test_compiler_fuzz import bound_box, output_sizes, pipeline_info
from tests.cuda.ptxas_check import assembled


def lowered_gpu_schedule(name: str, target):
    """The first of a few derandomized GPU schedules that hdsl lowers for `target` (some
    schedules are rightly refused: a bound() on an intermediate can make a block of more
    than 1024 threads), and its text."""
    spec = CORPUS[name]
    refused = []
    for k in range(5):
        g = generate(pipeline_info(name), RandomChooser(f"ptx-{name}-{k}"), output_sizes=output_sizes(spec, 16, 16),
                     bound_box=bound_box(spec, 16, 16), gpu_valid=True, gpu_wide=True)
        block = g.block("fuzz")
        try:
            return lower(load(spec, block).ir, "fuzz", target), block
        except HdslError as e:
            refused.append(str(e).splitlines()[0])
    raise AssertionError(f"every GPU schedule of {name} refused: {refused}")


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_random_gpu_schedule_assembles(name):
    target = parse_target("cuda")
    low, block = lowered_gpu_schedule(name, target)
    launches = kernels_of(low.stmt)
    ptx = assembled(device_code(low.stmt, target).ptx)
    assert ptx.count(".entry ") == len(launches), block
