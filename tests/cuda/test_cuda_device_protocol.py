"""hdsl/runtime/cuda.py's CudaDevice against a stand-in for pycuda.driver that follows pycuda's
API (init, Device.count / retain_primary_context, Context.get_current / push / pop /
synchronize, mem_alloc, memcpy_htod / memcpy_dtoh, module_from_buffer, Function calls with
grid, block and shared): the glue between the device table and pycuda, which no test can run
for real without an NVIDIA GPU. The stand-in's device memory is host memory, so copies are
checked by their bytes; kernels are recorded, not run."""
from __future__ import annotations

import ctypes
import sys
import threading
import types

import numpy as np
import pytest

from hdsl.runtime import cuda as cuda_rt


class FakeDriver:
    def __init__(self):
        self.calls: list = []
        self.current = None
        self.fail_launch = False
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
                drv.current = self

            @staticmethod
            def get_current():
                return drv.current

            @staticmethod
            def synchronize():
                drv.calls.append("synchronize")

            @staticmethod
            def pop():
                drv.current = None

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
                    assert drv.current is not None, "launch without a current context"
                    drv.calls.append(("launch", name, args, grid, block, shared))
                    if drv.fail_launch:
                        raise Error("cuLaunchKernel failed: too many resources requested for launch")

                def set_attribute(attr, value):
                    drv.calls.append(("set_attribute", name, attr, value))
                fn.set_attribute = set_attribute
                return fn

        self.Error, self.Device, self.Context = Error, Device, Ctx
        # (pycuda's enum, src/wrapper/wrap_cudadrv.cpp: function_attribute)
        self.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="MAX_DYNAMIC_SHARED_SIZE_BYTES")

        def mem_alloc(n):
            assert drv.current is not None
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
    monkeypatch.setattr(cuda_rt, "_state_lock", threading.Lock())     # (one a deadlocked test holds stays there)
    monkeypatch.setattr(cuda_rt.atexit, "register", lambda *a: None)
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
    t = threading.Thread(target=run, daemon=True)      # (a deadlocked one must not keep the process)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "deadlocked"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_one_primary_context_per_process_made_current_in_each_thread(driver):
    dev = cuda_rt.CudaDevice()
    cuda_rt.CudaDevice()
    assert driver.calls.count("init") == 1 and driver.calls.count("retain_primary_context") == 1
    driver.current = None                       # another thread: no context current there yet
    in_thread(lambda: dev.use(CODE))
    assert driver.calls.count("push") == 2


def test_the_module_is_loaded_once_per_ptx_nul_ended(driver):
    dev = cuda_rt.CudaDevice()
    in_thread(lambda: dev.use(CODE))
    in_thread(lambda: cuda_rt.CudaDevice().use(CODE))
    loads = [c for c in driver.calls if c[0] == "module_from_buffer"]
    assert loads == [("module_from_buffer", CODE.ptx.encode() + b"\0")]


def test_copies_round_trip_through_device_memory(driver):
    dev = cuda_rt.CudaDevice()
    host = np.arange(6, dtype=np.float32)
    h = dev.malloc(host.nbytes)
    dev.copy_to_device(h, host.ctypes.data, host.nbytes)
    back = np.zeros_like(host)
    dev.copy_to_host(back.ctypes.data, h, host.nbytes)
    assert back.tolist() == host.tolist()
    dev.release()
    assert ("free", h) in driver.calls and not dev.allocations


def test_launch_packs_arguments_and_synchronizes(driver):
    dev = cuda_rt.CudaDevice()
    in_thread(lambda: dev.use(CODE))
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


def test_a_failing_launch_names_its_kernel(driver):
    dev = cuda_rt.CudaDevice()
    in_thread(lambda: dev.use(CODE))
    driver.fail_launch = True
    with pytest.raises(RuntimeError, match="kernel k failed: cuLaunchKernel failed"):
        dev.launch("k", None, (1, 1, 1), (1, 1, 1), 0, [0, 0, 0])
    with pytest.raises(RuntimeError, match="kernel nope is not in the loaded module"):
        dev.launch("nope", None, (1, 1, 1), (1, 1, 1), 0, [])


def test_over_48_kb_of_shared_memory_opts_in_once_per_kernel(driver):
    # CUDA kernels may declare 48 KB statically; more must be dynamic and opted in to with
    # cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) (NVIDIA's Turing/Ampere/Hopper tuning
    # guides): pycuda's Function.set_attribute, before the launch, not again for no more
    dev = cuda_rt.CudaDevice()
    in_thread(lambda: dev.use(CODE))
    dev.launch("kdyn", None, (1, 1, 1), (1, 1, 1), 40000, [0])
    assert not [c for c in driver.calls if c[0] == "set_attribute"]         # within 48 KB
    dev.launch("kbig", None, (1, 1, 1), (1, 1, 1), 70000, [0])
    dev.launch("kbig", None, (1, 1, 1), (1, 1, 1), 60000, [0])
    sets = [c for c in driver.calls if c[0] == "set_attribute"]
    assert sets == [("set_attribute", "kbig", "MAX_DYNAMIC_SHARED_SIZE_BYTES", 70016)]
    launch = [c for c in driver.calls if c[0] == "launch" and c[1] == "kbig"][0]
    assert driver.calls.index(sets[0]) < driver.calls.index(launch) and launch[5] == 70016
