"""The gradient of a pipeline's loss as a pipeline of its own (the Python API's p.gradient)."""
from __future__ import annotations

import copy

from hdsl.autodiff.derivative import propagate_adjoints
from hdsl.autodiff.schedule import schedule_gradients
from hdsl.diagnostics import HdslError
from hdsl.ir.expr import Const, FuncCall, Var
from hdsl.ir.func import Directive, Func, Pipeline, calls_in, definition_exprs, topo_order


def gradient_pipeline(ir: Pipeline, loss: str, wrt: list[str]) -> tuple[Pipeline, list[tuple[str, str]]]:
    """A pipeline whose outputs are the loss (one element) and ∂loss/∂w for each name in wrt (an input,
    a param or a Func of the algorithm block); with each output's kind, ('loss'|'input'|'param'|'func', name)."""
    f = ir.named.get(loss)
    if f is None:
        names = ", ".join(sorted(ir.named)) or "(none)"
        raise HdslError(f"pipeline '{ir.name}' has no Func named '{loss}'", None, f"its Funcs: {names}")
    taken = {g.name for g in list(ir.named.values()) + topo_order([f] + ir.outputs)}

    def new_func(name, span):
        base, k = name, 1
        while name in taken:
            k += 1
            name = f"{base}${k}"
        taken.add(name)
        return Func(name, span=span)

    grad = propagate_adjoints(f, new_func)
    outputs, kinds = [], []

    def output(name, d, dims, t):
        o = new_func(name, None)
        o.args = ["x", "y", "z", "w"][:dims] if dims <= 4 else [f"x{i}" for i in range(dims)]
        if d is None:
            o.values = [Const(t, 0.0)]
        else:
            o.values = [FuncCall(d, tuple(Var(a) for a in o.args[:d.dims]), 0, t)]
        outputs.append(o)

    lo = new_func(f"{loss}_value", None)
    lo.args = ["x"]
    lo.values = [FuncCall(f, (), 0, f.types[0])]
    outputs.append(lo)
    kinds.append(("loss", loss))
    inputs = {b.name: b for b in ir.inputs}
    params = {p.name: p for p in ir.params}
    for w in wrt:
        if w in inputs:
            b = inputs[w]
            _float(b.type, f"input '{w}'")
            output(f"grad_{w}", grad.of_input(b), b.dims, b.type)
            kinds.append(("input", w))
        elif w in params:
            p = params[w]
            _float(p.type, f"param '{w}'")
            output(f"grad_{w}", grad.of_param(w), 1, p.type)
            kinds.append(("param", w))
        elif w in ir.named:
            g = ir.named[w]
            if len(g.types) != 1:
                raise HdslError(f"'{w}' has {len(g.types)} values; a gradient is taken of a Func with one", None)
            _float(g.types[0], f"'{w}'")
            output(f"grad_{w}", grad.of_func(g), g.dims, g.types[0])
            kinds.append(("func", w))
        else:
            known = ", ".join(sorted(set(inputs) | set(params) | set(ir.named)))
            raise HdslError(f"pipeline '{ir.name}' has no input, param or Func named '{w}'", None,
                            f"differentiate by one of: {known}")
    schedules = {}
    for name, s in ir.schedules.items():
        s2 = copy.copy(s)
        s2.directives = {k: list(v) for k, v in s.directives.items()}
        s2.funcs = dict(s.funcs)
        schedules[name] = s2
    schedule_gradients(schedules, grad.made)
    # The forward pipeline's outputs stay computed at the root (other Funcs' schedules may
    # say compute_at(out, y), and out is no output here). A forward Func that the gradient
    # reads and that the schedule computes inside another's loops is computed at the root
    # instead, its other directives kept: the gradient's loops are not the forward ones
    # (the simplest checkpointing rule; name the Func in a schedule of p.gradient's own to do
    # otherwise).
    made = {id(g) for g in grad.made}
    read = {id(c.func) for g in grad.made for c in calls_in(definition_exprs(g))
            if isinstance(c, FuncCall) and id(c.func) not in made}
    for name, s in schedules.items():
        if s.auto:
            continue
        for g in topo_order([f]):
            ds = s.for_func(g)
            placed = [d for d in ds if d.name in ("compute_at", "store_at", "compute_inline", "store_root",
                                                   "compute_root")]
            if g in ir.outputs and not placed or id(g) in read and any(d.name == "compute_at" for d in ds):
                s.funcs[id(g)] = g
                s.directives[id(g)] = [Directive("compute_root", [])] + [d for d in ds if d not in placed]
    out = Pipeline(f"{ir.name}_gradient", ir.inputs, ir.params, outputs, [o.types[0] for o in outputs],
                   schedules, ir.filename, "", named=dict(ir.named))
    return out, kinds


def _float(t, what):
    if not t.is_float():
        raise HdslError(f"{what} is {t}; only float values have derivatives", None,
                        "differentiate by a float Func computed from it")
