"""Devices behind one table of entry points (Halide's halide_device_interface_t).

Generated host code (hdsl/codegen/device_host.py) reaches a device only through
`struct hdsl_device_interface`, a table of five C function pointers passed to the
pipeline after its outputs:

    uint64_t malloc(int64_t bytes);                     a device buffer's handle, 0 if none
    int32_t  free(uint64_t handle);
    int32_t  copy_to_device(uint64_t handle, void *host, int64_t bytes);
    int32_t  copy_to_host(void *host, uint64_t handle, int64_t bytes);
    int32_t  launch(const char *kernel, void *host_fn, int32_t grid[3], int32_t threads[3],
                    int64_t shared_bytes, uint64_t *args, int32_t nargs);

A call returns 0 or an error code (ERR_DEVICE); `args` holds one 8-byte slot per
kernel arg in the Kernel's order: a buffer's device handle, or a scalar's value stored
in its own type at the slot's start. `host_fn` is the kernel compiled for the host
(`i32 fn(uint64_t *args)`), set only for the host-emulation device.

`Device` is the Python side: a subclass implements the five methods (the "cuda" device
with pycuda, the "opengl" one with PyOpenGL, registered by name in DEVICES), and
`table()` wraps them as C callbacks. `HostEmulatedDevice` ("host_emulate") is the CPU's
stand-in for a GPU: device memory is separate host memory, so copies really happen, and
it counts them; a launch calls the kernel compiled for the host, whose block loops run
on the thread pool and whose thread loops run one after another.
"""
from __future__ import annotations

import ctypes
import mmap
from collections import Counter


ERR_DEVICE = 7          # a device call failed (the Device keeps the exception: `error`)
# The order in which the host-emulation device runs a block's threads between two barriers
# (hdsl/codegen/device_host.py): "forward" (0, 1, ...) or "reversed" (last to first). A
# kernel whose values depend on it has a race in shared memory, as a GPU runs its threads in
# no set order: the tests run GPU schedules both ways (tests/gpu/test_thread_order.py). Part
# of the compile cache's key (hdsl/runtime/jit.py: source_cache_path).
THREAD_ORDER = "forward"

MALLOC = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_int64)
FREE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64)
TO_DEVICE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int64)
TO_HOST = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64)
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32),
                          ctypes.POINTER(ctypes.c_int32), ctypes.c_int64, ctypes.POINTER(ctypes.c_uint64),
                          ctypes.c_int32)
KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)


class DeviceInterface(ctypes.Structure):
    _fields_ = [("malloc", MALLOC), ("free", FREE), ("copy_to_device", TO_DEVICE), ("copy_to_host", TO_HOST),
                ("launch", LAUNCH)]


class Device:
    """One device's implementation of the table; counts what it is asked to do."""

    name = "device"

    def __init__(self):
        self.counts: Counter = Counter()      # "to_device", "to_host", "launch", "malloc", "free"
        self.launches: list[tuple[str, tuple, tuple, int]] = []   # the last call's (kernel, grid, threads, shared bytes)
        self.error: BaseException | None = None
        self._table = None

    # the five entry points (subclasses)
    def malloc(self, nbytes: int) -> int:
        raise NotImplementedError

    def free(self, handle: int) -> None:
        raise NotImplementedError

    def copy_to_device(self, handle: int, host: int, nbytes: int) -> None:
        raise NotImplementedError

    def copy_to_host(self, host: int, handle: int, nbytes: int) -> None:
        raise NotImplementedError

    def launch(self, kernel: str, host_fn: int | None, grid, threads, shared_bytes: int, args) -> None:
        raise NotImplementedError

    def release(self) -> None:
        """Free what a call left allocated (its outputs are back on the host by then)."""

    def use(self, code) -> None:
        """The device code of the compiled variant about to run (the cuda device's PTX module,
        hdsl/runtime/cuda.py); the host-emulation device's kernels are in the host code."""

    # the C table
    def _guard(self, fn, fail=ERR_DEVICE):
        def call(*a):
            try:
                r = fn(*a)
                return 0 if r is None else r
            except BaseException as e:      # (an exception must not cross into C)
                self.error = e
                return 0 if fail is None else fail
        return call

    def table(self) -> DeviceInterface:
        if self._table is None:
            def malloc(n):
                self.counts["malloc"] += 1
                return self.malloc(n)

            def free(h):
                self.counts["free"] += 1
                self.free(h)

            def to_device(h, host, n):
                self.counts["to_device"] += 1
                self.copy_to_device(h, host, n)

            def to_host(host, h, n):
                self.counts["to_host"] += 1
                self.copy_to_host(host, h, n)

            def launch(name, fn, grid, threads, shared, args, nargs):
                g, t = tuple(grid[i] for i in range(3)), tuple(threads[i] for i in range(3))
                self.counts["launch"] += 1
                self.launches.append((name.decode(), g, t, int(shared)))
                self.launch(name.decode(), fn, g, t, int(shared), [args[i] for i in range(nargs)])

            self._table = DeviceInterface(MALLOC(self._guard(malloc, None)), FREE(self._guard(free)),
                                          TO_DEVICE(self._guard(to_device)), TO_HOST(self._guard(to_host)),
                                          LAUNCH(self._guard(launch)))
        return self._table

    def reset_counts(self) -> None:
        self.counts.clear()
        self.launches.clear()


PAGE = mmap.PAGESIZE
_LIBC = []


def _libc():
    """The C library (mprotect), loaded on first use."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


class HostEmulatedDevice(Device):
    """Device memory is host memory of its own; a launch runs the kernel compiled for the host.

    Each device buffer is mapped on its own pages with an unreadable page after it, and its end
    rounded only to the 4 bytes of the widest scalar a kernel moves at once: a kernel that reads
    or writes past a buffer's end faults here as it would on a GPU (an illegal address there),
    where a buffer inside a larger host allocation would hide it. (Too far before the start
    faults too, on the unreadable page below; a few bytes before it do not.)"""

    name = "host_emulate"

    def __init__(self):
        super().__init__()
        self.memory: dict[int, mmap.mmap] = {}

    def malloc(self, nbytes: int) -> int:
        size = (max(int(nbytes), 1) + 3) // 4 * 4
        pages = (size + PAGE - 1) // PAGE
        m = mmap.mmap(-1, (pages + 2) * PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        for page in (base, base + (pages + 1) * PAGE):       # the guard pages below and above
            if _libc().mprotect(ctypes.c_void_p(page), ctypes.c_size_t(PAGE), 0) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed")
        handle = base + (pages + 1) * PAGE - size            # the buffer ends at the guard page
        self.memory[handle] = m
        return handle

    def free(self, handle: int) -> None:
        self.memory.pop(handle, None)

    def copy_to_device(self, handle: int, host: int, nbytes: int) -> None:
        ctypes.memmove(handle, host, nbytes)

    def copy_to_host(self, host: int, handle: int, nbytes: int) -> None:
        ctypes.memmove(host, handle, nbytes)

    def launch(self, kernel, host_fn, grid, threads, shared_bytes, args) -> None:
        if not host_fn:
            raise RuntimeError(f"kernel {kernel} was not compiled for the host")
        slots = (ctypes.c_uint64 * max(1, len(args)))(*args)
        code = KERNEL_FN(host_fn)(ctypes.addressof(slots))
        if code != 0:
            raise RuntimeError(f"kernel {kernel} failed with code {code}")

    def release(self) -> None:
        self.memory.clear()


DEVICES: dict[str, type] = {"host_emulate": HostEmulatedDevice}


def device_for(name: str) -> Device:
    """A fresh Device object for a target's device ("host_emulate", "cuda", "opengl")."""
    if name == "cuda" and name not in DEVICES:
        from hdsl.runtime.cuda import CudaDevice        # (pycuda is imported when one is made)
        DEVICES["cuda"] = CudaDevice
    cls = DEVICES.get(name)
    if cls is None and name == "opengl":
        from hdsl.runtime.opengl import OpenGLDevice     # (PyOpenGL only when asked for)
        cls = DEVICES["opengl"] = OpenGLDevice
    if cls is None:
        from hdsl.diagnostics import HdslError
        raise HdslError(f"no run-time support for the '{name}' device in this build of hdsl", None,
                        "run GPU schedules on the CPU with --target cuda-emulate")
    return cls()
