"""The reference evaluator: realize a pipeline's outputs with NumPy.

Each Func is computed over the whole region its consumers need (found by
`hdsl.ir.bounds`), one array operation per expression node. Update
definitions run in order; an update over an rdom is vectorized over all its
points when no point can see another's write, and otherwise steps through
the rdom in lexicographic order (r.x innermost), vectorized over pure vars.
Schedules are ignored: this is the meaning every schedule must reproduce.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from hdsl.diagnostics import HdslError, InternalError
from hdsl.interp.scalar import binop_values, cast_values, intrinsic_values, unary_values
from hdsl.ir.bounds import BoundsEnv, interval
from hdsl.ir.expr import (BinOp, BufferProp, Cast, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar,
                          Select, Unary, Var, walk)
from hdsl.ir.func import Func, Pipeline, Update, calls_in, topo_order

MAX_REGION = 1 << 28
DIM_NAMES = "xyc"


def dim_name(i: int) -> str:
    return DIM_NAMES[i] if i < 3 else f"dim {i}"


class Realization:
    def __init__(self, mins: list[int], extents: list[int], arrays: list[np.ndarray]):
        self.mins, self.extents, self.arrays = mins, extents, arrays


class Evaluator:
    def __init__(self, pipeline: Pipeline, inputs: dict[str, np.ndarray], params: dict[str, object],
                 out=None):
        self.p = pipeline
        self.out = out or sys.stdout
        self.buffers: dict[int, np.ndarray] = {}     # id(InputBuffer) -> array indexed [x, y, c, ...]
        for b in pipeline.inputs:
            self.buffers[id(b)] = inputs[b.name]
        self.params = params
        self.realized: dict[int, Realization] = {}

    # ---------------------------------------------------------------- scalars
    def scalar(self, e: Expr):
        if isinstance(e, Param):
            return self.params[e.name]
        if isinstance(e, BufferProp):
            arr = self.buffers[id(e.buffer)]
            return 0 if e.what == "min" else arr.shape[e.dim]
        return None

    def scalar_value(self, e: Expr) -> int:
        v = self.eval(e, {}, {}, None)
        return int(np.asarray(v).reshape(-1)[0]) if np.asarray(v).size else 0

    # ---------------------------------------------------------------- bounds inference
    def infer_regions(self, boxes: dict[int, list[list[int]]]):
        order = topo_order(self.p.outputs)
        self.order = order
        need_inputs: dict[int, list[list[float]]] = {}
        for f in reversed(order):
            box = boxes.get(id(f))
            if box is None:
                raise InternalError(f"no region for {f.name}")
            self._extend_with_updates(f, box)
            self._check_finite(f, box)
            for stage_env, exprs in self._stages(f, box):
                cache: dict = {}
                for c in calls_in(exprs):
                    if isinstance(c, FuncCall) and c.func is f:
                        continue
                    iv = [interval(a, stage_env, cache) for a in c.args]
                    if isinstance(c, FuncCall):
                        target = boxes.setdefault(id(c.func), [[math.inf, -math.inf] for _ in c.args])
                    else:
                        target = need_inputs.setdefault(id(c.buffer), [[math.inf, -math.inf] for _ in c.args])
                    for d, (lo, hi) in enumerate(iv):
                        target[d][0] = min(target[d][0], lo)
                        target[d][1] = max(target[d][1], hi)
        self.boxes = boxes
        self._check_inputs(need_inputs)

    def _rdom_ranges(self, u: Update):
        if u.rdom is None:
            return []
        return [(self.scalar_value(lo), self.scalar_value(ext)) for lo, ext in u.rdom.bounds]

    def _stages(self, f: Func, box):
        env = BoundsEnv({a: tuple(box[i]) for i, a in enumerate(f.args)}, {}, self.scalar)
        yield env, list(f.values)
        for u in f.updates:
            env = BoundsEnv({}, {}, self.scalar)
            for i, a in enumerate(u.args):
                if isinstance(a, Var):
                    env.vars[a.name] = tuple(box[i])
            ranges = self._rdom_ranges(u)
            if any(ext <= 0 for _, ext in ranges):
                continue
            for k, (lo, ext) in enumerate(ranges):
                env.rvars[(id(u.rdom), k)] = (lo, lo + ext - 1)
            exprs = u.args + u.values + ([u.rdom.predicate] if u.rdom and u.rdom.predicate is not None else [])
            yield env, exprs

    def _extend_with_updates(self, f: Func, box):
        for _ in range(2):      # the LHS footprint can widen the pure ranges the self-reads use
            for env, exprs in list(self._stages(f, box))[1:]:
                cache: dict = {}
                u_args = exprs[:f.dims]
                spots = [u_args] + [c.args for c in calls_in(exprs) if isinstance(c, FuncCall) and c.func is f]
                for args in spots:
                    for d, a in enumerate(args):
                        lo, hi = interval(a, env, cache)
                        box[d][0] = min(box[d][0], lo)
                        box[d][1] = max(box[d][1], hi)

    def _check_finite(self, f: Func, box):
        size = 1
        for d, (lo, hi) in enumerate(box):
            if math.isinf(lo) or math.isinf(hi):
                raise HdslError(f"cannot tell which part of '{f.name}' is needed: its {dim_name(d)} "
                                f"coordinate is unbounded", f.span,
                                "clamp data-dependent coordinates, e.g. f(clamp(i32(v), 0, 255))")
            size *= max(0, int(hi) - int(lo) + 1)
        if size > MAX_REGION:
            raise HdslError(f"'{f.name}' would need {size} points, more than the evaluator's limit", f.span,
                            "clamp data-dependent coordinates to a small range")

    def _check_inputs(self, need):
        for b in self.p.inputs:
            region = need.get(id(b))
            if region is None:
                continue
            arr = self.buffers[id(b)]
            for d, (lo, hi) in enumerate(region):
                if lo > hi:
                    continue
                ext = arr.shape[d]
                if math.isinf(lo) or math.isinf(hi) or lo < 0 or hi > ext - 1:
                    lo_s = "-inf" if math.isinf(lo) else str(int(lo))
                    hi_s = "inf" if math.isinf(hi) else str(int(hi))
                    n = dim_name(d)
                    raise HdslError(
                        f"input '{b.name}' is read at {n} = {lo_s} .. {hi_s}, but the buffer covers "
                        f"{n} = 0 .. {ext - 1}", None,
                        "shrink the output, or wrap the input in a boundary condition:\n"
                        f"`use boundary` and `clamped = repeat_edge({b.name})`")

    # ---------------------------------------------------------------- realization
    def run(self, boxes) -> list[Realization]:
        self.infer_regions(boxes)
        for f in self.order:
            self.realize_func(f)
        return [self.realized[id(f)] for f in self.p.outputs]

    def realize_func(self, f: Func):
        box = self.boxes[id(f)]
        mins = [int(lo) for lo, _ in box]
        extents = [max(0, int(hi) - int(lo) + 1) for lo, hi in box]
        shape = tuple(extents)
        var_arrays = {a: self._axis(mins[i], extents[i], i, len(shape)) for i, a in enumerate(f.args)}
        arrays = []
        for v in f.values:
            val = self.eval(v, var_arrays, {}, None)
            arrays.append(np.array(np.broadcast_to(np.asarray(val, dtype=v.type.dtype), shape)))
        r = Realization(mins, extents, arrays)
        self.realized[id(f)] = r
        for u in f.updates:
            self.run_update(f, u, r)

    @staticmethod
    def _axis(lo: int, ext: int, axis: int, ndim: int) -> np.ndarray:
        shape = [1] * ndim
        shape[axis] = ext
        return np.arange(lo, lo + ext, dtype=np.int32).reshape(shape)

    def run_update(self, f: Func, u: Update, r: Realization):
        ranges = self._rdom_ranges(u)
        if any(ext <= 0 for _, ext in ranges):
            return
        pure = [(i, a.name) for i, a in enumerate(u.args) if isinstance(a, Var)]
        k = len(ranges)
        reads_elsewhere = False
        for e in u.values + u.args + ([u.rdom.predicate] if u.rdom and u.rdom.predicate is not None else []):
            for c in walk(e):
                if isinstance(c, FuncCall) and c.func is f and not _same_args(c.args, u.args):
                    reads_elsewhere = True
        if any(isinstance(c, FuncCall) and c.func is f for a in u.args for c in walk(a)):
            reads_elsewhere = True
        if not reads_elsewhere and k > 0:
            if self._update_step(f, u, r, pure, ranges, fixed={}, all_at_once=True):
                return
        # sequential over the rdom, r.x innermost
        if k == 0:
            self._update_step(f, u, r, pure, ranges, fixed={}, all_at_once=False)
            return
        for point in np.ndindex(*[ext for _, ext in reversed(ranges)]):
            fixed = {k - 1 - j: ranges[k - 1 - j][0] + p for j, p in enumerate(point)}
            self._update_step(f, u, r, pure, ranges, fixed=fixed, all_at_once=False)

    def _update_step(self, f, u, r, pure, ranges, fixed, all_at_once) -> bool:
        """Evaluate the update at all pure points and the rdom points given; False if it can't be vectorized."""
        nd = f.dims
        k = len(ranges)
        vec_dims = [d for d in range(k) if d not in fixed]
        # axes: pure dims of f, then rdom dims outermost first (so C order is r.x fastest)
        n_axes = nd + len(vec_dims)
        var_arrays = {}
        for i, name in pure:
            var_arrays[name] = self._axis(r.mins[i], r.extents[i], i, n_axes)
        rvars = {}
        for d in range(k):
            if d in fixed:
                rvars[(id(u.rdom), d)] = np.array(fixed[d], dtype=np.int32)
            else:
                axis = nd + (len(vec_dims) - 1 - vec_dims.index(d))
                rvars[(id(u.rdom), d)] = self._axis(ranges[d][0], ranges[d][1], axis, n_axes)
        shape = [1] * n_axes
        for i, _ in pure:
            shape[i] = r.extents[i]
        for d in vec_dims:
            shape[nd + (len(vec_dims) - 1 - vec_dims.index(d))] = ranges[d][1]
        shape = tuple(shape)
        cache: dict = {}
        coords = [np.broadcast_to(np.asarray(self.eval(a, var_arrays, rvars, cache), dtype=np.int64), shape)
                  for a in u.args]
        mask = None
        if u.rdom is not None and u.rdom.predicate is not None:
            mask = np.broadcast_to(np.asarray(self.eval(u.rdom.predicate, var_arrays, rvars, cache), dtype=bool), shape)
        idx = []
        for d, c in enumerate(coords):
            ci = c - r.mins[d]
            sel = ci if mask is None else ci[mask]
            if sel.size and (sel.min() < 0 or sel.max() >= r.extents[d]):
                raise InternalError(f"update of {f.name} writes outside its region in dim {d}")
            idx.append(sel.reshape(-1) if mask is not None else ci.reshape(-1))
        if all_at_once:
            flat = np.ravel_multi_index(tuple(idx), tuple(r.extents)) if idx else np.zeros(1, np.int64)
            if len(np.unique(flat)) != flat.size:
                return self._reduction_scatter(f, u, r, var_arrays, rvars, cache, shape, mask, idx)
        values = [np.broadcast_to(np.asarray(self.eval(v, var_arrays, rvars, cache), dtype=v.type.dtype), shape)
                  for v in u.values]
        for arr, val in zip(r.arrays, values):
            src = val if mask is None else val[mask]
            arr[tuple(idx)] = src.reshape(-1)
        return True

    def _reduction_scatter(self, f, u, r, var_arrays, rvars, cache, shape, mask, idx) -> bool:
        """`f(L) = f(L) op e` with colliding L: apply op in rdom order (np.ufunc.at is sequential)."""
        ufuncs = {"+": np.add, "*": np.multiply, "min": np.minimum, "max": np.maximum}
        plans = []
        for k, v in enumerate(u.values):
            if not (isinstance(v, BinOp) and v.op in ufuncs and isinstance(v.a, FuncCall) and v.a.func is f
                    and v.a.index == k and _same_args(v.a.args, u.args)):
                return False
            if any(isinstance(c, FuncCall) and c.func is f for c in walk(v.b)):
                return False
            if v.op == "*" and v.type.is_bool():
                return False
            plans.append((ufuncs[v.op], v.b))
        for arr, (ufunc, e) in zip(r.arrays, plans):
            val = np.broadcast_to(np.asarray(self.eval(e, var_arrays, rvars, cache), dtype=arr.dtype), shape)
            src = val if mask is None else val[mask]
            with np.errstate(all="ignore"):
                ufunc.at(arr, tuple(idx), src.reshape(-1))
        return True

    # ---------------------------------------------------------------- expressions
    def eval(self, e: Expr, var_arrays, rvars, cache):
        if cache is None:
            cache = {}
        key = id(e)
        hit = cache.get(key)
        if hit is not None:
            return hit[1]
        v = self._eval(e, var_arrays, rvars, cache)
        cache[key] = (e, v)
        return v

    def _eval(self, e: Expr, var_arrays, rvars, cache):
        t = e.type
        if isinstance(e, Const):
            return np.array(e.value, dtype=t.dtype) if not t.is_float() else np.array(e.value).astype(t.dtype)
        if isinstance(e, Var):
            v = var_arrays.get(e.name)
            if v is None:
                raise InternalError(f"unbound var {e.name}")
            return v
        if isinstance(e, RVar):
            return rvars[(id(e.rdom), e.index)]
        if isinstance(e, Param):
            return np.array(self.params[e.name]).astype(t.dtype)
        if isinstance(e, BufferProp):
            return np.array(self.scalar(e), dtype=np.int32)
        if isinstance(e, Cast):
            return cast_values(t, self.eval(e.value, var_arrays, rvars, cache), e.value.type, e.saturate)
        if isinstance(e, BinOp):
            a = self.eval(e.a, var_arrays, rvars, cache)
            b = self.eval(e.b, var_arrays, rvars, cache)
            return binop_values(e.op, a, b, e.a.type)
        if isinstance(e, Unary):
            return unary_values(e.op, self.eval(e.a, var_arrays, rvars, cache), t)
        if isinstance(e, Select):
            c = self.eval(e.cond, var_arrays, rvars, cache)
            return np.where(c, self.eval(e.t, var_arrays, rvars, cache), self.eval(e.f, var_arrays, rvars, cache))
        if isinstance(e, FuncCall):
            r = self.realized[id(e.func)]
            return self._gather(r.arrays[e.index], r.mins, e, var_arrays, rvars, cache, e.func.name)
        if isinstance(e, InputCall):
            arr = self.buffers[id(e.buffer)]
            return self._gather(arr, [0] * arr.ndim, e, var_arrays, rvars, cache, e.buffer.name)
        if isinstance(e, Intrinsic):
            args = [self.eval(a, var_arrays, rvars, cache) for a in e.args]
            if e.name == "print":
                self._print(e, args)
                return args[0]
            return intrinsic_values(e.name, args, [a.type for a in e.args], t)
        raise InternalError(f"cannot evaluate {type(e).__name__}")

    def _gather(self, arr, mins, e, var_arrays, rvars, cache, name):
        coords = [np.asarray(self.eval(a, var_arrays, rvars, cache)).astype(np.int64) for a in e.args]
        idx = []
        for d, c in enumerate(coords):
            ci = c - mins[d]
            if ci.size and (ci.min() < 0 or ci.max() >= arr.shape[d]):
                raise InternalError(f"read of {name} outside its computed region in dim {d}: "
                                    f"{ci.min() + mins[d]}..{ci.max() + mins[d]} vs {mins[d]}..{mins[d] + arr.shape[d] - 1}")
            idx.append(ci)
        if not idx:
            return arr[()]
        return arr[tuple(idx)]

    def _print(self, e: Intrinsic, args):
        shape = np.broadcast_shapes(*[np.shape(a) for a in args])
        flat = [np.broadcast_to(a, shape).reshape(-1) for a in args]
        pieces = list(e.extra)
        for i in range(flat[0].size if flat else 0):
            parts = [_fmt(flat[0][i])]
            j = 1
            for p in pieces:
                if p is None:
                    parts.append(_fmt(flat[j][i]))
                    j += 1
                else:
                    parts.append(p)
            print(" ".join(parts), file=self.out)


def _fmt(v) -> str:
    if isinstance(v, (np.floating, float)):
        return f"{float(v):g}"
    if isinstance(v, (np.bool_, bool)):
        return "true" if v else "false"
    return str(int(v))


def _same_args(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if isinstance(x, Var) and isinstance(y, Var) and x.name == y.name:
            continue
        if isinstance(x, RVar) and isinstance(y, RVar) and x.rdom is y.rdom and x.index == y.index:
            continue
        return False
    return True


def realize(pipeline: Pipeline, inputs: dict[str, np.ndarray], params: dict[str, object],
            boxes: list[list[tuple[int, int]]], out=None) -> list[list[np.ndarray]]:
    """Realize every output over its box [(min, extent) per dim]; arrays are indexed [x, y, ...]."""
    ev = Evaluator(pipeline, inputs, params, out)
    init = {}
    for f, box in zip(pipeline.outputs, boxes):
        init[id(f)] = [[lo, lo + ext - 1] for lo, ext in box]
    for f, box in zip(pipeline.outputs, boxes):
        if any(ext <= 0 for _, ext in box):
            raise HdslError(f"output '{f.name}' has an empty size", None, "every extent must be positive")
    with np.errstate(all="ignore"):
        results = ev.run(init)
    out_arrays = []
    for f, r, box in zip(pipeline.outputs, results, boxes):
        sl = tuple(slice(lo - m, lo - m + ext) for (lo, ext), m in zip(box, r.mins))
        out_arrays.append([a[sl] for a in r.arrays])
    return out_arrays


