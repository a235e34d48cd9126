"""A pipeline compiled ahead of time (`hdsl compile --emit so`), loaded into Python.

    lib = hdsl.load_library("out/libblur.so")      # the pipeline's name from the file's
    out = lib(img=array)                            # outputs at the first input's size
    lib.realize_into(out, img=array)                # into caller-owned arrays

The library describes its own arguments (`NAME_arguments`); calls go through the fast
call path (runtime/fastcall.py) to `NAME_argv`, exactly as a compiled Pipeline's do, and
take the same general path when the fast one hands a call back: inputs converted (a
strided or interleaved array copied to planar, another byte order swapped), the same
errors for wrong names, types, ranks, read-only or overlapping outputs. An error the
library itself reports (bounds, a bound() too small, memory) is raised with its message
(`NAME_error_message`). Params have no defaults here (the table does not carry them).
"""
from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hdsl.diagnostics import HdslError
from hdsl.ir.types import BY_NAME, Type

_TYPE_PREFIX = {0: "i", 1: "u", 2: "f"}


class _Argument(ctypes.Structure):
    # struct hdsl_argument (hdsl/codegen/c_header.py)
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("type_code", ctypes.c_int32),
                ("bits", ctypes.c_int32), ("dims", ctypes.c_int32)]


class Arg(NamedTuple):
    name: str
    type: Type
    dims: int
    default: object = None


def _type(code: int, bits: int) -> Type:
    name = "bool" if code == 3 else f"{_TYPE_PREFIX.get(code, '?')}{bits}"
    t = BY_NAME.get(name)
    if t is None:
        raise HdslError(f"the library declares an argument of unknown type (code {code}, {bits} bits)", None)
    return t


class Library:
    """An AOT shared library of one pipeline, called like a compiled Pipeline."""

    def __init__(self, path: str | Path, name: str | None = None):
        path = Path(path)
        self.path = path
        self.name = name or re.sub(r"\.so(\.\d+)*$", "", re.sub(r"^lib", "", path.name))
        try:
            self._lib = ctypes.CDLL(str(path.resolve()))
        except OSError as e:
            raise HdslError(f"cannot load '{path}': {e}", None,
                            "make it with `hdsl compile FILE --emit so`") from None
        try:
            argv = getattr(self._lib, f"{self.name}_argv")
            table_fn = getattr(self._lib, f"{self.name}_arguments")
            message = getattr(self._lib, f"{self.name}_error_message")
        except AttributeError:
            raise HdslError(f"'{path}' holds no hdsl pipeline named '{self.name}' (or one compiled by an "
                            f"hdsl without `{self.name}_argv`)", None,
                            "pass name= (the name given to hdsl compile), or compile it again") from None
        table_fn.restype = ctypes.POINTER(_Argument)
        table_fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
        message.restype = ctypes.c_char_p
        self._message = message
        count = ctypes.c_int()
        table = table_fn(ctypes.byref(count))
        self.inputs_decl, self.params_decl, self.outputs_decl = [], [], []
        for k in range(count.value):
            a = table[k]
            arg = Arg(a.name.decode(), _type(a.type_code, a.bits), a.dims)
            (self.inputs_decl, self.params_decl, self.outputs_decl)[a.kind].append(arg)
        self._argv_addr = ctypes.cast(argv, ctypes.c_void_p).value
        self._argv = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(self._argv_addr)
        from hdsl.runtime.fastcall import fast_call_for
        self.fast = fast_call_for([(a.name, a.type.dtype, a.dims) for a in self.inputs_decl],
                                  [(a.name, a.type.name, None) for a in self.params_decl],
                                  [(a.name, a.type.dtype, a.dims) for a in self.outputs_decl], self._argv_addr)

    @property
    def inputs(self):
        return [(a.name, a.type.name, a.dims) for a in self.inputs_decl]

    @property
    def params(self):
        return [(a.name, a.type.name, None) for a in self.params_decl]

    @property
    def outputs(self):
        return [(a.name, a.type.name, a.dims) for a in self.outputs_decl]

    def _error(self, code: int) -> HdslError:
        msg = (self._message() or b"").decode(errors="replace")
        return HdslError(f"{self.name}: {msg or f'the pipeline failed with error code {code}'}", None)

    def realize_into(self, out, **kwargs):
        """Compute into caller-owned arrays (one, or a tuple for several outputs) in the user's
        (H, W[, C]) layout, x at stride 1 (as Pipeline.realize_into)."""
        fast = self.fast
        if fast is not None:
            code = fast.call(out, kwargs)
            if code == 0:
                return out
            if code > 0:
                raise self._error(code)
        self._general(list(out) if isinstance(out, (tuple, list)) else [out], kwargs)
        return out

    def __call__(self, **kwargs):
        """The outputs, sized as the first input (as Pipeline.__call__)."""
        from hdsl.api import bind_arguments, to_buffer_layout
        from hdsl.runtime.fastcall import FastFailure
        if self.fast is not None:
            r = self.fast.call_new(kwargs)
            if type(r) is not FastFailure:
                return r
            if r.code > 0:
                raise self._error(r.code)
        inputs, _ = bind_arguments(self.name, self.inputs_decl, self.params_decl, kwargs)
        if not self.inputs_decl:
            raise HdslError(f"pipeline '{self.name}' has no input to take the output size from", None,
                            "use realize_into with arrays of the size wanted")
        first = inputs[self.inputs_decl[0].name]
        outs = []
        for a in self.outputs_decl:
            if a.dims > first.ndim:
                raise HdslError(f"output '{a.name}' has {a.dims} dimensions but the first input has "
                                f"{first.ndim}; its size can't be taken from it", None,
                                "use realize_into with arrays of the size wanted")
            size = list(first.shape[:a.dims])                             # [x, y, c]
            planar = np.empty(list(reversed(size)), a.type.dtype)        # [c][y][x]
            outs.append(to_buffer_layout(planar.transpose(*reversed(range(a.dims))), a.dims))
        self._general(outs, kwargs)
        outs = [np.ascontiguousarray(o) if o.ndim == 3 else o for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _general(self, arrays, kwargs):
        """The checked, converting call (what the fast path hands back)."""
        from hdsl.api import bind_arguments, check_outputs, to_buffer_layout
        from hdsl.runtime.jit import make_buffer
        from hdsl.runtime.native import native_layout
        if len(arrays) != len(self.outputs_decl):
            raise HdslError(f"pipeline '{self.name}' has {len(self.outputs_decl)} outputs, but "
                            f"{len(arrays)} arrays were given", None)
        inputs, params = bind_arguments(self.name, self.inputs_decl, self.params_decl, kwargs)
        check_outputs([(a.name, a.type, a.dims) for a in self.outputs_decl], arrays, inputs)
        keep, ptrs = [], []
        for a in self.inputs_decl:
            arr = native_layout(inputs[a.name])
            s = make_buffer(arr)
            keep.append((arr, s))
            ptrs.append(ctypes.addressof(s))
        for a in self.params_decl:
            cell = np.ascontiguousarray(np.array(params[a.name]).astype(
                a.type.dtype if not a.type.is_bool() else np.uint8).reshape(1))
            keep.append(cell)
            ptrs.append(cell.ctypes.data)
        for a, arr in zip(self.outputs_decl, arrays):
            view = to_buffer_layout(arr, a.dims)
            if view.ndim and view.shape[0] > 1 and view.strides[0] != view.itemsize:
                raise HdslError(f"the array for output '{a.name}' must have stride 1 in x", None,
                                "use a row-major gray image, or planar colour: "
                                "np.empty((C, H, W), dtype).transpose(1, 2, 0)")
            s = make_buffer(view)
            keep.append((view, s))
            ptrs.append(ctypes.addressof(s))
        args = (ctypes.c_void_p * max(1, len(ptrs)))(*ptrs)
        code = self._argv(ctypes.addressof(args), None)
        if code != 0:
            raise self._error(code)


def load_library(path: str | Path, name: str | None = None) -> Library:
    """Load an AOT shared library made by `hdsl compile FILE --emit so` (libNAME.so); `name`:
    the pipeline's C name when the file was renamed."""
    return Library(path, name)
