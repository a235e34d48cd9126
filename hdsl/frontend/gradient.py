"""`derivative(loss)` and `grad(x)` in the algorithm block (docs/autodiff.md).

`grad = derivative(loss)` differentiates a zero-dimensional float Func at
once (every Func it reads is complete by then); `grad(img)`, `grad(f)` are
Funcs over the same coordinates as img and f, and `grad(p)` for a param is a
float value. Something the loss does not depend on has a zero gradient."""
from __future__ import annotations

from hdsl.autodiff.derivative import DerivativeError, propagate_adjoints
from hdsl.frontend import ast
from hdsl.frontend.values import ExprVal, FuncVal, GradVal, InputVal
from hdsl.ir.expr import Const, FuncCall, Param
from hdsl.ir.func import topo_order


def derivative_call(el, n, scope, ctx):
    from hdsl.frontend.elaborate import DefContext
    if len(n.args) != 1:
        el.error(f"derivative takes one argument (the loss), given {len(n.args)}", n.span,
                 "write grad = derivative(loss), where loss() = sum(...)")
    v = el.value(n.args[0], scope, DefContext(None, None, partial_ok=True))
    if not isinstance(v, FuncVal):
        el.error(f"derivative needs a Func (the loss), not {el.describe(v)}", n.args[0].span,
                 "define the loss as a Func of no coordinates, e.g. loss() = sum((out(r.x, r.y) - "
                 "target(r.x, r.y)) * (out(r.x, r.y) - target(r.x, r.y)))")
    try:
        grad = propagate_adjoints(v.func, lambda name, span: el.new_func(name, span))
    except DerivativeError as e:
        d = e.diagnostics[0]
        el.error(d.message, d.span or n.span, d.hint, [("while differentiating here", n.span)])
    el.gradient_funcs.extend(grad.made)
    el.gradient_snapshots.append((n.span, [(f, len(f.updates)) for f in topo_order([v.func])]))
    return GradVal(grad)


def check_gradients_current(el) -> None:
    """A Func updated after derivative(...) differentiated it would make a stale gradient."""
    for where, funcs in el.gradient_snapshots:
        for f, count in funcs:
            if len(f.updates) > count:
                el.sink.error(f"'{f.name}' gets an update after derivative(...) differentiated it",
                              f.updates[count].span, "write every definition of the loss and the Funcs it "
                              "reads before 'derivative'", [("differentiated here", where)])
                return


def gradient_call(el, gv: GradVal, n, scope, ctx):
    try:
        return _gradient_call(el, gv, n, scope, ctx)
    except DerivativeError as e:
        d = e.diagnostics[0]
        el.error(d.message, d.span or n.span, d.hint, [("the gradient is asked for here", n.span)])


def _gradient_call(el, gv: GradVal, n, scope, ctx):
    from hdsl.frontend.elaborate import DefContext
    grad = gv.gradient
    if len(n.args) != 1 or not isinstance(n.args[0], ast.Name):
        el.error("a gradient is called with one name: the Func, input or param to differentiate by",
                 n.span, f"e.g. {el.text(n.func.span) or 'grad'}(img)")
    v = el.value(n.args[0], scope, DefContext(None, None, partial_ok=True))
    what = n.args[0].id
    if isinstance(v, InputVal):
        b = v.buffer
        _float_or_error(el, b.type, f"input '{b.name}'", n.args[0].span)
        d = grad.of_input(b)
        return FuncVal(d if d is not None else _zero(el, f"d_{b.name}", b.dims, b.type, n.span))
    if isinstance(v, FuncVal):
        f = v.func
        if len(f.types) != 1:
            el.error(f"'{f.name}' has {len(f.types)} values; a gradient is taken of a Func with one",
                     n.args[0].span)
        _float_or_error(el, f.types[0], f"'{f.name}'", n.args[0].span)
        d = grad.of_func(f)
        return FuncVal(d if d is not None else _zero(el, f"d_{f.name}", f.dims, f.types[0], n.span))
    if isinstance(v, ExprVal) and isinstance(v.expr, Param):
        p = v.expr
        _float_or_error(el, p.type, f"param '{p.name}'", n.args[0].span)
        d = grad.of_param(p.name)
        if d is None:
            return ExprVal(Const(p.type, 0.0))
        return ExprVal(FuncCall(d, (), 0, p.type))
    el.error(f"'{what}' is {el.describe(v)}; a gradient is taken by a Func, an input or a param",
             n.args[0].span)


def _float_or_error(el, t, what, span):
    if not t.is_float():
        el.error(f"{what} is {t}; only float values have derivatives", span,
                 "differentiate by a float Func computed from it, e.g. f(x, y) = f32(img(x, y))")


def _zero(el, name, dims, t, span):
    f = el.new_func(name, span)
    f.args = list("xyzw"[:dims]) if dims <= 4 else [f"x{i}" for i in range(dims)]
    f.values = [Const(t, 0.0)]
    return f
