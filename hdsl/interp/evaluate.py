"""The reference evaluator: realize a pipeline's outputs with NumPy.

Each Func is computed over the whole region its consumers need (found by
`hdsl.ir.bounds`), one array operation per expression node. Update
definitions run in order; an update over an rdom is vectorized over all its
points when no point can see another's write, and otherwise steps through
the rdom in lexicographic order (r.x innermost), vectorized over pure vars.
Schedules are ignored: this is the meaning every schedule must reproduce.

Decisions where the spec is silent (Halide's behaviour, checked against it):
- An rdom's `where` conditions of the form `r.k (+ c) OP e` (OP one of
  < <= > >= ==, e of known range) shrink the rdom's box for both bounds
  inference and iteration, as Halide trims loops by the if-condition a
  predicate becomes: `rdom r = [0..20] where r.x < img.width` never reads
  img outside the buffer. `select` does not trim: both sides are needed.
- `print` writes one line per point evaluated, the values separated by
  spaces, in Halide's serial order (first pure var innermost; in updates the
  rvars inside the pure vars, r.x innermost); f32 prints with six decimals
  (`1.500000`), f64 in scientific notation (`1.500000e+00`), bool as
  true/false.
- rdom bounds may read inputs but not Funcs; a Func that reads itself
  through another Func (an update reading a Func that reads it) is an error
  (the checker's, for every target).
- `bound(v, min, extent)` is the one directive with a meaning of its own: the
  Func is computed over exactly that range, and a consumer (or the caller, for
  an output) needing more of it is an error, as in native code and Halide.
- An output whose updates write (or whose consumers read) outside the region
  asked for is an error, as in native code: nothing is silently dropped.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from hdsl.diagnostics import HdslError, InternalError, bound_too_small, output_written_outside
from hdsl.interp.scalar import binop_values, cast_values, intrinsic_values, unary_values
from hdsl.ir.bounds import BoundsEnv, interval, narrow_by_predicate
from hdsl.ir.expr import (BinOp, BufferProp, Cast, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar,
                          Select, Unary, Var, walk)
from hdsl.ir.func import Func, Pipeline, Update, callees, calls_in, pure_positions, topo_order

MAX_REGION = 1 << 28
DIM_NAMES = "xyc"


def dim_name(i: int) -> str:
    return DIM_NAMES[i] if i < 3 else f"dim {i}"


class Realization:
    def __init__(self, mins: list[int], extents: list[int], arrays: list[np.ndarray]):
        self.mins, self.extents, self.arrays = mins, extents, arrays


class Evaluator:
    def __init__(self, pipeline: Pipeline, inputs: dict[str, np.ndarray], params: dict[str, object],
                 out=None, schedule=None):
        self.p = pipeline
        # bound() directives of the chosen schedule, by Func name (inlining copies Funcs)
        self.bounds: dict[str, list] = {}
        if schedule is not None:
            for fid, ds in schedule.directives.items():
                name = schedule.funcs[fid].name
                self.bounds[name] = [d for d in ds if d.name == "bound"]
        self.out = out or sys.stdout
        self.buffers: dict[int, np.ndarray] = {}     # id(InputBuffer) -> array indexed [x, y, c, ...]
        for b in pipeline.inputs:
            self.buffers[id(b)] = inputs[b.name]
        self.params = params
        self.realized: dict[int, Realization] = {}
        self._ranges: dict[int, list[tuple[int, int]]] = {}     # id(RDom) -> [(min, extent)]

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
        self._check_acyclic(order)
        need_inputs: dict[int, list[list[float]]] = {}
        for f in reversed(order):
            box = boxes.get(id(f))
            if box is None:
                # read only where nothing is evaluated (an update over an empty rdom): none of
                # it is needed, and so nothing it reads
                boxes[id(f)] = [[0, -1] for _ in f.args]
                continue
            self._apply_bounds(f, box)
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
        self.need_inputs = need_inputs
        self._check_inputs(need_inputs)

    @staticmethod
    def _check_acyclic(order: list[Func]):
        """A call reads a Func's final value, so no Func may depend on itself through others
        (the checker reports it: hdsl/frontend/elaborate.py check_acyclic)."""
        pos = {id(f): i for i, f in enumerate(order)}
        for i, f in enumerate(order):
            for g in callees(f):
                if pos[id(g)] >= i:
                    raise InternalError(f"'{f.name}' and '{g.name}' depend on each other")

    def _rdom_ranges(self, u: Update):
        if u.rdom is None:
            return []
        key = id(u.rdom)
        cached = self._ranges.get(key)
        if cached is None:
            self._check_rdom_bounds(u.rdom)
            cached = [(self.scalar_value(lo), self.scalar_value(ext)) for lo, ext in u.rdom.bounds]
            if u.rdom.predicate is not None and all(ext > 0 for _, ext in cached):
                # points outside the box the predicate's simple conditions allow never pass it:
                # neither bounds inference nor the update visits them (Halide's if-condition trimming)
                env = BoundsEnv({}, {(key, k): (lo, lo + ext - 1) for k, (lo, ext) in enumerate(cached)},
                                self.scalar)
                narrow_by_predicate(u.rdom.predicate, env)
                cached = [(int(lo), int(hi) - int(lo) + 1)
                          for lo, hi in (env.rvars[(key, k)] for k in range(len(cached)))]
            self._ranges[key] = cached
        return cached

    def _check_rdom_bounds(self, rdom):
        """An rdom's bounds are needed before anything is computed: they may use
        params, buffer properties and reads of inputs, but not Funcs."""
        for lo, ext in rdom.bounds:
            for c in calls_in([lo, ext]):
                if isinstance(c, FuncCall):
                    raise HdslError(f"the bounds of rdom '{rdom.name}' read Func '{c.func.name}'", rdom.span,
                                    "rdom bounds may use constants, params, buffer properties and inputs")
                arr = self.buffers[id(c.buffer)]
                for d, a in enumerate(c.args):
                    v = self.scalar_value(a)
                    if not 0 <= v < arr.shape[d]:
                        n = dim_name(d)
                        raise HdslError(f"input '{c.buffer.name}' is read at {n} = {v} .. {v} (in the bounds of "
                                        f"rdom '{rdom.name}'), but the buffer covers {n} = 0 .. {arr.shape[d] - 1}",
                                        rdom.span)

    def _stages(self, f: Func, box):
        env = BoundsEnv({a: tuple(box[i]) for i, a in enumerate(f.args)}, {}, self.scalar)
        yield env, list(f.values)
        for u in f.updates:
            env = BoundsEnv({}, {}, self.scalar)
            for i, a in pure_positions(f, u):
                env.vars[a] = tuple(box[i])
            ranges = self._rdom_ranges(u)
            if any(ext <= 0 for _, ext in ranges):
                continue
            for k, (lo, ext) in enumerate(ranges):
                env.rvars[(id(u.rdom), k)] = (lo, lo + ext - 1)
            exprs = u.args + u.values + ([u.rdom.predicate] if u.rdom and u.rdom.predicate is not None else [])
            yield env, exprs

    def _apply_bounds(self, f: Func, box):
        """bound(v, min, extent): the region needed must lie within it, and is then exactly it."""
        for d in self.bounds.get(f.name, ()):
            var = d.args[0]
            k = f.args.index(var)
            lo, ext = self.scalar_value(d.args[1]), self.scalar_value(d.args[2])
            need_lo, need_hi = box[k]
            if math.isinf(need_lo) or math.isinf(need_hi):
                continue        # (unbounded: reported as such below)
            if need_lo <= need_hi and (need_lo < lo or need_hi > lo + ext - 1):
                raise bound_too_small(f.name, var, int(need_lo), int(need_hi), lo, ext, d.span)
            box[k] = [lo, lo + ext - 1]

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
                if not f.updates and f not in self.p.outputs:
                    raise _TooLarge(f)
                raise HdslError(f"cannot tell which part of '{f.name}' is needed: its {dim_name(d)} "
                                f"coordinate is unbounded", f.span,
                                "clamp data-dependent coordinates, e.g. f(clamp(i32(v), 0, 255))")
            size *= max(0, int(hi) - int(lo) + 1)
        if size > MAX_REGION:
            if not f.updates and f not in self.p.outputs:
                raise _TooLarge(f)
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
        if any(lo > hi for lo, hi in box):
            # an empty region: nothing to compute (nor to print)
            shape = tuple(0 for _ in box)
            self.realized[id(f)] = Realization([0] * len(box), list(shape),
                                               [np.empty(shape, v.type.dtype) for v in f.values])
            return
        mins = [int(lo) for lo, _ in box]
        extents = [max(0, int(hi) - int(lo) + 1) for lo, hi in box]
        shape = tuple(extents)
        var_arrays = {a: self._axis(mins[i], extents[i], i, len(shape)) for i, a in enumerate(f.args)}
        # print's order: Halide's default loop nest, the first pure var innermost
        self._print_iter = (shape, tuple(reversed(range(len(shape)))))
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
        pure = pure_positions(f, u)
        k = len(ranges)
        reads_elsewhere = False
        for e in u.values + u.args + ([u.rdom.predicate] if u.rdom and u.rdom.predicate is not None else []):
            for c in walk(e):
                if isinstance(c, FuncCall) and c.func is f and not _same_args(c.args, u.args):
                    reads_elsewhere = True
        if any(isinstance(c, FuncCall) and c.func is f for a in u.args for c in walk(a)):
            reads_elsewhere = True
        if k == 0:
            self._update_step(f, u, r, pure, ranges, fixed={}, all_at_once=False)
            return
        points = math.prod(ext for _, ext in ranges)
        if points > MAX_REGION:
            raise HdslError(f"rdom '{u.rdom.name}' has {points} points, more than the evaluator's limit "
                            f"({MAX_REGION})", u.rdom.span or u.span, "run it natively (a target other than interp)")
        if not reads_elsewhere:
            # vectorized over as many inner rdom dims as keep each step's arrays (the pure region
            # times those points) within MAX_REGION; the outer dims are stepped through in order
            width = math.prod(r.extents[i] for i, _ in pure)
            inner = 0
            while inner < k and width * ranges[inner][1] <= MAX_REGION:
                width *= ranges[inner][1]
                inner += 1
            for point in np.ndindex(*[ext for _, ext in reversed(ranges[inner:])]):
                fixed = {k - 1 - j: ranges[k - 1 - j][0] + p for j, p in enumerate(point)}
                if not self._update_step(f, u, r, pure, ranges, fixed=fixed, all_at_once=True):
                    self._step_through(f, u, r, pure, ranges, fixed, inner)
            return
        self._step_through(f, u, r, pure, ranges, {}, k)

    def _step_through(self, f, u, r, pure, ranges, fixed, upto):
        """Sequential over rdom dims 0 .. upto - 1 (r.x innermost), the others fixed."""
        for point in np.ndindex(*[ext for _, ext in reversed(ranges[:upto])]):
            inner = {upto - 1 - j: ranges[upto - 1 - j][0] + p for j, p in enumerate(point)}
            self._update_step(f, u, r, pure, ranges, fixed={**fixed, **inner}, all_at_once=False)

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
        # print's order: pure vars outside the rvars (r.x innermost), as in Halide's default update loops
        self._print_iter = (shape, tuple(reversed(range(nd))) + tuple(range(nd, n_axes)))
        cache: dict = {}
        coords = [np.broadcast_to(np.asarray(self.eval(a, var_arrays, rvars, cache), dtype=np.int64), shape)
                  for a in u.args]
        mask = None
        if u.rdom is not None and u.rdom.predicate is not None:
            mask = np.broadcast_to(np.asarray(self.eval(u.rdom.predicate, var_arrays, rvars, cache), dtype=bool), shape)
        if mask is not None and not mask.any():
            return True         # no point of this step passes the rdom's predicate
        idx = []
        for d, c in enumerate(coords):
            ci = c - r.mins[d]
            sel = ci if mask is None else ci[mask]
            if sel.size and (sel.min() < 0 or sel.max() >= r.extents[d]):
                raise InternalError(f"update of {f.name} writes outside its region in dim {d}")
            idx.append(sel.reshape(-1) if mask is not None else ci.reshape(-1))
        if all_at_once:
            # a 0-dimensional Func: every rdom point writes its one element
            npoints = int(np.prod(shape)) if mask is None else int(np.count_nonzero(mask))
            flat = np.ravel_multi_index(tuple(idx), tuple(r.extents)) if idx else np.zeros(npoints, np.int64)
            if len(np.unique(flat)) != flat.size:
                return self._reduction_scatter(f, u, r, var_arrays, rvars, cache, shape, mask, idx)
        values = [np.broadcast_to(np.asarray(self.eval(v, var_arrays, rvars, cache), dtype=v.type.dtype), shape)
                  for v in u.values]
        for arr, val in zip(r.arrays, values):
            src = (val if mask is None else val[mask]).reshape(-1)
            if idx:
                arr[tuple(idx)] = src
            elif src.size:      # a 0-dimensional Func: the last point written wins
                arr[()] = src[-1]
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
            if v.op in ("min", "max") and v.type.is_float():
                # np.maximum/minimum propagate NaN; Halide's max(a, b) is
                # select(a > b, a, b): step through the rdom instead
                return False
            plans.append((ufuncs[v.op], v.b))
        for arr, (ufunc, e) in zip(r.arrays, plans):
            val = np.broadcast_to(np.asarray(self.eval(e, var_arrays, rvars, cache), dtype=arr.dtype), shape)
            src = val if mask is None else val[mask]
            src = src.reshape(-1)
            with np.errstate(all="ignore"):
                if idx:
                    ufunc.at(arr, tuple(idx), src)
                else:           # a 0-dimensional Func: one element, every point reduces into it
                    ufunc.at(arr.reshape(1), (np.zeros(src.size, np.int64),), src)
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
        """One line per point evaluated, in the order of Halide's default (serial) loop nest."""
        shape = np.broadcast_shapes(*[np.shape(a) for a in args])
        it_shape, order = getattr(self, "_print_iter", ((), ()))
        try:
            full = np.broadcast_shapes(shape, it_shape)
        except ValueError:
            full = None
        if full is not None and len(full) == len(order):
            flat = [np.transpose(np.broadcast_to(a, full), order).reshape(-1) for a in args]
        else:
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
    # Halide's print: f64 in scientific notation, other floats with six decimals
    if isinstance(v, np.float64):
        return _fmt_float(float(v), "e")
    if isinstance(v, (np.floating, float)):
        return _fmt_float(float(v), "f")
    if isinstance(v, (np.bool_, bool)):
        return "true" if v else "false"
    return str(int(v))


def _fmt_float(v: float, style: str) -> str:
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    return f"{v:.6{style}}"


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


class _TooLarge(Exception):
    def __init__(self, func: Func):
        self.func = func


def realize(pipeline: Pipeline, inputs: dict[str, np.ndarray], params: dict[str, object],
            boxes: list[list[tuple[int, int]]], out=None, schedule=None) -> list[list[np.ndarray]]:
    """Realize every output over its box [(min, extent) per dim]; arrays are indexed [x, y, ...].
    `schedule`: the Schedule whose bound() directives apply (the others change no value)."""
    for f, box in zip(pipeline.outputs, boxes):
        if any(ext <= 0 for _, ext in box):
            raise HdslError(f"output '{f.name}' has an empty size", None, "every extent must be positive")
    with np.errstate(all="ignore"):
        results = _evaluate(pipeline, inputs, params, boxes, out, schedule, lambda ev, init: ev.run(init))
    out_arrays = []
    for f, r, box in zip(pipeline.outputs, results, boxes):
        for d, ((lo, ext), m, e) in enumerate(zip(box, r.mins, r.extents)):
            if m < lo or m + e > lo + ext:
                raise output_written_outside(f.name, d, m, m + e - 1, lo, lo + ext - 1)
        sl = tuple(slice(lo - m, lo - m + ext) for (lo, ext), m in zip(box, r.mins))
        out_arrays.append([a[sl] for a in r.arrays])
    return out_arrays


def _evaluate(pipeline, inputs, params, boxes, out, schedule, step):
    """step(evaluator, initial output boxes) with a fresh Evaluator, retried with the Funcs
    found needed over unbounded regions inlined (see realize)."""
    ev = Evaluator(pipeline, inputs, params, out, schedule)
    out_boxes = [[[lo, lo + ext - 1] for lo, ext in box] for box in boxes]
    init = {id(f): [list(b) for b in box] for f, box in zip(pipeline.outputs, out_boxes)}
    inlined: set[str] = set()
    while True:
        try:
            return step(ev, init)
        except _TooLarge as big:
            # a pure Func needed over an unbounded (or huge) region, such as a boundary
            # condition read at data-dependent coordinates, is computed where it is used
            # instead: the same values, and only its callers' regions must be bounded
            from hdsl.ir.transform import inline_funcs
            if big.func.name in inlined or len(inlined) >= 64:
                raise HdslError(f"'{big.func.name}' is needed over an unbounded region", big.func.span) from None
            inlined.add(big.func.name)
            ev = Evaluator(inline_funcs(pipeline, inlined), inputs, params, out, schedule)
            init = {id(g): [list(b) for b in box] for g, box in zip(ev.p.outputs, out_boxes)}


def input_regions(pipeline: Pipeline, inputs: dict[str, np.ndarray], params: dict[str, object],
                  boxes: list[list[tuple[int, int]]], schedule=None) -> dict[str, list[tuple[int, int]]]:
    """Bounds inference alone: the region of each input [(min, extent) per dim, x first] that
    realizing the outputs over `boxes` reads (the same inference `realize` runs, so exactly what
    the evaluator reads, the rdoms' bounds included); an input read nowhere is absent. Only the inputs' shapes are used,
    unless an rdom's bounds read an input. An input too small for it is the error realize gives."""
    evs = []

    def step(ev, init):
        evs.append(ev)
        ev.infer_regions(init)
    _evaluate(pipeline, inputs, params, boxes, None, schedule, step)
    ev = evs[-1]
    need = {k: [list(r) for r in v] for k, v in ev.need_inputs.items()}
    for f in ev.order:                  # the points the rdoms' bounds read (before anything runs)
        for u in f.updates:
            if u.rdom is None:
                continue
            for c in calls_in([e for b in u.rdom.bounds for e in b]):
                if isinstance(c, InputCall):
                    region = need.setdefault(id(c.buffer), [[math.inf, -math.inf] for _ in c.args])
                    for d, a in enumerate(c.args):
                        v = ev.scalar_value(a)
                        region[d] = [min(region[d][0], v), max(region[d][1], v)]
    out = {}
    for b in pipeline.inputs:
        region = need.get(id(b))
        if region is not None and all(lo <= hi for lo, hi in region):
            out[b.name] = [(int(lo), int(hi) - int(lo) + 1) for lo, hi in region]
    return out
