"""The fast call path: a compiled pipeline called from Python with NumPy arrays for about a
microsecond (Halide's Callable: ~0.5 µs with prebuilt buffers, ~1.6 µs wrapping arrays).

Everything that can be decided once is decided when the pipeline is compiled (a `Plan`,
a C struct): the order of the arguments, each buffer's rank, element size and dtype, each
param's place and size in a packed block, the function addresses (the shifted and guarded
forms), and where this process's Python and NumPy keep an object's fields. A call then
makes one tuple of the arrays, packs the params with a precompiled `struct.Struct`, and
makes one ctypes call to `hdsl_call` (runtime/call.c), which reads each array's data
pointer, shape, strides, dtype and flags straight out of the object and fills the buffer
descriptors on its own stack (so concurrent calls share nothing), checks what the compiled
code does not (dtype, rank, x at stride 1, extents below 2^31, writeable and non-overlapping
outputs, bools 0 or 1), and calls the pipeline.

What it does not handle it hands back untouched (HDSL_CALL_FALLBACK, before any memory is
read or written) and the caller takes the general path (hdsl/api.py, runtime/native.py),
which converts what can be converted (an interleaved or strided input copied to planar, a
big-endian one swapped, lists made arrays, a param given as a float) and raises the same
HdslError as ever for what cannot. Errors the compiled code finds (bounds, a `bound()` too
small, memory) come back as its error code; `info()` gives this thread's error info for
the message. The contract is in docs/python.md, "The fast call path".

The field offsets are probed from live objects (`probe_layout`), not taken from headers:
a Python or NumPy whose objects do not look as expected gets no fast path (every call
takes the general one), never a wrong read.
"""
from __future__ import annotations

import ctypes
import operator
import struct
import threading

import numpy as np

FALLBACK = -1

_FORMATS = {"bool": "B", "u8": "B", "i8": "b", "u16": "H", "i16": "h", "u32": "I", "i32": "i", "u64": "Q",
            "i64": "q", "f16": "e", "f32": "f", "f64": "d"}
# what struct.Struct.pack raises for a value that does not fit or is not a number of the
# param's kind (the general path then gives the error, or converts as NumPy does)
PACK_ERRORS = (struct.error, OverflowError, TypeError, ValueError)


class _Layout(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("ob_type", "tuple_size", "tuple_items", "data", "nd", "dims",
                                                "strides", "descr", "flags")] + [("ndarray_type", ctypes.c_void_p)]


class _PlanBuffer(ctypes.Structure):
    _fields_ = [("dims", ctypes.c_int32), ("elem_bytes", ctypes.c_int32), ("descr", ctypes.c_void_p * 2)]


class _PlanParam(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_int32), ("size", ctypes.c_int32), ("is_bool", ctypes.c_int32),
                ("pad", ctypes.c_int32)]


class _PlanReq(ctypes.Structure):
    _fields_ = [("output", ctypes.c_int32), ("dim", ctypes.c_int32), ("factor", ctypes.c_int32),
                ("pad", ctypes.c_int32)]


class _Plan(ctypes.Structure):
    _fields_ = [("layout", _Layout), ("fn", ctypes.c_void_p), ("fn_guarded", ctypes.c_void_p),
                ("extra", ctypes.c_void_p), ("n_inputs", ctypes.c_int32), ("n_params", ctypes.c_int32),
                ("n_outputs", ctypes.c_int32), ("n_reqs", ctypes.c_int32),
                ("buffers", ctypes.POINTER(_PlanBuffer)), ("params", ctypes.POINTER(_PlanParam)),
                ("reqs", ctypes.POINTER(_PlanReq))]


def _words(obj, n: int):
    return (ctypes.c_int64 * n).from_address(id(obj))


def _find(words, value) -> int | None:
    for i, w in enumerate(words):
        if w == value:
            return i
    return None


def probe_layout() -> _Layout | None:
    """Where the fields of a tuple and of a numpy.ndarray are in this process (CPython's
    PyTupleObject and NumPy's PyArrayObject_fields), found in live objects and checked on
    several arrays; None when anything is not where it should be."""
    try:
        a, b, c = object(), object(), object()
        t = (a, b, c)
        tw = _words(t, 12)
        items = _find(tw, id(a))
        if items is None or items < 2 or tw[items + 1] != id(b) or tw[items + 2] != id(c) or tw[items - 1] != 3:
            return None
        ob_type = _find(_words(t, 4), id(tuple))
        if ob_type is None:
            return None
        base = np.arange(60, dtype=np.int16).reshape(3, 4, 5)
        probes = [base, base[:, ::2, 1:].transpose(1, 0, 2), np.zeros((7,), np.float64), base[1:2]]
        w0 = _words(probes[0], 16)
        data = _find(w0, probes[0].ctypes.data)
        if data is None:
            return None
        # NumPy's PyArrayObject_fields: data, nd, dimensions, strides, base, descr, flags
        lay = _Layout(ob_type=8 * ob_type, tuple_size=8 * (items - 1), tuple_items=8 * items, data=8 * data,
                      nd=8 * (data + 1), dims=8 * (data + 2), strides=8 * (data + 3), descr=8 * (data + 5),
                      flags=8 * (data + 6), ndarray_type=id(np.ndarray))
        for arr in probes:
            w = _words(arr, data + 8)
            if w[ob_type] != id(np.ndarray) or w[data] != arr.ctypes.data or w[data + 5] != id(arr.dtype):
                return None
            if ctypes.c_int32.from_address(id(arr) + lay.nd).value != arr.ndim:
                return None
            if ctypes.c_int32.from_address(id(arr) + lay.flags).value != arr.flags.num:
                return None
            shape = (ctypes.c_int64 * arr.ndim).from_address(w[data + 2])
            strides = (ctypes.c_int64 * arr.ndim).from_address(w[data + 3])
            if tuple(shape) != arr.shape or tuple(strides) != arr.strides:
                return None
        return lay
    except Exception:       # (anything unexpected: no fast path, never a failure)
        return None


_state_lock = threading.Lock()
_layout: _Layout | None = None
_entry = None
_info_fn = None
_probed = False


def _runtime():
    """(the probed layout, hdsl_call, hdsl_call_info), or None when there is no fast path."""
    global _layout, _entry, _info_fn, _probed
    with _state_lock:
        if not _probed:
            _probed = True
            layout = probe_layout()
            if layout is not None:
                from hdsl.runtime.jit import runtime_library
                lib = ctypes.CDLL(str(runtime_library()))
                _entry = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
                    ("hdsl_call", lib))
                _info_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(("hdsl_call_info", lib))
                _layout = layout
    return None if _layout is None else (_layout, _entry, _info_fn)


def info() -> list[int]:
    """This thread's error info of its last failed fast call (which buffer or Func, the dim,
    the region)."""
    out = (ctypes.c_int64 * 4)()
    _info_fn(ctypes.addressof(out))
    return list(out)


def _descrs(dtype: np.dtype) -> tuple[int, int]:
    """The descriptor objects a buffer of `dtype` accepts: NumPy's own for the type, and the
    C long long twin of int64 / uint64 (another descriptor, the same layout)."""
    d = np.dtype(dtype)
    twin = {np.dtype(np.int64): np.dtype(np.longlong), np.dtype(np.uint64): np.dtype(np.ulonglong)}.get(d, d)
    if twin.itemsize != d.itemsize or twin.kind != d.kind:
        twin = d
    return id(d), id(twin)


class FastCall:
    """The plan of one compiled entry point. inputs and outputs: [(name, numpy dtype, dims)];
    params: [(name, hdsl Type name, default or None)]; fn: the address of the pipeline's
    `int32 fn(void **args, int64 *info)`; reqs: [(output, dim, factor)] under which the
    guarded form `fn_guarded` is called instead (0: not compiled yet)."""

    def __init__(self, inputs, params, outputs, fn: int, fn_guarded: int = 0, reqs=()):
        rt = _runtime()
        if rt is None:
            raise RuntimeError("no fast call path in this process")
        layout, self._entry, _ = rt
        self.inputs, self.params, self.outputs = list(inputs), list(params), list(outputs)
        bufs = (_PlanBuffer * max(1, len(self.inputs) + len(self.outputs)))()
        for k, (_, dtype, dims) in enumerate(self.inputs + self.outputs):
            d = np.dtype(dtype)
            bufs[k].dims, bufs[k].elem_bytes = dims, d.itemsize
            bufs[k].descr[0], bufs[k].descr[1] = _descrs(d)
        fmt = "=" + "".join(_FORMATS[t] for _, t, _ in self.params)
        self._struct = struct.Struct(fmt) if self.params else None
        prms = (_PlanParam * max(1, len(self.params)))()
        off = 0
        for k, (_, t, _) in enumerate(self.params):
            size = struct.calcsize("=" + _FORMATS[t])
            prms[k].offset, prms[k].size, prms[k].is_bool = off, size, int(t == "bool")
            off += size
        reqs = list(reqs)
        rq = (_PlanReq * max(1, len(reqs)))()
        for k, (o, d, n) in enumerate(reqs):
            rq[k].output, rq[k].dim, rq[k].factor = o, d, n
        self._keep = (bufs, prms, rq)
        self.plan = _Plan(layout=layout, fn=fn, fn_guarded=fn_guarded or None, extra=None,
                          n_inputs=len(self.inputs), n_params=len(self.params), n_outputs=len(self.outputs),
                          n_reqs=len(reqs), buffers=bufs, params=prms, reqs=rq)
        self._plan = ctypes.addressof(self.plan)
        self.call = self._make_call()
        self.call_new = self._make_call_new()

    def set_guarded(self, fn_guarded: int) -> None:
        self.plan.fn_guarded = fn_guarded

    def _make_call(self):
        """call(out, kw): run into `out` (one array, or a tuple or list for several outputs) with
        the inputs and params in `kw`; the pipeline's code, or FALLBACK when the general path
        must take the call (nothing has been read or written then). A closure over what the
        plan fixed (the per-call work is a few dict lookups, one tuple and one ctypes call)."""
        entry, plan = self._entry, self._plan
        names = [n for n, _, _ in self.inputs]
        n_in, n_out = len(names), len(self.outputs)
        pack = self._struct.pack if self._struct is not None else None
        known = frozenset(names) | {n for n, _, _ in self.params}
        pnames = [n for n, _, _ in self.params]
        pdefaults = [d for _, _, d in self.params]
        get = operator.itemgetter(*names) if n_in > 1 else None
        name0 = names[0] if names else None
        ndarray, fallback, pack_errors = np.ndarray, FALLBACK, PACK_ERRORS

        def call(out, kw):
            try:
                ins = (kw[name0],) if n_in == 1 else get(kw) if n_in else ()
            except KeyError:
                return fallback
            if pack is None:
                if len(kw) != n_in:
                    return fallback
                packed = None
            else:
                if not known.issuperset(kw):
                    return fallback
                try:
                    packed = pack(*map(kw.get, pnames, pdefaults))
                except pack_errors:
                    return fallback
            if type(out) is ndarray:
                if n_out != 1:
                    return fallback
                return entry(plan, ins + (out,), packed)
            if type(out) in (tuple, list) and len(out) == n_out:
                return entry(plan, ins + tuple(out), packed)
            return fallback
        return call

    def _make_call_new(self):
        """call_new(kw): run into new outputs sized as the first input (as
        Pipeline.default_sizes): gray (H, W) row-major, colour planar behind an (H, W, C) view,
        returned C-contiguous as the general path returns them. Returns the output (a tuple
        for several), or a FastFailure (the code, and the arrays for the error message)."""
        call = self.call
        first = self.inputs[0][0] if self.inputs else None
        outs_decl = [(np.dtype(dtype), dims) for _, dtype, dims in self.outputs]
        ndarray, empty = np.ndarray, np.empty
        if len(outs_decl) == 1 and outs_decl[0][1] <= 2:
            dtype, dims = outs_decl[0]

            def call_new(kw):
                a = kw.get(first)
                if type(a) is not ndarray or a.ndim != dims:
                    return FastFailure(FALLBACK, None)
                o = empty(a.shape, dtype)
                code = call(o, kw)
                return o if code == 0 else FastFailure(code, [o])
            return call_new

        def call_new(kw):
            a = kw.get(first)
            if type(a) is not ndarray:
                return FastFailure(FALLBACK, None)
            shape = a.shape
            outs = []
            for dtype, dims in outs_decl:
                if dims != a.ndim or dims > 3:
                    return FastFailure(FALLBACK, None)
                outs.append(empty((shape[2], shape[0], shape[1]), dtype).transpose(1, 2, 0) if dims == 3
                            else empty(shape, dtype))
            code = call(outs[0] if len(outs) == 1 else outs, kw)
            if code != 0:
                return FastFailure(code, outs)
            outs = [np.ascontiguousarray(o) if o.ndim == 3 else o for o in outs]
            return outs[0] if len(outs) == 1 else tuple(outs)
        return call_new


class FastFailure:
    """A fast call that did not produce outputs: FALLBACK (take the general path) or the
    compiled code's error code, with the output arrays it was given."""
    __slots__ = ("code", "outs")

    def __init__(self, code: int, outs):
        self.code, self.outs = code, outs


def fast_call_for(inputs, params, outputs, fn: int, fn_guarded: int = 0, reqs=()) -> FastCall | None:
    """A FastCall, or None where this process has no fast path (objects not laid out as
    probed, or HDSL_NO_FAST_CALL set: every call then takes the general path)."""
    import os
    if os.environ.get("HDSL_NO_FAST_CALL"):
        return None
    try:
        return FastCall(inputs, params, outputs, fn, fn_guarded, reqs)
    except RuntimeError:
        return None
