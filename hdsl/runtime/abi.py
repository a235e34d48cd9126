"""The buffer ABI, written once: the llvmlite struct generated code reads, the ctypes
struct Python fills and the C struct of ahead-of-time headers all come from BUFFER_FIELDS
(Halide's halide_buffer_t, smaller).

    struct hdsl_buffer {
        void *host;              element (x0, x1, ...) at host + elem_bytes * Σ (x_d - min[d]) * stride[d]
        int32_t dims, elem_bytes;
        int64_t min[8], extent[8], stride[8];
        uint64_t device;         a device's handle for its copy (0: none)
        void *device_interface;  the device-interface table that owns it (see runtime/device.py)
        uint64_t flags;          HOST_DIRTY: the host's copy is newer; DEVICE_DIRTY: the device's
    };

The device fields are the dirty-bit discipline of GPU pipelines: generated host code sets
and reads them around kernel launches (hdsl/codegen/device_host.py).
"""
from __future__ import annotations

import ctypes

MAX_DIMS = 8
HOST_DIRTY, DEVICE_DIRTY = 1, 2

# (name, kind): kinds "ptr", "i32", "u64", "i64[]" (MAX_DIMS of them)
BUFFER_FIELDS = (("host", "ptr"), ("dims", "i32"), ("elem_bytes", "i32"), ("min", "i64[]"), ("extent", "i64[]"),
                 ("stride", "i64[]"), ("device", "u64"), ("device_interface", "ptr"), ("flags", "u64"))
FIELD_INDEX = {name: k for k, (name, _) in enumerate(BUFFER_FIELDS)}

_CTYPES = {"ptr": ctypes.c_void_p, "i32": ctypes.c_int32, "u64": ctypes.c_uint64, "i64[]": ctypes.c_int64 * MAX_DIMS}
_C = {"ptr": "void *{}", "i32": "int32_t {}", "u64": "uint64_t {}", "i64[]": "int64_t {}[%d]" % MAX_DIMS}


class BufferStruct(ctypes.Structure):
    _fields_ = [(name, _CTYPES[kind]) for name, kind in BUFFER_FIELDS]


def llvm_buffer_type():
    from llvmlite import ir
    ptr = ir.PointerType()
    types = {"ptr": ptr, "i32": ir.IntType(32), "u64": ir.IntType(64),
             "i64[]": ir.ArrayType(ir.IntType(64), MAX_DIMS)}
    return ir.LiteralStructType([types[kind] for _, kind in BUFFER_FIELDS])


def c_buffer_struct() -> str:
    """The C declaration (for AOT headers)."""
    lines = ["struct hdsl_buffer {"] + [f"    {_C[kind].format(name)};" for name, kind in BUFFER_FIELDS] + ["};"]
    return "\n".join(lines)
