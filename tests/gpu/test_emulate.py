"""GPU schedules run by the host-emulation device (target cuda-emulate) give exactly the
reference evaluator's values, and copy between host and device only where needed (Halide's
dirty-bit discipline: src/runtime/device_interface.cpp copies a buffer to the device when its
host copy is dirty and back when its device copy is; an all-GPU pipeline copies each input in
once and each output out once)."""
import numpy as np
import pytest

import hdsl
from tests.targets import GPU_TARGET
from tests.gpu.programs import BLUR, with_cuda_schedule

HEAD = BLUR

SCHEDULES = {
    "tile_inline": "out.gpu_tile(x, y, xi, yi, 16, 8)",
    "root_two_kernels": "out.gpu_tile(x, y, xi, yi, 8, 8)\n    bx.compute_root().gpu_tile(x, y, xi, yi, 32, 4)",
    "shared_at_block": "out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, x).gpu_threads(x, y)",
    "local_at_thread": "out.gpu_tile(x, y, xi, yi, 8, 8)\n    bx.compute_at(out, xi)",
    "blocks_threads_split": "out.split(y, yo, yi, 4).split(x, xo, xi, 8).reorder(xi, yi, xo, yo)"
                            ".gpu_blocks(xo, yo).gpu_threads(xi, yi)",
    "one_dim": "out.gpu_tile(x, xi, 32)\n    bx.compute_root().gpu_blocks(y).gpu_threads(x)",
    "serial_inside_threads": "out.split(x, xo, xi, 4).gpu_blocks(y).gpu_threads(xo)",
    "blocks_only": "out.gpu_blocks(y)",
    "single_thread_at_block": "out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, x)",
}


def program(sched: str) -> str:
    return with_cuda_schedule(HEAD, sched)


@pytest.fixture(scope="module")
def image():
    rng = np.random.default_rng(5)
    return rng.integers(0, 65535, size=(29, 45), dtype=np.uint16)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_gpu_schedules_match_the_evaluator(name, image):
    p = hdsl.loads(program(SCHEDULES[name]))
    ref = p(img=image)
    c = p.compile(GPU_TARGET)
    assert c.native.device.counts["launch"] == 0
    out = c(img=image)
    assert np.array_equal(out, ref)
    assert c.native.device.counts["launch"] >= 1        # (it ran as kernels, not as host loops)


def test_an_all_gpu_pipeline_copies_each_input_in_and_each_output_out_once(image):
    p = hdsl.loads(program(SCHEDULES["root_two_kernels"]))
    c = p.compile(GPU_TARGET)
    np.testing.assert_array_equal(c(img=image), p(img=image))
    d = c.native.device
    assert d.counts["launch"] == 2
    assert d.counts["to_device"] == 1 and d.counts["to_host"] == 1
    assert [name for name, *_ in d.launches] == ["kernel_bx_0", "kernel_out_1"]
    # grid and block sizes: bx's tiles of 32x4 cover the 45x29 output plus a row above and below
    (_, g0, t0, s0), (_, g1, t1, s1) = d.launches
    assert g0 == (2, 8, 1) and t0 == (32, 4, 1) and s0 == 0
    assert g1 == (6, 4, 1) and t1 == (8, 8, 1) and s1 == 0
    # a second call: the counts add up, the launches are that call's (not a list growing per call)
    c(img=image)
    assert d.counts["launch"] == 4 and [name for name, *_ in d.launches] == ["kernel_bx_0", "kernel_out_1"]


MIXED = HEAD.replace("out(x, y) =", "mid(x, y) = bx(x, y) + 1\n    out(x, y) =").replace(
    "(bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) / 3", "(mid(x, y - 1) + mid(x, y) + mid(x, y + 1)) / 3") + """
schedule cuda {
    bx.compute_root().gpu_tile(x, y, xi, yi, 16, 4)
    mid.compute_root().parallel(y)
    out.gpu_tile(x, y, xi, yi, 16, 4)
}
"""


def test_a_mixed_pipeline_copies_where_host_and_device_meet(image):
    """bx on the GPU, mid on the CPU, out on the GPU: img in; bx back for the host's mid;
    mid (written on the host) in; out back: two copies each way."""
    p = hdsl.loads(MIXED)
    c = p.compile(GPU_TARGET)
    np.testing.assert_array_equal(c(img=image), p(img=image))
    d = c.native.device
    assert d.counts["launch"] == 2
    assert d.counts["to_device"] == 2 and d.counts["to_host"] == 2


def test_counts_are_per_call_and_memory_is_released(image):
    p = hdsl.loads(program(SCHEDULES["shared_at_block"]))
    c = p.compile(GPU_TARGET)
    c(img=image)
    c(img=image[:17, :20])
    d = c.native.device
    assert d.counts["to_device"] == 2 and d.counts["to_host"] == 2 and d.counts["launch"] == 2
    if GPU_TARGET == "cuda-emulate":
        assert d.memory == {}             # (the emulated device memory, released after each call)
    # the shared-memory tile of bx: 16 x (8 + 2) u16 per block
    assert d.launches[0][2] == (16, 10, 1) and d.launches[0][3] == 16 * 10 * 2


def test_a_gpu_schedule_runs_from_the_compile_cache(image, tmp_path, monkeypatch):
    monkeypatch.setenv("HDSL_CACHE_DIR", str(tmp_path))
    src = tmp_path / "g.hl"
    src.write_text(program(SCHEDULES["shared_at_block"]))
    first = hdsl.load(src).compile(GPU_TARGET)
    second = hdsl.load(src).compile(GPU_TARGET)
    assert second.native.timings["cached"]
    np.testing.assert_array_equal(second(img=image), first(img=image))
    assert second.native.device.counts["launch"] == 1


def test_calls_from_several_threads_each_get_their_own_device_state(image):
    """Two threads calling one compiled GPU pipeline: each call's device memory lives until
    that call ends (a call's release must not free another's buffers mid-run)."""
    from concurrent.futures import ThreadPoolExecutor
    p = hdsl.loads(program(SCHEDULES["root_two_kernels"]))
    c = p.compile(GPU_TARGET)
    ref = p(img=image)
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda _: c(img=image), range(16)))
    assert all(np.array_equal(o, ref) for o in outs)
    assert c.native.device.counts["launch"] == 32 and c.native.device.counts["to_host"] == 16


def test_emulated_device_memory_ends_at_an_unreadable_page():
    """cuda-emulate's device buffers end where a GPU's would fault: a kernel reading or writing
    past a buffer's end stops the process (SIGSEGV) instead of reading a neighbour's bytes, as
    the illegal address it would be on a GPU. The last byte of the (4-byte rounded) buffer is
    readable."""
    import subprocess
    import sys
    code = ("import ctypes; from hdsl.runtime.device import HostEmulatedDevice as D; d = D(); h = d.malloc(10); "
            "ctypes.memset(h, 7, 12); print(ctypes.c_char.from_address(h + 11).value, flush=True); "
            "ctypes.c_char.from_address(h + 12).value")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "b'\\x07'"
    assert r.returncode == -11          # SIGSEGV at the first byte past it
