"""GPU schedules with each block's threads run last to first (hdsl/runtime/device.py's
THREAD_ORDER = "reversed", under cuda-emulate). A GPU runs a block's threads in no set order,
and cuda-emulate runs them one after another, first to last. A kernel whose values depend on
that order has a race in shared memory, such as a missing barrier: it can agree with the
evaluator in one order and not the other. So the examples' CUDA schedules and the fuzzer's
derandomized GPU schedules run here in the reversed order too."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import hdsl
from hdsl.runtime import device as device_rt
from hdsl.runtime.images import load_image
from tests.examples.test_examples import EX, EXAMPLES, IMAGES
from tests.gpu.programs import BLUR, with_cuda_schedule
from tests.targets import GPU_TARGET

pytestmark = pytest.mark.skipif(GPU_TARGET != "cuda-emulate", reason="the thread order is cuda-emulate's")


@contextlib.contextmanager
def reversed_threads():
    old, device_rt.THREAD_ORDER = device_rt.THREAD_ORDER, "reversed"
    try:
        yield
    finally:
        device_rt.THREAD_ORDER = old


PRINTING = BLUR.replace("out(x, y) = (bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) / 3",
                        "out(x, y) = print(bx(x, y), \"at\", x)")


def test_the_reversed_order_runs_a_blocks_threads_last_to_first(capfd):
    """One block of 4 threads along x printing their x: 0 1 2 3 first to last, 3 2 1 0
    reversed (and the cache does not hand the reversed run the forward code)."""
    p = hdsl.loads(with_cuda_schedule(PRINTING, "out.gpu_tile(x, y, xi, yi, 4, 1)"))
    img = np.arange(4, dtype=np.uint16).reshape(1, 4) * 3

    def xs():
        p.compile(GPU_TARGET)(img=img)
        return [int(line.split()[-1]) for line in capfd.readouterr().out.splitlines() if " at " in line]
    assert xs() == [0, 1, 2, 3]
    with reversed_threads():
        assert xs() == [3, 2, 1, 0]
    assert xs() == [0, 1, 2, 3]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_cuda_schedules_reversed(name):
    inp, image, params = EXAMPLES[name]
    p = hdsl.loads((EX / f"{name}.hl").read_text(), str(EX / f"{name}.hl"))
    img = load_image(IMAGES / image)[:32, :40]
    kw = {k: float(v) for k, v in params.items()}
    with reversed_threads():
        got = p.compile(GPU_TARGET)(**{inp: img}, **kw)
    assert np.array_equal(got, p(**{inp: img}, **kw))


def test_bilateral_grid_cuda_schedule_reversed():
    """Its histogram is computed per block in shared memory by the block's threads."""
    from tests.examples.test_bilateral_grid import _image
    img = _image(24, 40)
    p = hdsl.load(EX / "bilateral_grid.hl")
    with reversed_threads():
        got = p.compile(GPU_TARGET)(img=img, r_sigma=0.1)
    assert np.array_equal(got, p(img=img, r_sigma=0.1))
