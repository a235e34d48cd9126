"""`f.iir(±v, lo..hi, b0, [a1, …, ak])`: a recursive filter as an update.

For v over [lo, hi), upward for '+' and downward for '-':
    f(v) = b0 * f(v) + a1 * f(v ∓ 1) + … + ak * f(v ∓ k)
with f taken as zero outside [lo, hi). The read of f(v ∓ j) is clamped into
[lo, hi) and then masked by a select, so no value outside the range is ever
required (bounds inference sees only [lo, hi))."""
from __future__ import annotations

from hdsl.frontend import ast
from hdsl.frontend.errors import Poisoned
from hdsl.frontend.values import ListVal, RangeVal
from hdsl.ir import ops
from hdsl.ir.expr import BinOp, Const, FuncCall, RVar, Var
from hdsl.ir.func import RDom, Update
from hdsl.ir.types import BOOL, I32


def add_iir(el, f, call: ast.Call, scope):
    from hdsl.frontend.elaborate import DefContext
    from hdsl.schedule.record import directive_span
    where = directive_span(call)
    if not f.defined:
        el.error(f"'{f.name}' must be defined before '.iir'", where,
                 f"give it a pure definition first, e.g. {f.name}(x, y) = img(x, y)")
    if f.values and any(t.is_error() for t in f.types):
        raise Poisoned()
    if len(call.args) != 4:
        el.error(f".iir takes 4 arguments, given {len(call.args)}", where,
                 "write .iir(±v, lo..hi, b0, [a1, ...]), e.g. rf.iir(+x, 0..img.width, b0, [a1, a2])")
    dir_node, range_node, b0_node, coef_node = call.args
    if not (isinstance(dir_node, ast.UnaryOp) and dir_node.op in "+-" and isinstance(dir_node.operand, ast.Name)):
        el.error("the first argument of .iir is a direction and a pure var, '+x' or '-x'", dir_node.span,
                 "'+x' filters upward along x (causal), '-x' downward (anticausal)")
    v = dir_node.operand.id
    if v not in f.args:
        el.error(f"'{v}' is not a pure var of '{f.name}'", dir_node.operand.span,
                 f"its pure vars are {', '.join(f.args)}")
    if len(f.types) != 1:
        el.error(f".iir applies to a Func with one value; '{f.name}' has {len(f.types)}", where)
    d = f.args.index(v)
    ctx = DefContext(None, [])
    rng = el.value(range_node, scope, ctx)
    if not isinstance(rng, RangeVal):
        el.error("the second argument of .iir is a range 'lo..hi'", range_node.span, "e.g. 0..img.width")
    lo, hi = el.as_i32(rng.lo), el.as_i32(rng.hi)
    coefs = el.value(coef_node, scope, ctx)
    if not isinstance(coefs, ListVal):
        el.error("the feedback coefficients are a list", coef_node.span, "e.g. [a1, a2], or [a1] for one")
    b0 = el.expr(b0_node, scope, ctx)
    feedback = [el.as_operand(c, coef_node, ctx) for c in coefs.items]
    t = f.types[0]
    ext = ops.binop("-", hi, lo)
    rd = RDom(f"{f.name}.iir{len(f.updates)}", [(lo, ext)], None, call.span)
    r = RVar(rd, 0)
    if dir_node.op == "+":
        coord = r
    else:
        coord = BinOp("-", BinOp("-", BinOp("+", lo, hi, I32), Const(I32, 1), I32), r, I32)

    def at(c):
        return FuncCall(f, tuple(c if i == d else Var(a) for i, a in enumerate(f.args)), 0, t)

    def mul(coef, value, node):
        return el.type_rule(ops.binop, "*", coef, value, span=node.span)

    total = mul(b0, at(coord), b0_node)
    coefs = [total.a if isinstance(total, BinOp) and total.op == "*" else None]
    for j, a in enumerate(feedback, start=1):
        if dir_node.op == "+":
            src = BinOp("-", coord, Const(I32, j), I32)
            inside = BinOp(">=", src, lo, BOOL)
            safe = BinOp("max", src, lo, I32)
        else:
            src = BinOp("+", coord, Const(I32, j), I32)
            last = BinOp("-", hi, Const(I32, 1), I32)
            inside = BinOp("<=", src, last, BOOL)
            safe = BinOp("min", src, last, I32)
        term = el.type_rule(ops.select, inside, at(safe), Const(I32, 0, literal=True), span=coef_node.span)
        m = mul(a, term, coef_node)
        coefs.append(m.a if isinstance(m, BinOp) and m.op == "*" else None)
        total = el.type_rule(ops.binop, "+", total, m, span=call.span)
    if not total.type.is_error() and total.type != t:
        el.error(f"the filter computes {total.type} but '{f.name}' has type {t}", where,
                 f"give the coefficients type {t}")
    args = [coord if i == d else Var(a) for i, a in enumerate(f.args)]
    ok = all(c is not None and c.type == t for c in coefs)
    f.updates.append(Update(args, [total], rd, call.span,
                            (d, dir_node.op, lo, hi, coefs[0], coefs[1:]) if ok else None))
