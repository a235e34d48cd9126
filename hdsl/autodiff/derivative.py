"""Reverse-mode differentiation of a Func graph (Li et al. 2018, Halide's Derivative.cpp).

`propagate_adjoints(loss, new_func)` takes a zero-dimensional float Func and
returns a `Gradient`: for every Func, input buffer and param the loss reaches
through float values, a Func holding ∂loss/∂(that value at each point).

How (the facts follow the paper; the code is ours):
- Funcs are visited consumers first, so a Func's adjoint is complete before
  its own definitions pass it on. The loss's adjoint is 1.
- Within a definition, reverse mode over the expression DAG gives each call
  (and each float param) a weight: an expression in the definition's pure
  vars and rvars.
- A call `g(x + c1, y + c2)` (each coordinate a distinct pure var plus an
  offset free of pure vars, possibly an rvar) turns around into a gather:
  d_g(x', y') += w(x := x' - c1, y := y' - c2), summed over the definition's
  rdom. This is the paper's scatter-to-gather conversion by shearing: the
  adjoint of a stencil or a convolution over an rdom is a parallel gather.
- Any other call (a clamped boundary read, a data-dependent index, a
  downsampling 2*x) is a serial scatter: an update of the adjoint whose rdom
  runs over the region of the reading Func that the loss uses
  (hdsl/autodiff/regions.py), `d_img(clamp(r.x, ...), ...) += w(r.x, ...)`.
- Gathers clamp the reading Func's coordinates into that region and mask
  the term outside it, so a gradient never reads a forward value the forward
  pipeline did not compute (Halide bounds each adjoint the same way).
- Updates: `f(L) += e`, `f(L) -= e` (any left-hand side, any number of them)
  pass the adjoint straight through; a single `f(L) = max(f(L), e)` or
  `min` (the inline `maximum`/`minimum`) sends it to every element equal to
  the result. A recursive filter (`.iir`) is reversed: its adjoint is the
  same recursion run the other way (reverse_iir). Other updates (scans
  written by hand, overwrites, products) are refused with a positioned error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from hdsl.autodiff.regions import interval, required_regions, stage_env
from hdsl.diagnostics import HdslError, Span
from hdsl.ir.expr import (BinOp, Cast, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar, Select, Unary,
                          Var, free_vars, intern, substitute, walk)
from hdsl.ir.func import Func, InputBuffer, RDom, Update, pure_positions, topo_order
from hdsl.ir.types import BOOL, I32, Type


class DerivativeError(HdslError):
    """A program the derivative cannot (yet) handle: the message says where and why."""


@dataclass
class Gradient:
    """The adjoints of everything a loss reaches, keyed by what they differentiate."""
    loss: Func
    funcs: dict[int, list[Func | None]] = field(default_factory=dict)  # id(Func) -> one per value
    inputs: dict[int, Func] = field(default_factory=dict)              # id(InputBuffer) -> d_input
    params: dict[str, Func] = field(default_factory=dict)              # param name -> 0-dim d_param
    made: list[Func] = field(default_factory=list)                     # every Func it created

    # what has a gradient this one does not compute (id(Func or buffer), or a param's name) -> why
    refused: dict = field(default_factory=dict)

    def _check(self, key) -> None:
        if key in self.refused:
            raise self.refused[key]

    def of_func(self, f: Func, index: int = 0) -> Func | None:
        self._check(id(f))
        ds = self.funcs.get(id(f))
        return ds[index] if ds else None

    def of_input(self, b: InputBuffer) -> Func | None:
        self._check(id(b))
        return self.inputs.get(id(b))

    def of_param(self, name: str) -> Func | None:
        self._check(name)
        return self.params.get(name)


def _c(t: Type, v) -> Const:
    return Const(t, float(v) if t.is_float() else v)


def _bin(op, a, b):
    return BinOp(op, a, b, a.type)


def _neg(a):
    return Unary("-", a, a.type)


def _intr(name, t, *args):
    return Intrinsic(name, tuple(args), t)


def _cmp(op, a, b):
    return BinOp(op, a, b, BOOL)


def _mask(cond, w):
    return Select(cond, w, _c(w.type, 0), w.type)


def _local_adjoints(x: Expr, adj: Expr) -> list[tuple[Expr, Expr]]:
    """(child, its adjoint) for node x with adjoint adj (reverse mode, one node)."""
    t = x.type
    one = _c(t, 1)
    if isinstance(x, Cast):
        return [(x.value, Cast(x.value.type, adj))] if x.value.type.is_float() else []
    if isinstance(x, Unary):
        return [(x.a, _neg(adj))] if x.op == "-" else []
    if isinstance(x, Select):
        return [(x.t, _mask(x.cond, adj)), (x.f, Select(x.cond, _c(t, 0), adj, t))]
    if isinstance(x, BinOp):
        a, b = x.a, x.b
        if x.op == "+":
            return [(a, adj), (b, adj)]
        if x.op == "-":
            return [(a, adj), (b, _neg(adj))]
        if x.op == "*":
            return [(a, _bin("*", adj, b)), (b, _bin("*", adj, a))]
        if x.op == "/":
            return [(a, _bin("/", adj, b)), (b, _neg(_bin("/", _bin("*", adj, x), b)))]
        if x.op in ("min", "max"):
            first = _cmp("<=" if x.op == "min" else ">=", a, b)      # ties go to the first operand
            return [(a, _mask(first, adj)), (b, Select(first, _c(t, 0), adj, t))]
        if x.op == "%":                                             # a - b * floor(a / b)
            return [(a, adj), (b, _neg(_bin("*", adj, _intr("floor", t, _bin("/", a, b)))))]
        return []
    if isinstance(x, Intrinsic):
        n, args = x.name, x.args
        a = args[0] if args else None
        if n == "sqrt":
            return [(a, _bin("/", adj, _bin("*", _c(t, 2), x)))]
        if n == "exp":
            return [(a, _bin("*", adj, x))]
        if n == "log":
            return [(a, _bin("/", adj, a))]
        if n == "sin":
            return [(a, _bin("*", adj, _intr("cos", t, a)))]
        if n == "cos":
            return [(a, _neg(_bin("*", adj, _intr("sin", t, a))))]
        if n == "tan":
            c = _intr("cos", t, a)
            return [(a, _bin("/", adj, _bin("*", c, c)))]
        if n in ("asin", "acos"):
            d = _bin("/", adj, _intr("sqrt", t, _bin("-", one, _bin("*", a, a))))
            return [(a, d if n == "asin" else _neg(d))]
        if n == "atan":
            return [(a, _bin("/", adj, _bin("+", one, _bin("*", a, a))))]
        if n == "sinh":
            return [(a, _bin("*", adj, _intr("cosh", t, a)))]
        if n == "cosh":
            return [(a, _bin("*", adj, _intr("sinh", t, a)))]
        if n == "tanh":
            return [(a, _bin("*", adj, _bin("-", one, _bin("*", x, x))))]
        if n == "pow":
            b = args[1]
            return [(a, _bin("*", adj, _bin("*", b, _intr("pow", t, a, _bin("-", b, one))))),
                    (b, _bin("*", adj, _bin("*", x, _intr("log", t, a))))]
        if n == "atan2":                                            # atan2(y, x)
            y, xx = args
            r2 = _bin("+", _bin("*", xx, xx), _bin("*", y, y))
            return [(y, _bin("/", _bin("*", adj, xx), r2)), (xx, _neg(_bin("/", _bin("*", adj, y), r2)))]
        if n == "abs" and t.is_float():
            return [(a, Select(_cmp(">=", a, _c(t, 0)), adj, _neg(adj), t))]
        if n == "absd" and t.is_float():
            ge = _cmp(">=", a, args[1])
            return [(a, Select(ge, adj, _neg(adj), t)), (args[1], Select(ge, _neg(adj), adj, t))]
        if n == "lerp" and t.is_float() and args[2].type == t:      # z + (o - z) * w, for floats
            z, o, w = args
            return [(z, _bin("*", adj, _bin("-", one, w))), (o, _bin("*", adj, w)),
                    (w, _bin("*", adj, _bin("-", o, z)))]
        if n == "print":
            return [(a, adj)]
        return []             # floor, ceil, round, trunc: zero almost everywhere; the rest are not float
    return []


def expr_adjoints(e: Expr, seed: Expr) -> list[tuple[Expr, Expr]]:
    """Reverse mode over e's DAG: (leaf, ∂/∂leaf) for each float Func call, input read and
    param in e, given the adjoint `seed` of e. Integer and bool subexpressions carry none."""
    order: list[Expr] = []
    seen: set[int] = set()
    stack = [(e, False)]
    while stack:                            # postorder, then reversed: parents before children
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen or not n.type.is_float():
            continue
        seen.add(id(n))
        stack.append((n, True))
        if not isinstance(n, (FuncCall, InputCall, Param)):
            stack.extend((c, False) for c in n.children())
    adjoint: dict[int, Expr] = {id(e): seed} if e.type.is_float() else {}
    leaves = []
    for n in reversed(order):
        a = adjoint.get(id(n))
        if a is None:
            continue
        if isinstance(n, (FuncCall, InputCall, Param)):
            leaves.append((n, a))
            continue
        for child, ca in _local_adjoints(n, a):
            if child.type.is_float():
                old = adjoint.get(id(child))
                adjoint[id(child)] = ca if old is None else _bin("+", old, ca)
    return leaves


def _offset_of(a: Expr, pure: set[str]) -> tuple[str, Expr] | None:
    """a as `v + c` (v a pure var, c free of pure vars): (v, c); None otherwise."""
    if isinstance(a, Var) and a.name in pure:
        return a.name, Const(I32, 0)
    if isinstance(a, BinOp) and a.op in ("+", "-") and a.type == I32:
        if isinstance(a.a, Var) and a.a.name in pure and not free_vars(a.b):
            return a.a.name, (a.b if a.op == "+" else Unary("-", a.b, I32))
        if a.op == "+" and isinstance(a.b, Var) and a.b.name in pure and not free_vars(a.a):
            return a.b.name, a.a
    return None


_NONE = 2 ** 31 - 1       # no position


def _linear_index(rd: RDom | None) -> Expr:
    """The position of the current point in rdom order (dim 0 fastest), from 0."""
    if rd is None:
        return Const(I32, 0)
    lin: Expr = Const(I32, 0)
    for d in reversed(range(len(rd.bounds))):
        lo, ext = rd.bounds[d]
        lin = BinOp("+", BinOp("*", lin, ext, I32), BinOp("-", RVar(rd, d), lo, I32), I32)
    return lin


def _dim_names(n: int) -> list[str]:
    return list("xyzw"[:n]) if n <= 4 else [f"x{i}" for i in range(n)]


class _Builder:
    def __init__(self, loss: Func, new_func: Callable[[str, Span | None], Func]):
        self.loss = loss
        self.new_func = new_func
        self.grad = Gradient(loss)
        self.regions = required_regions(loss)
        self.terms: dict[int, list[Expr]] = {}      # id(adjoint Func) -> gathered terms
        self.first: dict[int, Expr] = {}            # id(min/max Func) -> its first_position call
        self.n_rdoms = 0

    def make(self, name: str, args: list[str], t: Type, span) -> Func:
        f = self.new_func(name, span)
        f.args = list(args)
        f.values = [_c(t, 0)]
        self.terms[id(f)] = []
        self.grad.made.append(f)
        return f

    def adjoint_of(self, leaf: Expr, span) -> Func:
        g = self.grad
        if isinstance(leaf, FuncCall):
            f = leaf.func
            ds = g.funcs.setdefault(id(f), [None] * len(f.values))
            if ds[leaf.index] is None:
                suffix = f"_{leaf.index}" if len(f.values) > 1 else ""
                ds[leaf.index] = self.make(f"d_{f.name}{suffix}", f.args, leaf.type, f.span)
            return ds[leaf.index]
        if isinstance(leaf, InputCall):
            b = leaf.buffer
            if id(b) not in g.inputs:
                g.inputs[id(b)] = self.make(f"d_{b.name}", _dim_names(b.dims), b.type, b.span)
            return g.inputs[id(b)]
        if leaf.name not in g.params:
            g.params[leaf.name] = self.make(f"d_{leaf.name}", [], leaf.type, span)
        return g.params[leaf.name]

    def run(self) -> Gradient:
        loss = self.loss
        d_loss = self.make(f"d_{loss.name}", [], loss.types[0], loss.span)
        d_loss.values = [_c(loss.types[0], 1)]
        self.grad.funcs[id(loss)] = [d_loss]
        for f in reversed(topo_order([loss])):
            ds = self.grad.funcs.get(id(f))
            if not ds:
                continue                       # the loss does not depend on it through floats
            for d in ds:
                if d is not None and d is not d_loss:
                    self.finish(d)
            self.propagate(f, ds)
        for d in list(self.grad.inputs.values()) + list(self.grad.params.values()):
            self.finish(d)
        return self.grad

    def finish(self, d: Func) -> None:
        terms = self.terms.pop(id(d), [])
        if terms:
            total = terms[0]
            for t in terms[1:]:
                total = _bin("+", total, t)
            d.values = [total]

    # ------------------------------------------------------------------ definitions
    def propagate(self, f: Func, ds: list[Func | None]) -> None:
        pure = [Var(a) for a in f.args]
        extremum = self.extremum_update(f)
        for k, d in enumerate(ds):
            if d is None or not f.types[k].is_float():
                continue
            # updates last to first: `d` is the adjoint of the value after update j; a recursive
            # filter changes it (to the adjoint of the value before), the others pass it through
            for j in reversed(range(len(f.updates))):
                u = f.updates[j]
                if u.iir is not None and len(f.values) == 1:
                    d = self.reverse_iir(f, j, u, d)
                    continue
                e, seed = self.update_seed(f, j, u, k, d)
                self.contribute_all(f, j, e, seed)
            seed: Expr = FuncCall(d, tuple(pure), 0, d.types[0])
            if extremum is not None:
                # the initial value receives the adjoint only where no element reached the result
                seed = _mask(_cmp("==", self.first_position(f), Const(I32, _NONE)), seed)
            self.contribute_all(f, -1, f.values[k], seed)

    def reverse_iir(self, f: Func, j: int, u: Update, d: Func) -> Func:
        """The adjoint of the value before the recursive filter `u` from `d`, the adjoint after
        it: the same recursion run the other way, g(v) = d(v) + a1 g(v ± 1) + ... over [lo, hi),
        then times b0 there (outside [lo, hi) the filter leaves f as it was: d passes through)."""
        dim, direction, lo, hi, b0, feedback = u.iir
        for c in [b0] + list(feedback):
            for leaf, _ in expr_adjoints(c, _c(c.type, 1)):
                # what the coefficients read has a gradient this does not compute: refuse it when asked
                key = leaf.name if isinstance(leaf, Param) else \
                    id(leaf.func if isinstance(leaf, FuncCall) else leaf.buffer)
                self.grad.refused.setdefault(key, DerivativeError(
                    f"cannot differentiate the coefficients of this filter of '{f.name}'", u.span,
                    "the gradient by a recursive filter's coefficients is not supported yet; "
                    "the gradient by its input is"))
        t = f.types[0]
        g = self.make(f"d_{f.name}.s{j}", f.args, t, u.span)
        self.terms.pop(id(g))
        pure = [Var(a) for a in f.args]
        g.values = [FuncCall(d, tuple(pure), 0, t)]
        one = Const(I32, 1)
        last = BinOp("-", hi, one, I32)
        rd = RDom(f"{g.name}.r", [(lo, BinOp("-", hi, lo, I32))], None, u.span)
        r = RVar(rd, 0)
        # reversed: a causal (+) filter's adjoint runs downward, reading g at v + i
        coord = BinOp("-", BinOp("+", lo, last, I32), r, I32) if direction == "+" else r

        def at(c):
            return FuncCall(g, tuple(c if i == dim else p for i, p in enumerate(pure)), 0, t)

        total = at(coord)
        for i, a in enumerate(feedback, start=1):
            if direction == "+":
                src = BinOp("+", coord, Const(I32, i), I32)
                inside, safe = _cmp("<=", src, last), BinOp("min", src, last, I32)
            else:
                src = BinOp("-", coord, Const(I32, i), I32)
                inside, safe = _cmp(">=", src, lo), BinOp("max", src, lo, I32)
            total = _bin("+", total, _bin("*", a, _mask(inside, at(safe))))
        args = [coord if i == dim else p for i, p in enumerate(pure)]
        g.updates.append(Update(args, [total], rd, u.span,
                                (dim, "-" if direction == "+" else "+", lo, hi, _c(t, 1), list(feedback))))
        rd2 = RDom(f"{g.name}.b0", [(lo, BinOp("-", hi, lo, I32))], None, u.span)
        args2 = [RVar(rd2, 0) if i == dim else p for i, p in enumerate(pure)]
        here = FuncCall(g, tuple(args2), 0, t)
        g.updates.append(Update(args2, [_bin("*", b0, here)], rd2, u.span))
        return g

    def extremum_update(self, f: Func) -> str | None:
        if len(f.updates) == 1 and len(f.values) == 1:
            v = f.updates[0].values[0]
            if isinstance(v, BinOp) and v.op in ("min", "max") and self.self_read(f, f.updates[0], v.a, 0):
                return v.op
        return None

    def first_position(self, f: Func) -> Expr:
        """For a min/max reduction f(x) = max(f(x), e(r)): a call of a Func holding the first
        position in rdom order (a linear index) where e(r) equals the result, or _NONE. The adjoint
        goes there alone, so an element that a window sees twice (a mirrored border) counts once
        and a tie goes to the first, as argmax's does."""
        got = self.first.get(id(f))
        if got is not None:
            return got
        u = f.updates[0]
        pure = tuple(Var(a) for a in f.args)
        if len(pure_positions(f, u)) != f.dims or len(u.args) != f.dims:
            raise DerivativeError(f"cannot differentiate this min/max update of '{f.name}': it writes "
                                  "computed coordinates", u.span,
                                  "write it over the Func's pure vars, e.g. f(x, y) = max(f(x, y), e)")
        rd = None
        if u.rdom is not None:
            old = u.rdom
            rd = RDom(f"{f.name}.first.r", list(old.bounds), None, u.span)

            def move(x):
                return substitute(x, lambda n: RVar(rd, n.index) if isinstance(n, RVar) and n.rdom is old else None)
            if old.predicate is not None:
                rd.predicate = move(old.predicate)
        else:
            def move(x):
                return x
        v = u.values[0]
        e = v.b if self.self_read(f, u, v.a, 0) else v.a
        pos = self.new_func(f"{f.name}.first", u.span)
        pos.implicit = True
        pos.args = list(f.args)
        pos.values = [Const(I32, _NONE)]
        cur = FuncCall(pos, pure, 0, I32)
        hit = _cmp("==", move(e), FuncCall(f, pure, 0, f.types[0]))
        pos.updates.append(Update(list(pure), [BinOp("min", cur, Select(hit, move(_linear_index(u.rdom)),
                                                                           Const(I32, _NONE), I32), I32)],
                                  rd, u.span))
        self.grad.made.append(pos)
        self.first[id(f)] = cur
        return cur

    def self_read(self, f: Func, u: Update, e: Expr, k: int) -> bool:
        return isinstance(e, FuncCall) and e.func is f and e.index == k and \
            len(e.args) == len(u.args) and all(intern(a) is intern(b) for a, b in zip(e.args, u.args))

    def update_seed(self, f: Func, j: int, u: Update, k: int, d: Func) -> tuple[Expr, Expr]:
        v = u.values[k]
        lhs = tuple(self.bounded(a, stage_env(f, self.regions.get(id(f), []), j)) for a in u.args)
        at = FuncCall(d, lhs, 0, d.types[0])
        if isinstance(v, BinOp) and v.op in ("+", "-", "min", "max"):
            mine, other = (v.a, v.b) if self.self_read(f, u, v.a, k) else (v.b, v.a)
            if self.self_read(f, u, mine, k) and not self.reads(other, f) and (v.op != "-" or mine is v.a):
                if v.op == "+":
                    return other, at
                if v.op == "-":
                    return other, _neg(at)
                if self.extremum_update(f) is not None:
                    return other, _mask(_cmp("==", _linear_index(u.rdom), self.first_position(f)), at)
        raise DerivativeError(
            f"cannot differentiate this update of '{f.name}'", u.span,
            "the derivative handles updates that add to the value in place, "
            f"e.g. {f.name}(...) += e or {f.name}(...) -= e, and a single min/max reduction; "
            "scans, overwrites and products are not supported yet")

    @staticmethod
    def bounded(a: Expr, env: dict) -> Expr:
        """A data-dependent coordinate clamped into the range it provably lies in (a no-op on
        its values), so that bounds inference can size what the gradient reads or writes there."""
        if isinstance(a, (Var, Const)):
            return a
        lo, hi = interval(a, env)
        if lo is None or hi is None:
            return a
        return BinOp("max", BinOp("min", a, hi, I32), lo, I32)

    @staticmethod
    def reads(e: Expr, f: Func) -> bool:
        return any(isinstance(n, FuncCall) and n.func is f for n in walk(e))

    def contribute_all(self, f: Func, stage: int, e: Expr, seed: Expr) -> None:
        span = f.span if stage < 0 else f.updates[stage].span
        for leaf, w in expr_adjoints(e, seed):
            if isinstance(leaf, FuncCall) and leaf.func is f:
                raise DerivativeError(f"cannot differentiate '{f.name}': this definition reads '{f.name}' "
                                      "at other points (a scan)", span,
                                      "the derivative of scans written by hand is not supported yet; "
                                      "recursive filters written with .iir are")
            self.contribute(f, stage, leaf, w, span)

    def contribute(self, f: Func, stage: int, leaf: Expr, w: Expr, span) -> None:
        """Add w (in f's definition `stage`) to the adjoint of the leaf, as a gather or a scatter."""
        d = self.adjoint_of(leaf, span)
        u = f.updates[stage] if stage >= 0 else None
        pure = [n for _, n in pure_positions(f, u)] if u is not None else list(f.args)
        region = self.regions.get(id(f), [])
        where = {name: region[i] if i < len(region) else (None, None)
                 for i, name in (pure_positions(f, u) if u is not None else enumerate(f.args))}
        args = leaf.args if isinstance(leaf, (FuncCall, InputCall)) else ()
        solved: dict[str, tuple[int, Expr]] = {}
        scattered: list[int] = []
        for i, a in enumerate(args):
            m = _offset_of(a, set(pure))
            if m is not None and m[0] not in solved:
                solved[m[0]] = (i, m[1])
            else:
                scattered.append(i)
        unsolved = [v for v in pure if v not in solved]
        mapping: dict[str, Expr] = {}
        inside = None

        def bounds(v):
            lo, hi = where[v]
            if lo is None or hi is None:
                raise DerivativeError(
                    f"cannot bound the region of '{f.name}' that the loss reads (along '{v}')", span,
                    "the derivative needs it to turn reads around; clamp data-dependent coordinates, "
                    "e.g. f(clamp(i, 0, 255))")
            return lo, hi

        for v, (i, c) in solved.items():
            src = BinOp("-", Var(d.args[i]), c, I32)
            lo, hi = where[v]
            if lo is None or hi is None:
                # a data-dependent region (bilateral_grid's z): gather without clamping; the
                # gradient pipeline's bounds inference sizes the forward Func for it
                mapping[v] = src
                continue
            mapping[v] = BinOp("max", BinOp("min", src, hi, I32), lo, I32)
            ok = BinOp("&&", _cmp(">=", src, lo), _cmp("<=", src, hi), BOOL)
            inside = ok if inside is None else BinOp("&&", inside, ok, BOOL)
        # one rdom over the definition's own rdom (if any), then f's region along unsolved vars
        rd_old = u.rdom if u is not None else None
        dims = list(rd_old.bounds) if rd_old is not None else []
        for v in unsolved:
            lo, hi = bounds(v)
            dims.append((lo, BinOp("+", BinOp("-", hi, lo, I32), Const(I32, 1), I32)))
        rd = None
        if dims:
            self.n_rdoms += 1
            rd = RDom(f"{d.name}.r{self.n_rdoms}", dims, None, span)
            for k, v in enumerate(unsolved):
                mapping[v] = RVar(rd, len(dims) - len(unsolved) + k)

        def rvars(x: Expr) -> Expr:           # the definition's rvars become the new rdom's
            return substitute(x, lambda n: RVar(rd, n.index) if isinstance(n, RVar) and rd_old is not None
                              and n.rdom is rd_old else None)

        mapping = {v: rvars(e) for v, e in mapping.items()}

        def rewrite(x: Expr) -> Expr:
            return substitute(rvars(x), lambda n: mapping.get(n.name) if isinstance(n, Var) else None)

        term = rewrite(w)
        if inside is not None:
            term = _mask(rvars(inside), term)
        if rd is not None and rd_old is not None and rd_old.predicate is not None:
            rd.predicate = rewrite(rd_old.predicate)
        t = d.types[0]
        out_args = [Var(a) for a in d.args]
        if not scattered and not unsolved:
            if rd is None:
                self.terms[id(d)].append(term)
                return
            # a gather summed over the definition's rdom: an inline sum of its own
            s = self.new_func(f"{d.name}.sum", span)
            s.implicit = True
            s.args = list(d.args)
            s.values = [_c(t, 0)]
            cur = FuncCall(s, tuple(out_args), 0, t)
            s.updates.append(Update(list(out_args), [_bin("+", cur, term)], rd, span))
            self.grad.made.append(s)
            self.terms[id(d)].append(cur)
            return
        env = stage_env(f, region, stage)
        lhs = []
        for i, a in enumerate(args):
            if i not in scattered:
                lhs.append(out_args[i])
                continue
            b = self.bounded(a, env)
            if b is a and not isinstance(a, (Var, Const)):
                what = leaf.func.name if isinstance(leaf, FuncCall) else leaf.buffer.name
                raise DerivativeError(
                    f"cannot differentiate this read of '{what}': its coordinate {i} depends on data "
                    "and has no bound, so there is no telling where its gradient goes", span,
                    f"clamp the coordinate, e.g. {what}(clamp(i32(v), 0, 255))")
            lhs.append(rewrite(b))
        cur = FuncCall(d, tuple(lhs), 0, t)
        d.updates.append(Update(lhs, [_bin("+", cur, term)], rd, span))


def propagate_adjoints(loss: Func, new_func: Callable[[str, Span | None], Func]) -> Gradient:
    """The gradient of a zero-dimensional float Func (see the module docstring)."""
    if loss.dims != 0 or len(loss.values or []) != 1 or not loss.types[0].is_float():
        raise DerivativeError(f"the loss '{loss.name}' must be a single float value with no coordinates",
                              loss.span, f"reduce it to one number, e.g. {loss.name}() = sum(...)")
    return _Builder(loss, new_func).run()
