"""The Python API: `hdsl.load(path)` → a callable Pipeline."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hdsl.diagnostics import HdslError, read_source
from hdsl.frontend.elaborate import check_source
from hdsl.ir.func import Pipeline as PipelineIR, calls_in as calls_in_exprs
from hdsl.ir.types import from_dtype
from hdsl.runtime.fastcall import FastFailure

from hdsl.target import TARGET_NAMES as TARGETS, Target, parse_target  # noqa: F401 (TARGETS: for callers)


def to_buffer_layout(arr: np.ndarray, dims: int) -> np.ndarray:
    """(H, W[, C, …]) NumPy layout → an array indexed [x, y, c, …] (a view, no copy)."""
    if arr.ndim < 2:
        return arr
    axes = (1, 0) + tuple(range(2, arr.ndim))
    return arr.transpose(axes)


def from_buffer_layout(arr: np.ndarray) -> np.ndarray:
    if arr.ndim < 2:
        return np.ascontiguousarray(arr)
    axes = (1, 0) + tuple(range(2, arr.ndim))
    return np.ascontiguousarray(arr.transpose(axes))


def bind_arguments(name: str, inputs_decl, params_decl, kwargs):
    """Check and convert a call's keyword arguments: ({input: array in [x, y, c] order},
    {param: NumPy scalar}). inputs_decl: objects with .name, .type, .dims; params_decl:
    with .name, .type, .default (a Pipeline's IR, or an AOT library's argument table)."""
    inputs, params = {}, {}
    known = {b.name for b in inputs_decl} | {p.name for p in params_decl}
    for k in kwargs:
        if k not in known:
            raise HdslError(f"pipeline '{name}' has no input or param '{k}'", None,
                            "its inputs and params: " + ", ".join(sorted(known)))
    for b in inputs_decl:
        if b.name not in kwargs:
            raise HdslError(f"input '{b.name}' is missing", None, f"pass {b.name}=<array>")
        arr = np.asarray(kwargs[b.name])
        if arr.ndim != b.dims:
            raise HdslError(f"input '{b.name}' has {b.dims} dimension{'s' if b.dims > 1 else ''} "
                            f"but the array has {arr.ndim} (shape {arr.shape})", None,
                            "an (H, W) array is img(x, y); an (H, W, C) array is img(x, y, c)")
        try:
            t = from_dtype(arr.dtype)
        except ValueError:
            t = None
        if t != b.type:
            raise HdslError(f"input '{b.name}' is {b.type} but the array holds {arr.dtype}", None,
                            f"convert it first, e.g. array.astype(np.{b.type.dtype})")
        if arr.size == 0:
            raise HdslError(f"input '{b.name}' is empty (shape {arr.shape})", None)
        if max(arr.shape) > 2 ** 31 - 1:
            # (a broadcast view can be that long): coordinates and extents are i32, as in Halide
            raise HdslError(f"input '{b.name}' has shape {arr.shape}; an extent may be at most "
                            f"2^31 - 1 = 2147483647 (coordinates are i32, as in Halide)", None,
                            "process the image in pieces")
        inputs[b.name] = to_buffer_layout(arr, b.dims)
    for p in params_decl:
        if p.name in kwargs:
            v = kwargs[p.name]
            try:
                val = np.array(v).astype(p.type.dtype) if not isinstance(v, str) else None
            except (TypeError, ValueError):
                val = None
            if val is None or val.ndim != 0:
                raise HdslError(f"param '{p.name}' needs a {p.type} scalar, not {v!r}", None)
            if not p.type.is_float() and float(np.asarray(v)) != float(val):
                raise HdslError(f"param '{p.name}' is {p.type}; {v!r} does not fit", None)
            params[p.name] = val[()]
        elif p.default is not None:
            params[p.name] = np.array(p.default).astype(p.type.dtype)[()]
        else:
            raise HdslError(f"param '{p.name}' has no default and is not given", None,
                            f"pass {p.name}=<value>")
    return inputs, params


def check_outputs(outputs_decl, arrays, inputs) -> list[list[int]]:
    """The sizes ([x, y, c] order) of caller-owned output arrays, after checking each: the
    type and rank of its output (outputs_decl: (name, Type, dims)), writeable, and not
    overlapping an input or another output."""
    sizes = []
    for (name, t, dims), arr in zip(outputs_decl, arrays):
        if not isinstance(arr, np.ndarray) or arr.ndim != dims or arr.dtype != t.dtype:
            raise HdslError(f"output '{name}' needs a {t} array with {dims} dimensions", None)
        if not arr.flags.writeable:
            raise HdslError(f"the array for output '{name}' is read-only", None,
                            "pass a writeable array (e.g. a copy: array.copy())")
        sizes.append(list(to_buffer_layout(arr, dims).shape))
    # inputs are values: an output written over an input still to be read (a stencil's
    # neighbours) would change what the pipeline reads, so buffers may not overlap
    named = [(f"output '{o[0]}'", a) for o, a in zip(outputs_decl, arrays)] + \
        [(f"input '{k}'", v) for k, v in inputs.items() if isinstance(v, np.ndarray)]
    for i, (what, a) in enumerate(named[:len(arrays)]):
        for other, b in named[i + 1:]:
            if np.may_share_memory(a, b):
                raise HdslError(f"{what} overlaps {other} in memory", None,
                                "write into a separate array (outputs may not alias inputs or each other)")
    return sizes


class Pipeline:
    """A checked pipeline; call it with inputs and params as keyword arguments."""

    def __init__(self, ir: PipelineIR, target: str = "interp", schedule: str | None = None, native=None):
        self.ir = ir
        self.target = target
        self.schedule = schedule
        self.name = ir.name
        self.native = native
        # the fast call path (runtime/fastcall.py): native CPU code only
        self._fast = getattr(native, "fast", None)

    @property
    def inputs(self):
        return [(b.name, b.type.name, b.dims) for b in self.ir.inputs]

    @property
    def params(self):
        return [(p.name, p.type.name, p.default) for p in self.ir.params]

    @property
    def outputs(self):
        return [(f.name, t.name if t else None, f.dims) for f, t in zip(self.ir.outputs, self.ir.output_types)]

    def compile(self, target: "str | Target" = "host", schedule: str | None = None,
                use_cache: bool = True) -> "Pipeline":
        """A reusable compiled pipeline: target 'host' (native code), an x86-64 variant, 'interp',
        or a GPU target ('cuda-emulate': GPU schedules run by the host-emulation device; see
        hdsl/target.py)."""
        tgt = parse_target(target)
        if schedule is not None and schedule != "auto" and schedule not in self.ir.schedules:
            names = ", ".join(n for n in self.ir.schedules if n) or "(none)"
            raise HdslError(f"pipeline '{self.name}' has no schedule '{schedule}'", None,
                            f"its named schedules: {names}")
        native = None
        if tgt.native:
            from hdsl.lower.lower import choose_schedule
            from hdsl.runtime.native import NativePipeline
            from hdsl.schedule.record import refuse_unsupported
            # (before the compile cache, which skips lowering)
            refuse_unsupported(choose_schedule(self.ir, schedule, tgt), tgt)
            native = NativePipeline(self.ir, schedule, tgt, use_cache)
        return Pipeline(self.ir, tgt.name, schedule, native)

    def gradient(self, loss: str, wrt) -> "Gradient":
        """The gradient of the zero-dimensional Func `loss` (by name) by each input, param or Func
        named in `wrt`: a callable giving a dict {loss: value, name: ∂loss/∂name, ...}
        (docs/autodiff.md)."""
        from hdsl.autodiff.pipeline import gradient_pipeline
        wrt = [wrt] if isinstance(wrt, str) else list(wrt)
        ir, kinds = gradient_pipeline(self.ir, loss, wrt)
        return Gradient(Pipeline(ir), kinds)

    def _bind(self, kwargs):
        return bind_arguments(self.name, self.ir.inputs, self.ir.params, kwargs)

    def default_sizes(self, inputs) -> list[list[int]]:
        if not self.ir.inputs:
            raise HdslError(f"pipeline '{self.name}' has no input to take the output size from", None,
                            "give the size: realize((W, H), ...) or --size W,H")
        first = inputs[self.ir.inputs[0].name]
        sizes = []
        for f in self.ir.outputs:
            if f.dims > first.ndim:
                raise HdslError(f"output '{f.name}' has {f.dims} dimensions but the first input has "
                                f"{first.ndim}; its size can't be taken from it", None, "give the size explicitly")
            sizes.append(list(first.shape[:f.dims]))
        return sizes

    def realize(self, sizes, min=None, **kwargs):
        """The outputs over a given size, (W, H[, C]) (one per output for several), whose
        first point is `min`, (X, Y[, C]) (default all zeros; a dim left out is 0): the
        output array's element [0, 0] is the pipeline's out(X, Y). A program that reads
        img(x - 1, y) without a boundary condition runs on an output starting at x = 1."""
        inputs, params = self._bind(kwargs)
        if sizes and isinstance(sizes[0], (int, np.integer)):
            sizes = [list(sizes)] * len(self.ir.outputs)
        return self._run(inputs, params, sizes, min)

    def origins(self, min) -> list[list[int]]:
        """Each output's min coordinates from `min`: None (zeros), or (X, Y, ...) for every
        output (dims left out are 0)."""
        if min is None:
            return [[0] * f.dims for f in self.ir.outputs]
        try:
            flat = [int(v) for v in min]
        except (TypeError, ValueError):
            raise HdslError(f"min={min!r}: give the first point's coordinates as whole numbers, "
                            "e.g. min=(1, 1)", None) from None
        if any(not (-2 ** 31 < v < 2 ** 31) for v in flat):
            raise HdslError(f"min={tuple(flat)}: coordinates are 32-bit", None)
        out = []
        for f in self.ir.outputs:
            if len(flat) > f.dims:
                raise HdslError(f"output '{f.name}' has {f.dims} dimension{'s' if f.dims != 1 else ''}, but "
                                f"the min given has {len(flat)}", None)
            out.append(flat + [0] * (f.dims - len(flat)))
        return out

    def realize_into(self, out, min=None, **kwargs):
        """Compute into caller-owned arrays (one, or a tuple for several outputs), in the user's
        (H, W[, C]) layout; the output sizes are theirs. Reusing arrays avoids allocating (and
        the page faults of touching new memory) on every call. Native targets need x with
        stride 1: a row-major gray image, or a colour array whose channels are planes
        (np.empty((C, H, W)).transpose(1, 2, 0)). `min`: the coordinates of each array's first
        element, as in realize."""
        fast = self._fast
        if fast is not None and min is None:
            code = fast.call(out, kwargs)
            if code == 0:
                return out
            if code > 0:
                raise self._fast_error(code, out, kwargs)
        arrays = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(arrays) != len(self.ir.outputs):
            raise HdslError(f"pipeline '{self.name}' has {len(self.ir.outputs)} outputs, but "
                            f"{len(arrays)} arrays were given", None)
        inputs, params = self._bind(kwargs)
        sizes = check_outputs([(f.name, f.values[0].type, f.dims) for f in self.ir.outputs], arrays, inputs)
        if self.native is not None:
            self.native.run(inputs, params, sizes, [to_buffer_layout(a, a.ndim) for a in arrays],
                            self.origins(min))
        else:
            res = self._run(inputs, params, sizes, min)
            for a, r in zip(arrays, res if isinstance(res, tuple) else (res,)):
                a[...] = r
        return out

    def input_regions(self, size, min=None, **kwargs) -> dict[str, list[tuple[int, int]]]:
        """Bounds inference as a query: the region of each input that computing the outputs over
        `size` from `min` (as in realize) reads, {input: [(min, extent) per dim, x first]}; an
        input read nowhere is absent. The inputs may be anything with .shape and .dtype (a Dask
        or zarr array): only their shapes are read, unless an rdom's bounds read an input's
        values (then give the array). Exactly the region the reference evaluator reads; a
        boundary condition keeps it inside the image."""
        from hdsl.interp.evaluate import input_regions
        from hdsl.lower.lower import choose_schedule
        reads = {c.buffer.name for f in self.ir.funcs for u in f.updates if u.rdom is not None
                 for lo, ext in u.rdom.bounds for c in calls_in_exprs([lo, ext])}
        stand = {}
        for k, v in kwargs.items():
            if not isinstance(v, np.ndarray) and hasattr(v, "shape") and hasattr(v, "dtype"):
                if k in reads:
                    raise HdslError(f"input '{k}' is read by an rdom's bounds: give its values (a NumPy "
                                    "array), not only its shape", None)
                v = np.broadcast_to(np.zeros((), v.dtype), tuple(v.shape))
            stand[k] = v
        inputs, params = self._bind(stand)
        if size and isinstance(size[0], (int, np.integer)):
            size = [list(size)] * len(self.ir.outputs)
        boxes = [list(zip(m, [int(n) for n in s])) for m, s in zip(self.origins(min), size)]
        return input_regions(self.ir, inputs, params, boxes, schedule=choose_schedule(self.ir, self.schedule))

    def on_dask(self, size=None, min=None, tile=(1024, 1024), target=None, schedule=None, **kwargs):
        """The outputs as Dask arrays (one, or a tuple for several), computed tile by tile: each
        tile of `tile` = (width, height) output pixels is computed by the compiled pipeline (this
        one's target and schedule, or host for the evaluator; `target`, `schedule` override them)
        from the crop of each input that bounds inference says it reads. Inputs: Dask arrays (a
        zarr or TIFF file through dask.array.from_zarr, hdsl.scale.io.open_image) or NumPy
        arrays; params as in realize; size and min as in realize. A histogram-like output
        (f(i) = 0; f(computed) += e over integers) is computed per piece of its rdom and
        combined. Nothing runs until the array is computed or stored (docs/scale.md)."""
        from hdsl.scale.tiles import on_dask
        return on_dask(self, size=size, min=min, tile=tile, target=target, schedule=schedule, **kwargs)

    def __call__(self, **kwargs):
        fast = self._fast
        if fast is not None:
            r = fast.call_new(kwargs)
            if type(r) is not FastFailure:
                return r
            if r.code > 0:
                raise self._fast_error(r.code, r.outs, kwargs)
        inputs, params = self._bind(kwargs)
        return self._run(inputs, params, self.default_sizes(inputs))

    def _fast_error(self, code: int, out, kwargs) -> HdslError:
        """The error of a fast call that the compiled code refused (code > 0), with the
        message the general path gives (this thread's error info, the arguments bound again)."""
        from hdsl.runtime.fastcall import info
        where = info()
        inputs, params = self._bind(kwargs)
        arrays = list(out) if isinstance(out, (tuple, list)) else [out]
        sizes = [list(to_buffer_layout(a, a.ndim).shape) for a in arrays]
        return self.native.error(code, where, inputs, sizes, self.origins(None), params)

    def _run(self, inputs, params, sizes, min=None):
        from hdsl.interp.evaluate import realize
        from hdsl.lower.lower import choose_schedule
        mins = self.origins(min)
        boxes = []
        for f, size, origin in zip(self.ir.outputs, sizes, mins):
            size = [int(s) for s in size]
            if len(size) != f.dims:
                raise HdslError(f"output '{f.name}' has {f.dims} dimensions, but the size given has {len(size)}", None)
            boxes.append(list(zip(origin, size)))
        if self.native is not None:
            outs = [from_buffer_layout(r) for r in self.native.run(inputs, params, sizes, None, mins)]
            return outs[0] if len(outs) == 1 else tuple(outs)
        # the evaluator ignores schedules, but honours the chosen one's bound() directives
        # (a bound smaller than the region needed is an error, as in native code)
        sched = choose_schedule(self.ir, self.schedule)
        results = realize(self.ir, inputs, params, boxes, schedule=sched)
        outs = [from_buffer_layout(r[0]) for r in results]
        return outs[0] if len(outs) == 1 else tuple(outs)


class Gradient:
    """p.gradient(loss, wrt): call it like the pipeline; it returns {loss: float, name: gradient}, each
    gradient shaped like what it differentiates (an array in the input's (H, W[, C]) layout, a float
    for a param). Func gradients take the size of the first input."""

    def __init__(self, pipeline: Pipeline, kinds):
        self.pipeline, self.kinds = pipeline, kinds

    def compile(self, target: str = "host", schedule: str | None = None, use_cache: bool = True) -> "Gradient":
        return Gradient(self.pipeline.compile(target, schedule, use_cache), self.kinds)

    def __call__(self, **kwargs) -> dict:
        p = self.pipeline
        inputs, _ = p._bind(kwargs)
        shapes = {b.name: list(inputs[b.name].shape) for b in p.ir.inputs}
        sizes = []
        for (kind, name), f in zip(self.kinds, p.ir.outputs):
            if kind == "input":
                sizes.append(shapes[name])
            elif kind == "func":
                sizes.append(shapes[p.ir.inputs[0].name][:f.dims])
            else:
                sizes.append([1])
        outs = p.realize(sizes, **kwargs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        result = {}
        for (kind, name), arr in zip(self.kinds, outs):
            result[name] = arr[0].item() if kind in ("loss", "param") else arr
        return result


def loads(text: str, filename: str = "<string>") -> Pipeline:
    from hdsl.ir.expr import no_collection
    with no_collection():               # (parse trees and IR: many small long-lived objects)
        ir = check_source(text, filename)
    if ir is None:
        raise HdslError(f"{filename} is a library (no 'pipeline'); it can be used, not run", None)
    ir.source_text = text
    return Pipeline(ir)


def load(path: str | Path) -> Pipeline:
    path = Path(path)
    try:
        text = read_source(path)
    except OSError as e:
        raise HdslError(f"cannot read {path}: {e.strerror}", None) from None
    return loads(text, str(path))
