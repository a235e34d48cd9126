"""A pipeline compiled to native code: lowering + LLVM codegen + JIT, called with NumPy arrays."""
from __future__ import annotations

import ctypes
import re
import threading
import time

import numpy as np

from hdsl.diagnostics import HdslError, bound_too_small, output_written_outside
from hdsl.ir.func import Pipeline
from hdsl.lower.loops import (ERR_BOUND_DIRECTIVE, ERR_BUFFER_TOO_LARGE, ERR_FLOAT_COORDINATE, ERR_FOLD_TOO_SMALL,
                              ERR_INPUT_BOUNDS, ERR_OUT_OF_MEMORY, ERR_OUTPUT_BOUNDS)
from hdsl.lower.gpu import ERR_BLOCK_THREADS, ERR_GRID_LIMIT, ERR_SHARED_MEMORY
from hdsl.runtime.device import ERR_DEVICE, device_for
from hdsl.target import Target, parse_target

DIM_NAMES = "xyc"


def _dim(d: int) -> str:
    return DIM_NAMES[d] if d < 3 else f"dim {d}"


def host_module(p: Pipeline, stmt, name: str, target: Target, nontemporal: frozenset = frozenset()):
    """The LLVM module of a lowered pipeline's host code: the CPU's, or for a GPU target the CPU's
    with kernel launches and device copies (hdsl/codegen/device_host.py). nontemporal: the
    buffers whose stores stream past the caches (Lowered.nontemporal; CPU targets)."""
    if target.is_gpu:
        from hdsl.codegen.device_host import generate as generate_gpu
        return generate_gpu(p, stmt, name, target.fast_math, device=target.device)
    from hdsl.codegen.cpu import generate
    return generate(p, stmt, name, target.fast_math, cpu=target.cpu, nontemporal=nontemporal)


class _Variant:
    """One compiled form of the pipeline: lowering + LLVM + JIT, or the object from the cache."""

    def __init__(self, p: Pipeline, schedule, target: Target, name: str, use_cache: bool, shift: bool):
        from hdsl.runtime.jit import CompiledFunction, cache_write, read_sealed, source_cache_path
        t0 = time.perf_counter()
        self.p, self.schedule, self.target, self.fast_math, self.name, self.shift = \
            p, schedule, target, target.fast_math, name, shift
        self._lowered = self._module = self._device_code = None
        # (a GPU target's host code is compiled for target.cpu: "host" keys by this machine's CPU)
        key_target = target.name + (f"#cpu={target.cpu}" if target.is_gpu else "") + ("#shift" if shift else "")
        src_path = source_cache_path(p.source_key, schedule, key_target) if use_cache and p.source_key else None
        self.fn = CompiledFunction.from_object(src_path, name, target.cpu) if src_path is not None else None
        self._device_code_path = src_path.with_suffix(".cuda") if src_path is not None else None
        if self.fn is not None:
            # compiled before from the same sources, schedule, target and compiler
            self.timings = {"lower": 0.0, "llvm": time.perf_counter() - t0, "cached": True}
            return
        from hdsl.codegen.modules import release, split_module
        from hdsl.ir.expr import clear_interned, no_collection
        from hdsl.runtime.jit import compile_jobs, prepare_runtime
        prepare_runtime()           # (a C runtime to build: the C compiler runs while this lowers)
        with no_collection():
            if target.device == "opengl":
                # (what GLSL cannot do, found before anything is compiled or cached)
                from hdsl.codegen.glsl import check_kernels
                from hdsl.lower.lower import choose_schedule
                check_kernels(self.lowered.stmt, p, choose_schedule(p, schedule, target))
            parts = split_module(self.module, compile_jobs())     # lowering and code generation
            if shift:
                from hdsl.lower.loops import check_shifted
                check_shifted(self.lowered.shifted, p, schedule, target)
            if target.device in ("cuda", "opengl"):
                self.device_code     # (the kernels' PTX or IR, while the lowered loop nest is at hand)
            t1 = time.perf_counter()
            # the loop nest, the llvmlite module and the interned expressions are large object
            # graphs (the local Laplacian's: millions of objects) that every later garbage
            # collection would walk: dropped now (the properties rebuild them on demand), and
            # before the collector is back on: its first collection after the pause walks every
            # object made during it that is still alive (0.05-0.09 s for the local Laplacian's
            # lowered nest and module, on every cold compile)
            release(self._module)
            self._lowered = self._module = None
            clear_interned()
        self.fn = CompiledFunction(parts, name, target.cpu, use_cache)
        t2 = time.perf_counter()
        if src_path is not None and self.fn.object_path is not None:
            packed = read_sealed(self.fn.object_path)
            if packed is not None:
                cache_write(src_path, packed)
        self.timings = {"lower": t1 - t0, "llvm": t2 - t1, "cached": self.fn.cached}

    @property
    def lowered(self):
        if self._lowered is None:
            from hdsl.lower.lower import lower
            self._lowered = lower(self.p, self.schedule, self.target, shift_outputs=self.shift)
        return self._lowered

    @property
    def module(self):
        if self._module is None:
            self._module = host_module(self.p, self.lowered.stmt, self.name, self.target, self.lowered.nontemporal)
        return self._module

    @property
    def llvm_ir(self) -> str:
        return str(self.module)

    @property
    def device_code(self):
        """The device code of the variant: the cuda device's PTX module (hdsl/runtime/cuda.py),
        the opengl device's kernels ({name: Kernel}, from the lowered loop nest: lowered again
        after a cached compile; their shaders are made at launch, for the launch's sizes), None
        for other targets."""
        if self._device_code is None and self.target.device == "cuda":
            from hdsl.runtime.cuda import cached_device_code
            self._device_code = cached_device_code(self, self._device_code_path)
        elif self._device_code is None and self.target.device == "opengl":
            from hdsl.lower.gpu import kernels_of
            self._device_code = {lk.kernel.name: lk.kernel for lk in kernels_of(self.lowered.stmt)}
        return self._device_code


def needs_copy(arr: np.ndarray) -> bool:
    """Whether compiled code cannot read `arr` ([x, y, c] order) in place: x not at stride 1,
    or not the machine's byte order."""
    return bool(arr.ndim and arr.shape[0] > 1 and arr.strides[0] != arr.itemsize) or not arr.dtype.isnative


def native_layout(arr: np.ndarray) -> np.ndarray:
    """`arr` ([x, y, c] order) as compiled code reads it: x at stride 1 (as Halide requires by
    default) and the machine's byte order; copied only where needed."""
    x_strided = arr.ndim and arr.shape[0] > 1 and arr.strides[0] != arr.itemsize
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="), order="F" if x_strided else "K")
    if x_strided:
        # interleaved colour or strided views are copied to a planar layout
        arr = np.asfortranarray(arr)
    return arr


class NativePipeline:
    """A compiled pipeline. When the outputs' pure definitions are split, it is compiled with
    their last tiles shifted inwards (Halide's ShiftInwards: every tile whole, so what is
    computed per tile has constant sizes); outputs narrower than a split factor run a second
    form whose last tiles are guarded instead, compiled the first time one is asked for."""

    def __init__(self, p: Pipeline, schedule: str | None = None, target: "str | Target" = "host",
                 use_cache: bool = True):
        from hdsl.lower.loops import shift_requirements
        target = parse_target(target)
        self.p, self.schedule, self.target, self.fast_math = p, schedule, target, target.fast_math
        self.name = "hdsl_" + re.sub(r"\W", "_", p.name)
        self.use_cache = use_cache
        self.requirements = shift_requirements(p, schedule, target)
        # GPU targets: the Device the pipeline's host code calls through its table
        self.device = device_for(target.device) if target.is_gpu else None
        self._device_lock = threading.Lock()
        self.primary = _Variant(p, schedule, target, self.name, use_cache, bool(self.requirements))
        self._guarded = None if self.requirements else self.primary
        self.timings = self.primary.timings
        self.fast = self._fast_call()

    def _fast_call(self):
        """The plan of the fast call path (runtime/fastcall.py), for CPU targets; None for a
        GPU target (its calls hold the device: the general path) or where the process has none."""
        if self.device is not None:
            return None
        from hdsl.runtime.fastcall import fast_call_for
        p = self.p
        params = [(prm.name, prm.type.name,
                   None if prm.default is None else np.array(prm.default).astype(prm.type.dtype).item())
                  for prm in p.params]
        return fast_call_for([(b.name, b.type.dtype, b.dims) for b in p.inputs], params,
                             [(f.name, f.values[0].type.dtype, f.dims) for f in p.outputs],
                             self.primary.fn.address,
                             self._guarded.fn.address if self._guarded is not None else 0, self.requirements)

    @property
    def guarded(self) -> _Variant:
        if self._guarded is None:
            self._guarded = _Variant(self.p, self.schedule, self.target, self.name, self.use_cache, False)
            if self.fast is not None:
                self.fast.set_guarded(self._guarded.fn.address)
        return self._guarded

    def variant(self, sizes) -> _Variant:
        """The shifted form when every shifted output dim is at least its split factor wide."""
        if all(sizes[k][d] >= n for k, d, n in self.requirements):
            return self.primary
        return self.guarded

    @property
    def lowered(self):
        return self.primary.lowered

    @property
    def llvm_ir(self) -> str:
        return self.primary.llvm_ir

    def run(self, inputs: dict[str, np.ndarray], params: dict[str, object], sizes, into=None,
            mins=None) -> list[np.ndarray]:
        """inputs are in [x, y, c] index order; returns outputs in [x, y, c] order (written into
        `into`, [x, y, c] views of caller arrays, when given). mins: each output's first
        coordinates (default zeros)."""
        from hdsl.runtime.jit import make_buffer
        keep = []
        ptrs = []
        for k, b in enumerate(self.p.inputs):
            arr = self._native_layout(k, inputs[b.name], inputs, sizes)
            s = make_buffer(arr)
            keep.append((arr, s))
            ptrs.append(ctypes.addressof(s))
        for prm in self.p.params:
            v = np.array(params[prm.name]).astype(prm.type.dtype if not prm.type.is_bool() else np.uint8)
            cell = np.ascontiguousarray(v.reshape(1))
            keep.append(cell)
            ptrs.append(cell.ctypes.data)
        outs = []
        for k, (f, size) in enumerate(zip(self.p.outputs, sizes)):
            t = f.values[0].type
            if into is not None:
                view = into[k]
                if view.ndim and view.shape[0] > 1 and view.strides[0] != view.itemsize:
                    raise HdslError(f"the array for output '{f.name}' must have stride 1 in x", None,
                                    "use a row-major gray image, or planar colour: "
                                    "np.empty((C, H, W), dtype).transpose(1, 2, 0)")
                s = make_buffer(view, mins[k] if mins else None)
                keep.append((view, s))
                ptrs.append(ctypes.addressof(s))
                outs.append(view)
                continue
            # [x, y, c] with x densest (the generated code writes x with stride 1): a gray
            # image is the user's (H, W) row-major array; colour is planar
            view = np.empty([int(n) for n in size], dtype=t.dtype, order="F")
            s = make_buffer(view, mins[k] if mins else None)
            keep.append((view, s))
            ptrs.append(ctypes.addressof(s))
            outs.append(view)
        variant = self.variant(sizes)
        if self.device is None:
            code, info = variant.fn(ptrs)
        else:
            # GPU pipelines take the device table after the outputs (runtime/device.py). One
            # call at a time per pipeline: the device's allocations, counts and error are the
            # call's own until it ends (release frees what it left on the device)
            with self._device_lock:
                ptrs.append(ctypes.addressof(self.device.table()))
                self.device.error = None
                self.device.launches.clear()      # (this call's launches only: no growth per call)
                try:
                    self.device.use(variant.device_code)
                    code, info = variant.fn(ptrs)
                finally:
                    self.device.release()
                error = self.device.error
            if code == ERR_DEVICE and isinstance(error, HdslError):
                raise error         # (the device's own message: a shader it cannot make)
            if code == ERR_DEVICE:
                raise HdslError(f"the {self.target.device} device failed: {error}", None)
        if code != 0:
            raise self.error(code, info, inputs, sizes, mins, params)
        return outs

    def _native_layout(self, k: int, arr: np.ndarray, inputs, sizes) -> np.ndarray:
        """Input k as the generated code reads it: x with stride 1 (as Halide requires by
        default) and the machine's byte order; copied only where needed, after the check
        that the copy can be addressed at all (a broadcast view may be tiny in memory but
        huge once copied)."""
        if needs_copy(arr) and arr.size > 2 ** 31 - 1:
            raise self.error(ERR_BUFFER_TOO_LARGE, (k, arr.size), inputs, sizes)
        return native_layout(arr)

    def bound_error(self, info, inputs, params) -> HdslError:
        """info: the Func (its index in topological order), the dim, the region needed."""
        from hdsl.interp.evaluate import Evaluator
        from hdsl.ir.func import topo_order
        from hdsl.lower.lower import choose_schedule
        funcs = topo_order(self.p.outputs)
        sched = choose_schedule(self.p, self.schedule, self.target)
        if sched is not None and 0 <= info[0] < len(funcs) and 0 <= info[1] < funcs[info[0]].dims:
            f = funcs[info[0]]
            var = f.args[info[1]]
            for d in sched.for_func(f):
                if d.name == "bound" and d.args[0] == var:
                    ev = Evaluator(self.p, inputs, params)
                    return bound_too_small(f.name, var, info[2], info[3], ev.scalar_value(d.args[1]),
                                           ev.scalar_value(d.args[2]), d.span)
                if d.name == "tile_iir" and len(d.args) == 4 and var in d.args[:2]:
                    # the joint tiling computes f on its filters' ranges only (lower/tile_iir2d.py)
                    u = next(u for u in f.updates if u.iir is not None and u.iir[0] == info[1])
                    ev = Evaluator(self.p, inputs, params)
                    lo, hi = ev.scalar_value(u.iir[2]), ev.scalar_value(u.iir[3])
                    return HdslError(f"'{f.name}' is needed at {var} = {info[2]} .. {info[3]}, but "
                                     f"tile_iir({', '.join(map(str, d.args))}) computes it on its filters' "
                                     f"range only, {var} = {lo} .. {hi - 1}", d.span,
                                     f"read '{f.name}' inside its filters' ranges (clamp the coordinates), or "
                                     f"tile each dim on its own: tile_iir({d.args[0]}, {d.args[2]})"
                                     f".tile_iir({d.args[1]}, {d.args[3]})")
        return HdslError("a bound() directive is smaller than the region the pipeline needs", None,
                         "widen the bound, or shrink the output")

    def _func_at(self, index: int):
        """The Func at `index` in topological order (how the compiled code's error info names
        one), or None for an index out of range; and the schedule the code was compiled with."""
        from hdsl.ir.func import topo_order
        from hdsl.lower.lower import choose_schedule
        funcs = topo_order(self.p.outputs)
        return (funcs[index] if 0 <= index < len(funcs) else None), choose_schedule(self.p, self.schedule, self.target)

    def shared_memory_error(self, info) -> HdslError:
        """info: the Func in shared memory (its index in topological order), the bytes, the limit."""
        from hdsl.lower.gpu import shared_memory_error
        f, sched = self._func_at(info[0])
        return shared_memory_error(f.name if f else "a Func", int(info[1]), int(info[2]), self.target, sched,
                                   at_run_time=True)

    def error(self, code: int, info, inputs, sizes, mins=None, params=None) -> HdslError:
        if code == ERR_INPUT_BOUNDS:
            b = self.p.inputs[info[0]]
            d = info[1]
            ext = inputs[b.name].shape[d]
            return HdslError(f"input '{b.name}' is read at {_dim(d)} = {info[2]} .. {info[3]}, but the buffer "
                             f"covers {_dim(d)} = 0 .. {ext - 1}", None,
                             "shrink the output, or wrap the input in a boundary condition:\n"
                             f"`use boundary` and `clamped = repeat_edge({b.name})`")
        if code == ERR_OUTPUT_BOUNDS:
            f = self.p.outputs[info[0]]
            d = info[1]
            lo = mins[info[0]][d] if mins else 0
            return output_written_outside(f.name, d, info[2], info[3], lo, lo + sizes[info[0]][d] - 1)
        if code == ERR_BOUND_DIRECTIVE:
            return self.bound_error(info, inputs, params)
        if code == ERR_SHARED_MEMORY:
            return self.shared_memory_error(info)
        if code == ERR_BLOCK_THREADS:
            from hdsl.lower.gpu import block_threads_error
            f, sched = self._func_at(info[0])
            return block_threads_error(f.name if f else "a Func", int(info[1]), sched)
        if code == ERR_GRID_LIMIT:
            from hdsl.lower.gpu import grid_limit_error
            f, sched = self._func_at(info[0])
            return grid_limit_error(f.name if f else "a Func", int(info[1]), int(info[2]), int(info[3]), sched,
                                    at_run_time=True)
        if code == ERR_OUT_OF_MEMORY:
            return HdslError("out of memory", None)
        if code == ERR_BUFFER_TOO_LARGE:
            names = [b.name for b in self.p.inputs] + [f.name for f in self.p.outputs]
            # (code inside a parallel loop leaves info unset: zeros, and no buffer spans 0)
            known = info[1] != 0
            what = f"buffer '{names[info[0]]}'" if known and 0 <= info[0] < len(names) else "an intermediate buffer"
            count = f"{info[1]}" if known and info[1] > 0 else "2^31 or more"  # (or an extent that overflowed i32)
            return HdslError(f"{what} spans {count} elements; hdsl addresses buffers with 32-bit offsets "
                             f"(at most 2^31 - 1 = 2147483647 elements, as Halide)", None,
                             "process the image in pieces (a smaller output per call)")
        if code == ERR_FOLD_TOO_SMALL:
            return self.fold_error(info)
        if code == ERR_FLOAT_COORDINATE:
            given = ", ".join(f"{k} = {v}" for k, v in (params or {}).items())
            return HdslError("a coordinate computed through float arithmetic (an i32(...) of a float "
                             "value) may be NaN, infinite or beyond +-2^30 with these params"
                             + (f" ({given})" if given else "") + ", so the region it reads or writes "
                             "has no bound", None,
                             "give the params values that keep the coordinate finite and small, or "
                             "clamp the coordinate into a fixed range")
        return HdslError(f"the compiled pipeline failed with error code {code}", None)

    def fold_error(self, info) -> HdslError:
        """A fold_storage(v, n) smaller than the slices its Func holds at once (info: the Func's
        index in topological order, the dim, the window; zeros from inside a parallel loop)."""
        from hdsl.ir.func import topo_order
        f, sched = self._func_at(info[0])
        folds = [(g, d) for g in topo_order(self.p.outputs) for d in (sched.for_func(g) if sched else [])
                 if d.name == "fold_storage"]
        if info[2] > 0 and f is not None:
            for g, d in folds:
                if g is f:
                    return HdslError(f"fold_storage({d.args[0]}, {d.args[1]}) is too small: '{f.name}' holds "
                                     f"{info[2]} slices along {d.args[0]} at once here", d.span,
                                     f"fold_storage({d.args[0]}, {info[2]}) or more, or no fold_storage")
        d = folds[0][1] if folds else None
        return HdslError("a fold_storage() directive is too small: its Func holds more slices at once than the fold keeps", d.span if d else None,
                         "raise its factor, or drop fold_storage")
