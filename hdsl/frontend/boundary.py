"""`use boundary`: Halide's BoundaryConditions for inputs of any dimensionality.

Each returns a Func over all integers equal to the input inside its run-time
bounds. Every coordinate is finally clamped into the buffer (a no-op for the
values the formula gives), so bounds inference sees the input's own region."""
from __future__ import annotations

from hdsl.frontend.values import FuncVal, InputVal
from hdsl.ir import ops
from hdsl.ir.expr import BinOp, BufferProp, Const, Expr, InputCall, Select, Var
from hdsl.ir.types import BOOL, I32


def _i(op, a, b) -> Expr:
    return BinOp(op, a, b, BOOL if op in ("<", ">", "<=", ">=", "||") else I32)


def boundary_call(el, name, n, scope, ctx):
    want = 2 if name == "constant_exterior" else 1
    if len(n.args) != want:
        el.error(f"{name} takes {want} argument{'s' if want > 1 else ''}", n.span)
    from hdsl.frontend.elaborate import DefContext
    src = el.value(n.args[0], scope, DefContext(None, None, partial_ok=True))
    if not isinstance(src, InputVal):
        el.error(f"{name} needs an input buffer (its bounds are known at run time)", n.args[0].span,
                 "pass the input itself, e.g. repeat_edge(img)")
    b = src.buffer
    one = Const(I32, 1)
    dims = [f"_{i}" for i in range(b.dims)]
    coords, outside = [], None
    for i, v in enumerate(dims):
        x = Var(v)
        lo = BufferProp(b, i, "min")
        ext = BufferProp(b, i, "extent")
        last = _i("-", _i("+", lo, ext), one)
        rel = _i("-", x, lo)
        if name == "mirror_image":
            period = _i("*", ext, Const(I32, 2))
            m = _i("%", rel, period)
            c = _i("+", Select(_i("<", m, ext), m, _i("-", _i("-", period, one), m), I32), lo)
        elif name == "mirror_interior":
            period = _i("*", _i("-", ext, one), Const(I32, 2))
            m = _i("%", rel, period)
            c = _i("+", Select(_i("<", m, ext), m, _i("-", period, m), I32), lo)
        elif name == "repeat_image":
            c = _i("+", _i("%", rel, ext), lo)
        else:
            c = x
        coords.append(_i("max", _i("min", c, last), lo))
        if name == "constant_exterior":
            out = _i("||", _i("<", x, lo), _i(">", x, last))
            outside = out if outside is None else _i("||", outside, out)
    body: Expr = InputCall(b, tuple(coords), b.type)
    if name == "constant_exterior":
        value = el.expr(n.args[1], scope, DefContext(None, []))
        if ops.is_literal(value):
            value = el.type_rule(ops.coerce_literal, value, b.type, span=n.args[1].span)
        elif value.type != b.type and not value.type.is_error():
            el.error(f"the exterior value has type {value.type}, but input '{b.name}' has type {b.type}",
                     n.args[1].span, f"cast it: {b.type}(...)")
        body = Select(outside, value, body, b.type)
    f = el.new_func(f"{name}({b.name})", n.span, implicit=True)
    f.args = dims
    f.values = [body]
    return FuncVal(f)
