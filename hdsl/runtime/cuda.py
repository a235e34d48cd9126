"""The "cuda" device (hdsl/runtime/device.py's table) with pycuda, and the device code a
CUDA pipeline loads.

CI has no NVIDIA GPU, so CI never runs the pycuda calls below (`_driver`, `CudaDevice`'s
entry points); what it checks is everything around them: the PTX (hdsl/codegen/ptx.py,
assembled by ptxas), the argument packing (`pack_args`), the device code cache, and the
one-sentence error where pycuda or a driver is missing. They ran once on an NVIDIA H200 on
2026-11-27, as of 01dcd8e (`HDSL_TEST_TARGET=cuda` over the GPU tests; benchmarks/GPU.md);
the per-call push and pop of the context and the naming of a faulted kernel came after that
run and have not run on a GPU yet.

- Importing hdsl never imports pycuda: it is imported when a CudaDevice is made (by
  `Pipeline.compile("cuda")`). Without pycuda, or without a driver or GPU, that raises an
  HdslError of one sentence saying how to install the extra on a GPU machine.
- One CUDA context per process (the device's primary context), made on first use, pushed
  on the calling thread's context stack for the length of one call and popped after it
  (pycuda aborts the process when a thread ends with a context left on its stack).
- A pipeline's kernels are one PTX module (`DeviceCode`): made from the lowered pipeline,
  kept in the compile cache next to the host object under the same key (sources,
  schedule, target, compiler version), and loaded once per process per PTX text.
- `launch` packs the 8-byte argument slots that generated host code fills (a buffer's
  device pointer, a scalar's value at the slot's start) into the kernel's parameters by
  their sizes, launches, and synchronizes, so that a failing kernel is reported by name.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import threading
from dataclasses import dataclass

import numpy as np

from hdsl.diagnostics import HdslError
from hdsl.runtime.device import Device
from hdsl.target import STATIC_SHARED_LIMIT

NO_CUDA = ("the cuda target runs only on a machine with an NVIDIA GPU, its driver and pycuda ({why}); "
           "there, install them with `pip install 'hdsl[cuda]'`, or run GPU schedules on this machine "
           "with --target cuda-emulate")


@dataclass(frozen=True)
class DeviceCode:
    """A pipeline's kernels: one PTX module, and per kernel its parameters' sizes in bytes and
    "dynamic_shared": None (static shared memory only) or the bytes of dynamic shared memory
    it needs beyond the launch's shared_bytes (hdsl/codegen/ptx.py: dynamic_shared_slack), and
    "static_shared": the bytes of its static `.shared` arrays."""
    ptx: str
    kernels: dict           # name -> {"params": [bytes, ...], "dynamic_shared": bytes | None}

    def to_bytes(self) -> bytes:
        return json.dumps({"ptx": self.ptx, "kernels": self.kernels}).encode()

    @staticmethod
    def from_bytes(data: bytes) -> "DeviceCode | None":
        try:
            d = json.loads(data.decode())
            return DeviceCode(d["ptx"], d["kernels"])
        except (ValueError, KeyError, TypeError):
            return None


def device_code(stmt, target, name: str = "hdsl_kernels") -> DeviceCode:
    """The PTX of every kernel a lowered pipeline launches, for the target's sm and fast_math."""
    from hdsl.codegen.ptx import compile_ptx, dynamic_shared_slack, param_bytes, static_shared_bytes
    from hdsl.lower.gpu import kernels_of
    kernels = [launch.kernel for launch in kernels_of(stmt)]
    ptx = compile_ptx(kernels, sm=target.sm or 75, fast_math=target.fast_math, name=name)
    return DeviceCode(ptx, {k.name: {"params": param_bytes(k), "dynamic_shared": dynamic_shared_slack(k),
                                     "static_shared": static_shared_bytes(k)} for k in kernels})


def cached_device_code(variant, cache_path) -> DeviceCode:
    """device_code for a compiled variant (hdsl/runtime/native.py), kept in the compile cache at
    `cache_path` (None: no cache), read from it where it is there."""
    from hdsl.runtime.jit import cache_write, read_sealed
    if cache_path is not None:
        data = read_sealed(cache_path)
        code = DeviceCode.from_bytes(data) if data is not None else None
        if code is not None:
            return code
    code = device_code(variant.lowered.stmt, variant.target, variant.name + "_kernels")
    cache_write(cache_path, code.to_bytes())
    return code


def pack_args(slots, sizes) -> list:
    """The kernel's parameters from generated host code's 8-byte slots: each slot's first
    `size` bytes (little-endian: a value stored in its own type at the slot's start), as a
    NumPy scalar of that size, which pycuda passes by its bytes."""
    out = []
    for slot, size in zip(slots, sizes):
        raw = np.array([int(slot) & (2 ** 64 - 1)], dtype="<u8").view(np.uint8)[:size]
        out.append(raw.view({1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}[size])[0])
    return out


# ---------------------------------------------------------------- pycuda (needs a GPU)
_state_lock = threading.Lock()
_context = None
_modules: dict[str, object] = {}          # sha256 of the PTX -> pycuda Module
_opted_in: dict[tuple, int] = {}          # (id of a Module, kernel) -> the dynamic shared bytes it opted in to
# A kernel that faults (an illegal address, say) leaves the context unusable until the process
# ends (CUDA's "sticky" errors): every later call would fail at its first cuMemAlloc. The first
# such failure is kept, and later calls name it instead.
STICKY = ("illegal memory access", "illegal address", "misaligned address", "illegal instruction",
          "unspecified launch failure", "hardware stack error", "invalid program counter")
_broken: str | None = None


def _driver():
    """pycuda.driver, with the process's context made (not pushed: `CudaDevice.use` makes it
    current for one call); an HdslError (one sentence) where pycuda, the driver or a GPU is
    missing."""
    global _context
    try:
        import pycuda.driver as cuda
    except (ImportError, OSError) as e:     # (pycuda also fails to import where libcuda.so is missing)
        raise HdslError(NO_CUDA.format(why=f"pycuda cannot be imported: {e}"), None) from None
    with _state_lock:
        if _context is None:
            try:
                cuda.init()
                if cuda.Device.count() == 0:
                    raise HdslError(NO_CUDA.format(why="the driver finds no GPU"), None)
                _context = cuda.Device(0).retain_primary_context()
            except cuda.Error as e:
                raise HdslError(NO_CUDA.format(why=f"the CUDA driver failed: {e}"), None) from None
    return cuda


class CudaDevice(Device):
    name = "cuda"

    def __init__(self):
        super().__init__()
        self.cuda = _driver()
        self.code: DeviceCode | None = None
        self.module = None
        self.allocations: dict[int, object] = {}
        self._pushed = False        # the context is on this call's thread's stack (use .. release)

    def use(self, code: DeviceCode) -> None:
        """A call begins: the process's context is made current in this thread for the call
        (`release` pops it: pycuda aborts the process when a thread ends with a context still
        on its stack), and the variant's kernels are loaded (once per process per PTX)."""
        key = hashlib.sha256(code.ptx.encode()).hexdigest()
        cuda = _driver()            # (outside the lock, which _driver takes itself)
        if _broken is not None:
            raise HdslError(f"this process's CUDA context is unusable since {_broken}: CUDA keeps "
                            "such an error until the process ends", None, "run the pipeline in a new process")
        if not self._pushed:
            _context.push()
            self._pushed = True
        with _state_lock:
            module = _modules.get(key)
            if module is None:
                module = _modules[key] = cuda.module_from_buffer(code.ptx.encode() + b"\0")   # (NUL-ended PTX)
        self.code, self.module = code, module

    def malloc(self, nbytes: int) -> int:
        mem = self.cuda.mem_alloc(max(int(nbytes), 1))
        self.allocations[int(mem)] = mem
        return int(mem)

    def free(self, handle: int) -> None:
        mem = self.allocations.pop(handle, None)
        if mem is not None:
            mem.free()

    def copy_to_device(self, handle: int, host: int, nbytes: int) -> None:
        self.cuda.memcpy_htod(handle, (ctypes.c_char * nbytes).from_address(host))

    def copy_to_host(self, host: int, handle: int, nbytes: int) -> None:
        self.cuda.memcpy_dtoh((ctypes.c_char * nbytes).from_address(host), handle)

    def launch(self, kernel: str, host_fn, grid, threads, shared_bytes: int, args) -> None:
        if self.module is None or kernel not in self.code.kernels:
            raise RuntimeError(f"kernel {kernel} is not in the loaded module")
        cuda = self.cuda
        info = self.code.kernels[kernel]
        fn = self.module.get_function(kernel)
        # dynamic shared memory only for a kernel with gpu_shared allocations of run-time size
        # (the others' are static .shared arrays): shared_bytes plus their offsets' rounding
        slack = info["dynamic_shared"]
        shared = 0 if slack is None else int(shared_bytes) + int(slack)
        try:
            opted = _opted_in.get((id(self.module), kernel), 0)
            if shared + info.get("static_shared", 0) > STATIC_SHARED_LIMIT and opted < shared:
                # more than 48 KB of shared memory needs the kernel's opt-in to that much
                # dynamic shared memory, up to the target's limit that lowering checked
                # (pycuda's Function.set_attribute, src/wrapper/wrap_cudadrv.cpp; the
                # driver's cuFuncSetAttribute)
                fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
                _opted_in[(id(self.module), kernel)] = shared
            fn(*pack_args(args, info["params"]), grid=tuple(int(g) for g in grid),
               block=tuple(int(t) for t in threads), shared=shared)
            cuda.Context.synchronize()
        except cuda.Error as e:
            global _broken
            if _broken is None and any(what in str(e) for what in STICKY):
                _broken = f"kernel {kernel} failed ({str(e).strip(' -')})"
            raise RuntimeError(f"kernel {kernel} failed: {e}") from None

    def release(self) -> None:
        """A call ends: its device memory freed, the context popped off this thread's stack."""
        try:
            for mem in self.allocations.values():
                mem.free()
        finally:
            self.allocations.clear()
            if self._pushed:
                self._pushed = False
                self.cuda.Context.pop()
