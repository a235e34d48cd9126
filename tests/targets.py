"""The targets the tests compile for, from the environment (architecture.md item 10):

- HDSL_TEST_TARGET (default "host"): what the compiler corpus and the schedule fuzzer's
  CPU schedules compile for; `HDSL_TEST_TARGET=cuda-emulate make test` runs them through
  the GPU host path (every CPU schedule is valid on a GPU target), `x86-64-avx2` on another
  CPU variant.
- GPU_TARGET: what GPU schedules compile for: HDSL_TEST_TARGET when it is a GPU target
  (`cuda` on a machine with a GPU and the cuda extra), else cuda-emulate (CI: no GPU).

`requires(target)` skips a test where the target cannot run here (a cuda target without a
driver), with the reason the device gives.
"""
from __future__ import annotations

import os

import pytest

from hdsl.target import parse_target

TARGET = os.environ.get("HDSL_TEST_TARGET", "host")
GPU_TARGET = TARGET if parse_target(TARGET).is_gpu else "cuda-emulate"


def unavailable(target: str) -> str | None:
    """Why `target` cannot run on this machine (None: it can)."""
    t = parse_target(target)
    if not t.is_gpu or t.device == "host_emulate":
        return None
    from hdsl.diagnostics import HdslError
    from hdsl.runtime.device import device_for
    try:
        device_for(t.device)
    except HdslError as e:
        return str(e).splitlines()[0]
    return None


def requires(target: str):
    reason = unavailable(target)
    return pytest.mark.skipif(reason is not None, reason=f"target {target}: {reason}")
