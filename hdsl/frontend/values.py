"""Compile-time values the elaborator binds names to."""
from __future__ import annotations

from dataclasses import dataclass, field

from hdsl.diagnostics import Span
from hdsl.frontend import ast
from hdsl.ir.expr import Expr
from hdsl.ir.func import Func, InputBuffer, RDom


@dataclass(eq=False)
class FuncVal:
    func: Func


@dataclass(eq=False)
class ArrayVal:
    name: str
    elems: dict[int, object] = field(default_factory=dict)
    poisoned: bool = False      # a definition of some element had an error


@dataclass(eq=False)
class ExprVal:
    expr: Expr


@dataclass(eq=False)
class VarVal:
    name: str


@dataclass(eq=False)
class RDomVal:
    rdom: RDom


@dataclass(eq=False)
class InputVal:
    buffer: InputBuffer


@dataclass(eq=False)
class DimVal:
    buffer: InputBuffer
    dim: int


@dataclass(eq=False)
class ListVal:
    items: list


@dataclass(eq=False)
class RangeVal:
    lo: Expr
    hi: Expr


@dataclass(eq=False)
class TupleVal:
    """A tuple: a tuple literal, or a call to a Func with several values."""
    items: list[Expr]


@dataclass(eq=False)
class FnVal:
    node: ast.FnDef
    scope: "Scope"


@dataclass(eq=False)
class OutputSlot:
    """A declared output not yet defined in the algorithm."""
    name: str
    type_name: str
    dims: int | None          # None: the declaration's dimension count was wrong
    span: Span                # the declared name
    type_span: Span | None = None
    dims_span: Span | None = None   # `u8[2]`


@dataclass(eq=False)
class StrVal:
    value: str


@dataclass(eq=False)
class PoisonVal:
    """A name whose definition had an error (already reported): using it says nothing more."""
    name: str


class Scope:
    def __init__(self, parent: "Scope | None" = None, block: bool = True):
        self.parent = parent
        self.names: dict[str, object] = {}
        self.block = block

    def lookup(self, name: str):
        s = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def define(self, name: str, value) -> None:
        s = self
        while not s.block:
            s = s.parent
        s.names[name] = value

    def all_names(self):
        s, out = self, set()
        while s is not None:
            out |= set(s.names)
            s = s.parent
        return out


@dataclass(eq=False)
class GradVal:
    """`grad = derivative(loss)`: call it with a Func, input or param for its adjoint."""
    gradient: object          # hdsl.autodiff.derivative.Gradient
