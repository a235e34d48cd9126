"""`f.update(i).rfactor(r.x, u)`: factor an associative reduction for parallelism.

For an update `f(L) = op(f(L), e(L, r))` — L any left-hand side (pure vars or
computed coordinates such as a histogram's `clamp(img(r.x, r.y), 0, 255)`),
values a tuple or one value — rfactor creates an intermediate Func over f's
pure vars P and the new var u:

    f.intm(P, u) = identity(op)
    f.intm(L[r.x := u], u) = op(f.intm(L[r.x := u], u), e(L, r)[r.x := u])   over the other dims of r

and rewrites the update to `f(P) = op(f(P), f.intm(P, r.x))` over r.x alone
(Halide's `Stage::rfactor`, src/Func.cpp: the merge stage is written over the
pure vars, so a computed left-hand side becomes a pure one there).

`op` must be proven associative, as Halide's `prove_associativity`
(src/Associativity.cpp, src/AssociativeOpsTable.cpp) does: every self-reference
reads f at the left-hand side, and each tuple element is one of
  - `x op y` or `y op x`, op one of + * min max && ||, x the element's own
    previous value and y free of f (Halide's single-element table);
  - `select(c, x_k, y_k)` or `select(c, y_k, x_k)` where c compares the previous
    value x_m of a min/max element m with its new value y_m: the argmin/argmax
    pairs of Halide's two-element table (`min(x0, y0), select(x0 < y0, x1, y1)`),
    with any number of such elements sharing one key (Halide's subgraphs).
    A key element may itself be written `select(y < x, y, x)` (a min);
  - a complex product, `x_a * y_a - x_b * y_b` and `x_b * y_a + x_a * y_b`
    (the table's two-element subtraction pattern).
An argmin/argmax breaks ties by rdom order, so it is associative but not
commutative: as Halide requires for non-commutative operators, only the
outermost reduction variable may be factored out, which keeps the order of
the whole reduction and so its exact result.

r.x may also be a loop split from a reduction variable (`split(r.x, rxo, rxi, n)` then
`rfactor(rxo, u)`): the split is first made the rdom's own (_split_rdom). Directives written on
the stage before rfactor go with the loops they name (_route).

The intermediate is computed at the root with its loops over u parallel.
Integer results are unchanged (wrapping + and * are associative and
commutative); float sums and products are reassociated, which the spec
permits for rfactor (and float min/max ignore NaN ordering, as in Halide).
"""
from __future__ import annotations

from dataclasses import dataclass

from hdsl.diagnostics import HdslError
from hdsl.ir.expr import BinOp, Const, Expr, FuncCall, RVar, Select, Var, intern, substitute, walk
from hdsl.ir.func import Directive, Func, RDom, Update, tile_parts
from hdsl.ir.types import BOOL, I32, Type
from hdsl.lower.inline import Definitions
from hdsl.lower.loops import FuncSchedule, Level

COMMUTATIVE_OPS = ("+", "*", "min", "max", "&&", "||")
# a comparison written the other way round: a < b is b > a
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def apply_rfactor(funcs: list[Func], defs: dict[int, Definitions], scheds: dict[int, FuncSchedule]) -> list[Func]:
    out = list(funcs)
    for f in list(funcs):
        fs = scheds[id(f)]
        for stage, ds in list(fs.stages.items()):
            for d in list(ds):
                if d.name != "rfactor":
                    continue
                k = ds.index(d)
                if defs[id(f)].updates[stage].rdom is not None:
                    d, k = _split_rdom(f, stage, ds, k, defs)
                rd = defs[id(f)].updates[stage].rdom
                g = _factor(f, stage, d, defs, scheds)
                # the directives written before rfactor shaped the whole update: each goes
                # with the loops it names (Halide copies the stage's schedule to the
                # intermediate and keeps the preserved RVar's part for the merge)
                intm, merge = _route(ds[:k], [RVar(rd, i).name for i in range(len(rd.bounds))], d)
                ds[:] = merge + ds[k + 1:]
                scheds[id(g)].stages[0][:0] = intm
                out.insert(out.index(f), g)
    return out


@dataclass
class _Element:
    """How one tuple element combines its previous value x with a new value y."""
    kind: str                  # 'binop' (x op y), 'select' (an argmin/argmax index), 'selmin' (select-written
    #                            min), 're'/'im' (the parts of a complex product; key: the other part)
    op: str                    # the binop, or 'min'/'max' for a key
    x_first: bool = True       # binop: x is the left operand
    key: int | None = None     # select: the element whose comparison it follows
    cond_op: str = ""          # select: comparison, written as (x_key cond_op y_key)
    keep_x_if: bool = True     # select: the branch taken when the comparison holds is x
    y: Expr | None = None      # the new value


def _same(a: Expr, b: Expr) -> bool:
    return intern(a) is intern(b)


def _self_refs(e: Expr, f: Func) -> list[FuncCall]:
    return [n for n in walk(e) if isinstance(n, FuncCall) and n.func is f]


def prove_associativity(f: Func, args: list[Expr], values: list[Expr]) -> list[_Element] | None:
    """The associative operator of update `f(args) = values`, one _Element per tuple element, or None."""
    xs = [FuncCall(f, tuple(args), k, v.type) for k, v in enumerate(values)]
    for e in values:
        for n in _self_refs(e, f):
            if len(n.args) != len(args) or not all(_same(a, b) for a, b in zip(n.args, args)):
                return None        # reads f at another point: not a reduction into f(args)
    free = [not _self_refs(e, f) for e in values]

    def is_x(e, k):
        return _same(e, xs[k])

    def clean(e):                  # a new value: free of f
        return not _self_refs(e, f)

    elems: list[_Element | None] = [None] * len(values)
    # single elements: x op y with op commutative (and associative)
    for k, e in enumerate(values):
        if free[k]:
            return None            # f(...) = e: not a reduction (Halide: no identity)
        if isinstance(e, BinOp) and e.op in COMMUTATIVE_OPS:
            if is_x(e.a, k) and clean(e.b):
                elems[k] = _Element("binop", e.op, True, y=e.b)
            elif is_x(e.b, k) and clean(e.a):
                elems[k] = _Element("binop", e.op, False, y=e.a)
            else:
                # f(x) + a + b: x somewhere in a chain of one operator is x op (a op b), as
                # Halide's solve_expression moves x to the left (integers: exactly; floats:
                # reassociated, which rfactor may do)
                leaves = _chain(e, e.op)
                mine = [i for i, a in enumerate(leaves) if is_x(a, k)]
                if len(mine) == 1 and all(clean(a) for i, a in enumerate(leaves) if i != mine[0]):
                    rest = [a for i, a in enumerate(leaves) if i != mine[0]]
                    y = rest[0]
                    for a in rest[1:]:
                        y = BinOp(e.op, y, a, e.type)
                    elems[k] = _Element("binop", e.op, True, y=y)
        elif isinstance(e, Select) and isinstance(e.cond, BinOp) and e.cond.op in FLIP:
            m = _key_compare(e.cond, lambda a: is_x(a, k), clean)
            if m is not None:
                op, y = m
                # select(x < y, x, y) is min(x, y); select(x < y, y, x) is max(x, y) (ties: y)
                if (is_x(e.t, k) and _same(e.f, y)) or (_same(e.t, y) and is_x(e.f, k)):
                    keep_x = is_x(e.t, k)
                    smaller_kept = (op in ("<", "<=")) == keep_x
                    elems[k] = _Element("selmin", "min" if smaller_kept else "max", cond_op=op, keep_x_if=keep_x, y=y)
    _complex_products(values, elems, is_x, clean)
    # argmin/argmax elements: select(cmp(x_m, y_m), x_k, y_k) with m a min/max key
    for k, e in enumerate(values):
        if elems[k] is not None:
            continue
        if not (isinstance(e, Select) and isinstance(e.cond, BinOp) and e.cond.op in FLIP):
            return None
        found = None
        for m, em in enumerate(elems):
            if m == k or em is None or em.op not in ("min", "max") or em.kind == "select":
                continue
            cmp = _key_compare(e.cond, lambda a: is_x(a, m), lambda a: _same(a, em.y))
            if cmp is None:
                continue
            op, _ = cmp
            if is_x(e.t, k) and clean(e.f):
                keep_x, y = True, e.f
            elif is_x(e.f, k) and clean(e.t):
                keep_x, y = False, e.t
            else:
                continue
            # x_m op y_m holding must favour the key's winner: for min, x is kept when x < y
            x_wins = op in ("<", "<=") if em.op == "min" else op in (">", ">=")
            if x_wins == keep_x and op in FLIP:
                found = _Element("select", em.op, key=m, cond_op=op, keep_x_if=keep_x, y=y)
                break
        if found is None:
            return None
        elems[k] = found
    return elems


def _complex_products(values, elems, is_x, clean) -> None:
    """Halide's populate_ops_table_double_general_sub: a complex product, element a
    `x_a * y_a - x_b * y_b` and element b `x_b * y_a + x_a * y_b` (factors and terms in any
    order), identity (1, 0)."""
    def product(e):                # {x index or 'y': factor}, or None
        if not (isinstance(e, BinOp) and e.op == "*"):
            return None
        out = {}
        for f in (e.a, e.b):
            k = next((k for k in range(len(values)) if is_x(f, k)), None)
            if k is not None:
                out["x"] = k
            elif clean(f):
                out["y"] = f
        return out if len(out) == 2 else None
    for a, ea in enumerate(values):
        if elems[a] is not None or not (isinstance(ea, BinOp) and ea.op == "-"):
            continue
        p, q = product(ea.a), product(ea.b)
        if p is None or q is None or p["x"] != a or q["x"] == a:
            continue
        b, ya, yb = q["x"], p["y"], q["y"]
        eb = values[b]
        if elems[b] is not None or _same(ya, yb) or not (isinstance(eb, BinOp) and eb.op == "+"):
            continue
        terms = [product(eb.a), product(eb.b)]
        want = [{"x": b, "y": ya}, {"x": a, "y": yb}]
        if all(t is not None for t in terms) and any(
                all(t["x"] == w["x"] and _same(t["y"], w["y"]) for t, w in zip(order, want))
                for order in (terms, terms[::-1])):
            elems[a] = _Element("re", "*", key=b, y=ya)
            elems[b] = _Element("im", "*", key=a, y=yb)


def _chain(e: Expr, op: str) -> list[Expr]:
    """The operands of a chain of one operator, a + (b + c) + d -> [a, b, c, d]."""
    if isinstance(e, BinOp) and e.op == op:
        return _chain(e.a, op) + _chain(e.b, op)
    return [e]


def _key_compare(cond: BinOp, is_x, is_y):
    """(op, y) when cond is `x op y` or `y op' x` (returned as x op y), else None."""
    if is_x(cond.a) and is_y(cond.b):
        return cond.op, cond.b
    if is_x(cond.b) and is_y(cond.a):
        return FLIP[cond.op], cond.a
    return None


def identity(el: _Element, t: Type) -> Const:
    if el.kind in ("select", "im"):
        v = 0
    elif el.kind == "re":
        v = 1
    elif el.op == "+" or el.op == "||":
        v = 0
    elif el.op == "*" or el.op == "&&":
        v = 1
    elif el.op == "min":
        v = t.max_value()
    else:
        v = t.min_value()
    if t.is_bool():
        return Const(t, bool(v))
    return Const(t, float(v) if t.is_float() else int(v))


def combine(elems: list[_Element], x: list[Expr], y: list[Expr]) -> list[Expr]:
    """Each element's operator applied to previous values x and new values y."""
    out = []
    for k, el in enumerate(elems):
        t = x[k].type
        if el.kind == "binop":
            a, b = (x[k], y[k]) if el.x_first else (y[k], x[k])
            out.append(BinOp(el.op, a, b, t))
            continue
        if el.kind in ("re", "im"):
            re, im = (k, el.key) if el.kind == "re" else (el.key, k)
            if el.kind == "re":     # x_re * y_re - x_im * y_im
                out.append(BinOp("-", BinOp("*", x[re], y[re], t), BinOp("*", x[im], y[im], t), t))
            else:                   # x_im * y_re + x_re * y_im
                out.append(BinOp("+", BinOp("*", x[im], y[re], t), BinOp("*", x[re], y[im], t), t))
            continue
        m = el.key if el.kind == "select" else k
        cond = BinOp(el.cond_op, x[m], y[m], BOOL)
        hold, other = (x[k], y[k]) if el.keep_x_if else (y[k], x[k])
        out.append(Select(cond, hold, other, t))
    return out


def _split_rdom(f: Func, stage: int, ds: list[Directive], k: int, defs) -> tuple[Directive, int]:
    """rfactor(rxo, u) of a loop split from a reduction variable, `split(r.x, rxo, rxi, n)`
    earlier on the stage (Halide's parallel_dot_product_rfactor_test): the split becomes the
    rdom's, r.x = min + n * rxo + rxi over two dims, with `n * rxo + rxi < extent` in the
    `where` condition when n may not divide the extent; the directives that name the loops
    are renamed to the new dims. Returns the rfactor directive and its index, rewritten."""
    from hdsl.ir.simplify import simplify
    d = ds[k]
    u = defs[id(f)].updates[stage]
    rd = u.rdom
    names = [RVar(rd, i).name for i in range(len(rd.bounds))]
    if d.args[0] in names:
        return d, k
    split = next((e for e in ds[:k] if e.name == "split" and e.args[0] in names and d.args[0] in e.args[1:3]), None)
    if split is None:
        raise HdslError(f"rfactor of '{d.args[0]}' needs it to be a reduction variable, or a loop that "
                        "split(...) made from one", d.span,
                        f"the rdom's variables are {', '.join(names)}")
    v, vo, vi, n = split.args
    j = names.index(v)
    lo, ext = rd.bounds[j]
    one = (Const(I32, 0), Const(I32, n))
    outer = (Const(I32, 0), simplify(BinOp("/", BinOp("+", ext, Const(I32, n - 1), I32), Const(I32, n), I32)))
    new = RDom(rd.name, list(rd.bounds[:j]) + [one, outer] + list(rd.bounds[j + 1:]), None, rd.span)
    shift = {i: (i if i < j else i + 1) for i in range(len(rd.bounds)) if i != j}
    point = BinOp("+", BinOp("*", RVar(new, j + 1), Const(I32, n), I32), RVar(new, j), I32)

    e = simplify(ext)
    tail = not (isinstance(e, Const) and e.value % n == 0)
    # (clamped, a no-op where the tail's condition holds, so that bounds inference sees that
    # nothing past the end is touched, as loops.py's guarded splits do)
    at = BinOp("+", lo, point, I32)
    if tail:
        at = BinOp("min", at, BinOp("-", BinOp("+", lo, ext, I32), Const(I32, 1), I32), I32)

    def move(e):
        return substitute(e, lambda m: (at if m.index == j else RVar(new, shift[m.index]))
                          if isinstance(m, RVar) and m.rdom is rd else None)
    preds = [move(rd.predicate)] if rd.predicate is not None else []
    if tail:
        preds.append(BinOp("<", point, ext, BOOL))          # the last tile's points past the end
    for p in preds[1:]:
        preds[0] = BinOp("&&", preds[0], p, BOOL)
    new.predicate = preds[0] if preds else None
    defs[id(f)].updates[stage] = Update([move(a) for a in u.args], [move(v) for v in u.values], new, u.span,
                                        u.iir)
    rename = {names[i]: RVar(new, shift[i]).name for i in shift}
    rename.update({vi: RVar(new, j).name, vo: RVar(new, j + 1).name})
    ds.remove(split)
    ds[:] = [Directive(e.name, [rename.get(a, a) if isinstance(a, str) else a for a in e.args], e.span, e.stage)
             for e in ds]
    d = next(e for e in ds if e.name == "rfactor")
    return d, ds.index(d)


def _route(before: list[Directive], names: list[str], d: Directive) -> tuple[list[Directive], list[Directive]]:
    """Split the stage's directives written before `rfactor(r.k, u)` into those of the
    intermediate's update (loops of the other reduction variables, and pure vars' loops) and
    those of the merge (loops of r.k, and pure vars' loops). Both keep the rdom's names: the
    intermediate's rdom has r.k as a dummy dim of extent 1, the merge's all others."""
    x = names.index(d.args[0])
    origin = {n: {i} for i, n in enumerate(names)}
    intm, merge = [], []
    # the reduction variables' loops each stage has (both keep every dim of the rdom)
    have = {id(intm): set(names), id(merge): set(names)}

    def add(stage, e):
        stage.append(e)
        have[id(stage)] |= {a for a in e.args if isinstance(a, str) and origin.get(a)}
    for e in before:
        idx = set().union(*(origin.get(a, set()) for a in e.args if isinstance(a, str)))
        _derive(e, origin)
        if e.name == "reorder" and idx:
            for stage in (intm, merge):      # the loops this stage has, in the order given
                kept = [a for a in e.args if not origin.get(a) or a in have[id(stage)]]
                if len(kept) >= 2:
                    stage.append(Directive("reorder", kept, e.span, e.stage))
        elif not idx:
            add(intm, e)
            add(merge, e)
        elif x not in idx:
            add(intm, e)
        elif idx == {x}:
            add(merge, e)
        else:
            raise HdslError(f"'{e.name}' here mixes {names[x]}, which rfactor keeps, with the reduction variables "
                            "it moves into the intermediate", e.span,
                            f"reshape {names[x]} and the other reduction variables in separate directives")
    return intm, merge


def _derive(e: Directive, origin: dict) -> None:
    """The loops that directive e makes run over the reduction variables of the loops it splits."""
    a = e.args
    if e.name == "split":
        origin[a[1]] = origin[a[2]] = origin.get(a[0], set())
    elif e.name == "fuse":
        origin[a[2]] = origin.get(a[0], set()) | origin.get(a[1], set())
    elif e.name in ("tile", "gpu_tile") and len(a) >= 6:
        for x, xo, xi, _ in tile_parts(a):
            origin[xo], origin[xi] = origin.get(x, set()), origin.get(x, set())
    elif e.name in ("vectorize", "unroll", "parallel") and len(a) == 2:
        origin[a[0] + "_i"] = origin.get(a[0], set())


def _factor(f: Func, stage: int, d: Directive, defs, scheds) -> Func:
    u = defs[id(f)].updates[stage]
    rvar_name, new_var = d.args
    where = d.span
    if u.rdom is None:
        raise HdslError("rfactor needs an update over an rdom", where)
    elems = prove_associativity(f, u.args, u.values)
    if elems is None:
        raise HdslError("rfactor needs an associative update: f(...) = f(...) + e (or *, min, max, &&, ||), "
                        "or an argmin/argmax tuple", where,
                        "as in Halide, each value must combine f's previous value at the left-hand side with a "
                        "new value free of f, e.g. f(x) = min(f(x), e) or "
                        "f(x) = (min(f(x)[0], e), select(f(x)[0] < e, f(x)[1], r.x))")
    rd = u.rdom
    x = [i for i in range(len(rd.bounds)) if RVar(rd, i).name == rvar_name]
    if not x:
        raise HdslError(f"'{rvar_name}' is not a dimension of this update's rdom", where)
    x = x[0]
    if any(el.kind == "select" for el in elems) and x != len(rd.bounds) - 1:
        outer = RVar(rd, len(rd.bounds) - 1).name
        raise HdslError(f"rfactor of '{rvar_name}' would change which point an argmin/argmax picks among equal "
                        f"values: its ties go to the first point in rdom order", where,
                        f"factor out the outermost reduction variable, rfactor({outer}, {new_var}), "
                        "as Halide requires for non-commutative operators")
    pure = list(f.args)
    if new_var in pure:
        raise HdslError(f"'{new_var}' is already a pure var of '{f.name}'", where)
    types = [v.type for v in u.values]
    g = Func(f"{f.name}.intm{stage}", args=pure + [new_var], implicit=True, span=f.span)
    g.values = [identity(el, t) for el, t in zip(elems, types)]
    # both new rdoms keep every dim (and so every RVar's name, which the stage's directives
    # use), the one the other does not run over reduced to one point
    point = (Const(I32, 0), Const(I32, 1))
    new_rd = RDom(rd.name, [point if i == x else b for i, b in enumerate(rd.bounds)], None, rd.span)
    gargs = tuple(u.args) + (Var(new_var),)

    def to_intm(expr):
        def visit(n):
            if isinstance(n, RVar) and n.rdom is rd:
                if n.index == x:
                    return Var(new_var)
                return RVar(new_rd, n.index)
            return None
        e = substitute(expr, visit)
        # f's previous value becomes the intermediate's (at the same, renamed coordinates)
        return substitute(e, lambda n: FuncCall(g, n.args + (Var(new_var),), n.index, n.type)
                          if isinstance(n, FuncCall) and n.func is f else None)
    if rd.predicate is not None:
        new_rd.predicate = to_intm(rd.predicate)
    g_update = Update([to_intm(a) for a in gargs], [to_intm(v) for v in u.values], new_rd, u.span)
    g.updates = [g_update]
    # f's update now folds the intermediate over r.x alone, at every point of f (Halide: the
    # reducing stage's args are the pure vars, so a histogram's merge runs over all its bins)
    x_rd = RDom(rd.name, [b if i == x else point for i, b in enumerate(rd.bounds)], None, rd.span)
    pargs = tuple(Var(a) for a in pure)
    prev = [FuncCall(f, pargs, i, t) for i, t in enumerate(types)]
    part = [FuncCall(g, pargs + (RVar(x_rd, x),), i, t) for i, t in enumerate(types)]
    defs[id(f)].updates[stage] = Update(list(pargs), combine(elems, prev, part), x_rd, u.span)
    defs[id(g)] = Definitions(g, list(g.values), [g_update])
    scheds[id(g)] = FuncSchedule(Level("root"), Level("root"),
                                 {-1: [Directive("parallel", [new_var], where, -1)],
                                  0: [Directive("parallel", [new_var], where, 0)]})
    return g

