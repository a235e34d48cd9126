"""The Func graph: what the front end produces and every back end consumes."""
from __future__ import annotations

from dataclasses import dataclass, field

from hdsl.diagnostics import Span
from hdsl.ir.expr import Expr, FuncCall, RVar, Var, walk
from hdsl.ir.types import Type


@dataclass(eq=False)
class InputBuffer:
    name: str
    type: Type
    dims: int
    span: Span | None = None


@dataclass(eq=False)
class ParamDecl:
    name: str
    type: Type
    default: object = None
    span: Span | None = None


@dataclass(eq=False)
class RDom:
    """A reduction domain: dims of (min, extent), iterated with dim 0 innermost."""
    name: str
    bounds: list[tuple[Expr, Expr]]
    predicate: Expr | None = None
    span: Span | None = None

    @property
    def vars(self) -> list[RVar]:
        return [RVar(self, i) for i in range(len(self.bounds))]


@dataclass(eq=False)
class Update:
    args: list[Expr]               # left-hand side coordinates
    values: list[Expr]             # one per tuple element
    rdom: RDom | None
    span: Span | None = None
    # a recursive filter (`.iir`): (dim, '+' or '-', lo, hi, b0, [a1, ..., ak]), the
    # coefficients as the filter uses them (of the Func's type); None for other updates
    iir: tuple | None = None


@dataclass(eq=False)
class Func:
    name: str
    args: list[str] = field(default_factory=list)
    values: list[Expr] | None = None     # the pure definition
    updates: list[Update] = field(default_factory=list)
    span: Span | None = None
    # Funcs created by an `fn` call that returned this one, by local name (gp[3].dx)
    locals: dict[str, "Func"] = field(default_factory=dict)
    # created by the compiler (inline reductions, boundary conditions, partial application)
    implicit: bool = False

    @property
    def types(self) -> list[Type]:
        return [v.type for v in self.values] if self.values else []

    @property
    def dims(self) -> int:
        return len(self.args)

    @property
    def defined(self) -> bool:
        return self.values is not None

    def __repr__(self):
        return f"Func({self.name})"


def pure_positions(f: Func, u: Update) -> list[tuple[int, str]]:
    """(position, name) of update u's pure vars: a var at the position that var has in f's pure
    definition (Halide's Function::define_update). A pure var elsewhere on the left is a
    computed coordinate: `f(x, x) += 1` updates the diagonal."""
    return [(i, a.name) for i, a in enumerate(u.args)
            if isinstance(a, Var) and i < len(f.args) and a.name == f.args[i]]


def calls_in(exprs) -> list[Expr]:
    """All FuncCall/InputCall nodes in the given expressions."""
    from hdsl.ir.expr import InputCall
    out = []
    for e in exprs:
        for n in walk(e):
            if isinstance(n, (FuncCall, InputCall)):
                out.append(n)
    return out


def definition_exprs(f: Func):
    """Every expression of every definition of f (LHS, RHS, rdom bounds, predicate)."""
    exprs = list(f.values or [])
    for u in f.updates:
        exprs += u.args + u.values
        if u.rdom is not None:
            for lo, ext in u.rdom.bounds:
                exprs += [lo, ext]
            if u.rdom.predicate is not None:
                exprs.append(u.rdom.predicate)
    return exprs


def callees(f: Func) -> list[Func]:
    seen, out = set(), []
    for c in calls_in(definition_exprs(f)):
        if isinstance(c, FuncCall) and c.func is not f and id(c.func) not in seen:
            seen.add(id(c.func))
            out.append(c.func)
    return out


def find_cycle(outputs: list[Func]) -> list[Func] | None:
    """Funcs that read each other in a ring (f reads g, ..., which reads f), or None.
    A call reads a Func's final value, so a Func may read itself only in its own updates:
    a ring through others has no order to compute it in. (Halide forbids it too: a Func
    cannot get an update once another Func uses it.)"""
    order = topo_order(outputs)
    pos = {id(f): i for i, f in enumerate(order)}
    for f in order:
        for g in callees(f):
            if pos[id(g)] >= pos[id(f)]:
                # a back edge of the depth-first order: g reaches f; find the path g -> ... -> f
                parent = {id(g): None}
                queue = [g]
                for h in queue:
                    if h is f:
                        break
                    for k in callees(h):
                        if id(k) not in parent:
                            parent[id(k)] = h
                            queue.append(k)
                back, h = [], f             # f, ..., g: the path read backwards
                while h is not None:
                    back.append(h)
                    h = parent[id(h)]
                return [f] + back[::-1][:-1]    # f reads g, g reads ..., the last reads f
    return None


def topo_order(outputs: list[Func]) -> list[Func]:
    """Funcs reachable from outputs, producers before consumers."""
    order, state = [], {}

    def visit(f):
        stack = [(f, iter(callees(f)))]
        state[id(f)] = 1
        while stack:
            g, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[id(g)] = 2
                order.append(g)
            elif id(nxt) not in state:
                state[id(nxt)] = 1
                stack.append((nxt, iter(callees(nxt))))

    for f in outputs:
        if id(f) not in state:
            visit(f)
    return order


@dataclass
class Directive:
    """One scheduling call as written: `out.tile(x, y, xi, yi, 256, 32)`."""
    name: str
    args: list            # validated argument values: var names, ints, Func refs
    span: Span | None = None
    stage: int = -1       # -1 the pure definition, i for update(i)
    tail: str | None = None   # a split's tail strategy when written: round_up, guard_with_if, shift_inwards


def tile_parts(args: list) -> list[tuple]:
    """The splits of a `tile`/`gpu_tile` of 6, 8, 9 or 12 arguments, as (loop, outer, inner,
    factor) per dim, x first: `(x, y, xi, yi, w, h)` and `(x, y, z, xi, yi, zi, w, h, d)` keep
    the old names for the outer loops; `(x, y, xo, yo, xi, yi, w, h)` and the 12-argument
    `(x, y, z, xo, yo, zo, xi, yi, zi, w, h, d)` name them (Halide's gpu_tile overloads)."""
    n = {6: 2, 8: 2, 9: 3, 12: 3}[len(args)]
    loops, factors = args[:n], args[-n:]
    if len(args) in (6, 9):
        outers, inners = loops, args[n:2 * n]
    else:
        outers, inners = args[n:2 * n], args[2 * n:3 * n]
    return list(zip(loops, outers, inners, factors))


def inner_loop_name(v: str, taken) -> str:
    """The inner loop of `vectorize(v, n)` (also unroll, parallel): v_i, or v_i2, v_i3, …
    when an earlier split of v already made v_i (`vectorize(x, 4).unroll(x, 3)`; Halide
    names it afresh too). The recorder and lowering both name it with this."""
    name, k = v + "_i", 1
    while name in taken:
        k += 1
        name = f"{v}_i{k}"
    return name


@dataclass
class Schedule:
    name: str | None                           # None for the default block
    directives: dict[int, list[Directive]] = field(default_factory=dict)   # id(Func) -> calls
    funcs: dict[int, Func] = field(default_factory=dict)
    auto: bool = False
    span: Span | None = None

    def add(self, f: Func, d: Directive) -> None:
        self.funcs[id(f)] = f
        self.directives.setdefault(id(f), []).append(d)

    def for_func(self, f: Func) -> list[Directive]:
        return self.directives.get(id(f), [])


@dataclass
class Pipeline:
    name: str
    inputs: list[InputBuffer]
    params: list[ParamDecl]
    outputs: list[Func]
    output_types: list[Type]
    schedules: dict[str | None, Schedule]
    filename: str = "<string>"
    # a hash of the source texts it was elaborated from (its file and every module it uses);
    # "" when built otherwise. Keys the compile cache, so a cached compile skips lowering.
    source_key: str = ""
    # the main file's text (set by hdsl.loads): what Dask workers and batch processes load the
    # pipeline from (hdsl/scale); "" when built otherwise
    source_text: str = ""
    # the name a schedule reaches each Func by (`blur_x`, `gp[3]`, `sharp.unsharp_blur.gauss_w`),
    # by id(Func); Funcs no name reaches are absent
    names: dict[int, str] = field(default_factory=dict)
    # schedule text (directives, one chain a line) -> a Schedule of this pipeline's Funcs,
    # recorded and checked as a block of the file would be (set by the elaborator)
    record_text: object = None
    # the algorithm block's Funcs by name, outputs or not (the Python API's p.gradient finds a loss here)
    named: dict[str, Func] = field(default_factory=dict)

    @property
    def funcs(self) -> list[Func]:
        return topo_order(self.outputs)
