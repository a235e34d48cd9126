"""hdsl/runtime/cuda.py's CudaDevice against a stand-in for pycuda.driver that follows pycuda's
API (init, Device.count / retain_primary_context, Context.get_current / push / pop /
synchronize, mem_alloc, memcpy_htod / memcpy_dtoh, module_from_buffer, Function calls with
grid, block and shared): the glue between the device table and pycuda, which no test can run
for real without an NVIDIA GPU. The stand-in's device memory is host memory, so copies are
checked by their bytes; kernels are recorded, not run. Its contexts follow pycuda's: each
thread has its own context stack, and a thread that ends with a context left on it aborts the
process (pycuda's context_stack; seen on an H200 when calls from worker threads left the
context pushed), so `in_thread` fails where that would happen."""
from __future__ import annotations

import ctypes
import sys
import threading
import types

import numpy as np
import pytest

from hdsl.diagnostics import HdslError
from hdsl.runtime import cuda as cuda_rt


class FakeDriver:
    def __init__(self):
        self.calls: list = []
        self.local = threading.local()          # each thread's context stack
        self.fail_launch = False
        self.launch_error = "cuLaunchKernel failed: too many resources requested for launch"
        drv = self

        class Error(Exception):
            pass

        class Alloc:
            def __init__(self, n):
                self.buf = (ctypes.c_char * n)()
                self.freed = False

            def __int__(self):
                return ctypes.addressof(self.buf)

            def free(self):
                self.freed = True
                drv.calls.append(("free", int(self)))

        class Ctx:
            def push(self):
                drv.calls.append("push")
                drv.stack().append(self)

            @staticmethod
            def get_current():
                return drv.stack()[-1] if drv.stack() else None

            @staticmethod
            def synchronize():
                drv.calls.append("synchronize")

            @staticmethod
            def pop():
                if not drv.stack():
                    raise Error("cuCtxPopCurrent failed: invalid device context")
                drv.calls.append("pop")
                drv.stack().pop()

        class Device:
            @staticmethod
            def count():
                return 1

            def __init__(self, ordinal):
                assert ordinal == 0

            def retain_primary_context(self):
                drv.calls.append("retain_primary_context")
                return Ctx()

        class Module:
            def __init__(self, data):
                self.data = data

            def get_function(self, name):
                def fn(*args, grid, block, shared):
                    assert Ctx.get_current() is not None, "launch without a current context"
                    drv.calls.append(("launch", name, args, grid, block, shared))
                    if drv.fail_launch:
                        raise Error(drv.launch_error)

                def set_attribute(attr, value):
                    drv.calls.append(("set_attribute", name, attr, value))
                fn.set_attribute = set_attribute
                return fn

        self.Error, self.Device, self.Context = Error, Device, Ctx
        # (pycuda's enum, src/wrapper/wrap_cudadrv.cpp: function_attribute)
        self.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="MAX_DYNAMIC_SHARED_SIZE_BYTES")

        def mem_alloc(n):
            assert Ctx.get_current() is not None, "mem_alloc without a current context"
            drv.calls.append(("mem_alloc", n))
            return Alloc(n)

        def memcpy_htod(dst, src):
            mv = memoryview(src).cast("B")
            ctypes.memmove(dst, bytes(mv), len(mv))
            drv.calls.append(("htod", dst, len(mv)))

        def memcpy_dtoh(dst, src):
            mv = memoryview(dst).cast("B")
            ctypes.memmove((ctypes.c_char * len(mv)).from_buffer(mv), src, len(mv))
            drv.calls.append(("dtoh", src, len(mv)))

        def module_from_buffer(data):
            drv.calls.append(("module_from_buffer", data))
            return Module(data)

        self.init = lambda: drv.calls.append("init")
        self.stack = lambda: drv.local.__dict__.setdefault("stack", [])
        self.mem_alloc, self.memcpy_htod, self.memcpy_dtoh = mem_alloc, memcpy_htod, memcpy_dtoh
        self.module_from_buffer = module_from_buffer


@pytest.fixture
def driver(monkeypatch):
    drv = FakeDriver()
    pkg = types.ModuleType("pycuda")
    pkg.driver = drv
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    monkeypatch.setattr(cuda_rt, "_context", None)
    monkeypatch.setattr(cuda_rt, "_modules", {})
    monkeypatch.setattr(cuda_rt, "_opted_in", {})
    monkeypatch.setattr(cuda_rt, "_broken", None)
    monkeypatch.setattr(cuda_rt, "_state_lock", threading.Lock())     # (one a deadlocked test holds stays there)
    return drv


CODE = cuda_rt.DeviceCode(".version 7.3\n.target sm_75\n", {
    "k": {"params": [8, 4, 4], "dynamic_shared": None},
    "kdyn": {"params": [8], "dynamic_shared": 32},
    "kbig": {"params": [8], "dynamic_shared": 16, "static_shared": 0}})


def in_thread(fn, timeout=10.0):
    """fn() on another thread (as a pipeline may be called); fails instead of hanging."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:          # (re-raised below, on the test's thread)
            out["error"] = e
        drv = sys.modules["pycuda.driver"]
        out["left"] = len(drv.stack()) if isinstance(drv, FakeDriver) else 0
    t = threading.Thread(target=run, daemon=True)      # (a deadlocked one must not keep the process)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "deadlocked"
    if "error" in out:
        raise out["error"]
    assert out["left"] == 0, "the thread ended with a context on its stack: pycuda aborts the process"
    return out.get("value")


def call(dev, *steps):
    """One call as generated host code makes it: use, the steps, release."""
    dev.use(CODE)
    try:
        return [step() for step in steps]
    finally:
        dev.release()


def test_one_primary_context_per_process_current_for_each_call_in_its_thread(driver):
    dev = cuda_rt.CudaDevice()
    cuda_rt.CudaDevice()
    assert driver.calls.count("init") == 1 and driver.calls.count("retain_primary_context") == 1
    assert driver.Context.get_current() is None         # made, not pushed
    in_thread(lambda: call(dev, lambda: dev.malloc(8)))
    in_thread(lambda: call(dev, lambda: dev.malloc(8)))
    assert driver.calls.count("push") == 2 and driver.calls.count("pop") == 2
    call(dev)
    assert driver.Context.get_current() is None         # (the test's own thread too)


def test_calls_from_several_threads_at_once_each_push_and_pop(driver):
    devs = [cuda_rt.CudaDevice() for _ in range(4)]
    threads = [threading.Thread(target=in_thread, args=(lambda d=d: call(d, lambda: d.malloc(16)),))
               for d in devs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert driver.calls.count("push") == 4 and driver.calls.count("pop") == 4


def test_a_failing_call_still_pops_its_context(driver):
    dev = cuda_rt.CudaDevice()
    driver.fail_launch = True

    def failing():
        with pytest.raises(RuntimeError, match="kernel k failed"):
            call(dev, lambda: dev.launch("k", None, (1, 1, 1), (1, 1, 1), 0, [0, 0, 0]))
    in_thread(failing)
    assert driver.calls.count("pop") == 1


def test_the_module_is_loaded_once_per_ptx_nul_ended(driver):
    dev = cuda_rt.CudaDevice()
    in_thread(lambda: call(dev))
    in_thread(lambda: call(cuda_rt.CudaDevice()))
    loads = [c for c in driver.calls if c[0] == "module_from_buffer"]
    assert loads == [("module_from_buffer", CODE.ptx.encode() + b"\0")]


def test_copies_round_trip_through_device_memory(driver):
    dev = cuda_rt.CudaDevice()
    host = np.arange(6, dtype=np.float32)
    back = np.zeros_like(host)
    dev.use(CODE)
    h = dev.malloc(host.nbytes)
    dev.copy_to_device(h, host.ctypes.data, host.nbytes)
    dev.copy_to_host(back.ctypes.data, h, host.nbytes)
    dev.release()
    assert back.tolist() == host.tolist()
    assert ("free", h) in driver.calls and not dev.allocations


def test_launch_packs_arguments_and_synchronizes(driver):
    dev = cuda_rt.CudaDevice()
    dev.use(CODE)
    f = int(np.array([2.5], "<f4").view("<u4")[0])
    dev.launch("k", None, (4, 2, 1), (32, 8, 1), 512, [0xDEAD0000, 0xFFFFFFFF, f])
    name, args, grid, block, shared = [c for c in driver.calls if c[0] == "launch"][0][1:]
    assert name == "k" and grid == (4, 2, 1) and block == (32, 8, 1)
    assert shared == 0                          # static shared memory only: no dynamic bytes
    assert [a.dtype.itemsize for a in args] == [8, 4, 4]
    assert int(args[0]) == 0xDEAD0000 and np.array(args[1]).view("<i4") == -1
    assert np.array(args[2]).view("<f4") == np.float32(2.5)
    assert driver.calls[-1] == "synchronize"
    dev.launch("kdyn", None, (1, 1, 1), (1, 1, 1), 100, [0])
    assert [c for c in driver.calls if c[0] == "launch"][1][5] == 132      # shared_bytes + rounding slack
    dev.release()


def test_a_failing_launch_names_its_kernel(driver):
    dev = cuda_rt.CudaDevice()
    dev.use(CODE)
    driver.fail_launch = True
    with pytest.raises(RuntimeError, match="kernel k failed: cuLaunchKernel failed"):
        dev.launch("k", None, (1, 1, 1), (1, 1, 1), 0, [0, 0, 0])
    with pytest.raises(RuntimeError, match="kernel nope is not in the loaded module"):
        dev.launch("nope", None, (1, 1, 1), (1, 1, 1), 0, [])
    dev.release()


def test_over_48_kb_of_shared_memory_opts_in_once_per_kernel(driver):
    # CUDA kernels may declare 48 KB statically; more must be dynamic and opted in to with
    # cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) (NVIDIA's Turing/Ampere/Hopper tuning
    # guides): pycuda's Function.set_attribute, before the launch, not again for no more
    dev = cuda_rt.CudaDevice()
    dev.use(CODE)
    dev.launch("kdyn", None, (1, 1, 1), (1, 1, 1), 40000, [0])
    assert not [c for c in driver.calls if c[0] == "set_attribute"]         # within 48 KB
    dev.launch("kbig", None, (1, 1, 1), (1, 1, 1), 70000, [0])
    dev.launch("kbig", None, (1, 1, 1), (1, 1, 1), 60000, [0])
    sets = [c for c in driver.calls if c[0] == "set_attribute"]
    assert sets == [("set_attribute", "kbig", "MAX_DYNAMIC_SHARED_SIZE_BYTES", 70016)]
    launch = [c for c in driver.calls if c[0] == "launch" and c[1] == "kbig"][0]
    assert driver.calls.index(sets[0]) < driver.calls.index(launch) and launch[5] == 70016


def test_after_a_faulting_kernel_later_calls_name_it(driver):
    """A kernel that faults leaves CUDA's context unusable until the process ends (seen on an
    H200: every later call then failed at its first cuMemAlloc, 'an illegal memory access was
    encountered'); later calls say which kernel broke it. A failure that CUDA does not keep
    (too many resources for one launch) leaves later calls alone."""
    dev = cuda_rt.CudaDevice()
    driver.fail_launch = True
    with pytest.raises(RuntimeError, match="too many resources"):
        call(dev, lambda: dev.launch("k", None, (1, 1, 1), (1, 1, 1), 0, [0, 0, 0]))
    call(dev)
    driver.launch_error = "cuCtxSynchronize failed: an illegal memory access was encountered"
    with pytest.raises(RuntimeError, match="kernel k failed: cuCtxSynchronize failed"):
        call(dev, lambda: dev.launch("k", None, (1, 1, 1), (1, 1, 1), 0, [0, 0, 0]))
    with pytest.raises(HdslError) as e:
        call(dev)
    assert ("unusable since kernel k failed (cuCtxSynchronize failed: an illegal memory access was "
            "encountered)") in str(e.value)
    assert driver.Context.get_current() is None         # (the failed call popped its context)
