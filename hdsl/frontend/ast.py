"""The surface syntax tree. Every node carries the span it came from."""
from __future__ import annotations

from dataclasses import dataclass, field

from hdsl.diagnostics import Span


@dataclass(eq=False)
class Node:
    span: Span


# ---- expressions ----
@dataclass(eq=False)
class Name(Node):
    id: str


@dataclass(eq=False)
class IntLit(Node):
    value: int


@dataclass(eq=False)
class FloatLit(Node):
    value: float
    text: str


@dataclass(eq=False)
class BoolLit(Node):
    value: bool


@dataclass(eq=False)
class StrLit(Node):
    value: str


@dataclass(eq=False)
class BinOp(Node):
    op: str
    left: Node
    right: Node
    op_span: Span | None = None


@dataclass(eq=False)
class UnaryOp(Node):
    op: str
    operand: Node


@dataclass(eq=False)
class Ternary(Node):
    cond: Node
    then: Node
    other: Node


@dataclass(eq=False)
class Call(Node):
    func: Node
    args: list[Node]


@dataclass(eq=False)
class Index(Node):
    obj: Node
    index: Node


@dataclass(eq=False)
class Attr(Node):
    obj: Node
    name: str
    name_span: Span | None = None


@dataclass(eq=False)
class TupleLit(Node):
    items: list[Node]


@dataclass(eq=False)
class ListLit(Node):
    items: list[Node]


@dataclass(eq=False)
class Range(Node):
    lo: Node
    hi: Node


# ---- statements ----
@dataclass(eq=False)
class Assign(Node):
    target: Node
    op: str            # '=', '+=', '-=', '*=', '/='
    value: Node


@dataclass(eq=False)
class ExprStmt(Node):
    expr: Node


@dataclass(eq=False)
class Let(Node):
    name: str
    value: Node
    name_span: Span | None = None


@dataclass(eq=False)
class VarDecl(Node):
    names: list[str]
    name_spans: list[Span] = field(default_factory=list)


@dataclass(eq=False)
class RDomDecl(Node):
    name: str
    domain: Node
    where: Node | None
    name_span: Span | None = None


@dataclass(eq=False)
class For(Node):
    var: str
    lo: Node
    hi: Node
    body: list[Node]
    var_span: Span | None = None


@dataclass(eq=False)
class Return(Node):
    value: Node


# ---- top level ----
@dataclass(eq=False)
class PipelineDecl(Node):
    name: str
    name_span: Span | None = None


@dataclass(eq=False)
class BufferDecl(Node):
    kind: str          # 'input' or 'output'
    name: str
    type_name: str
    type_span: Span
    dims: Node
    name_span: Span | None = None


@dataclass(eq=False)
class ParamDeclNode(Node):
    name: str
    type_name: str
    type_span: Span
    default: Node | None
    name_span: Span | None = None


@dataclass(eq=False)
class ConstDecl(Node):
    name: str
    value: Node
    name_span: Span | None = None


@dataclass(eq=False)
class Use(Node):
    target: str
    is_path: bool
    target_span: Span | None = None


@dataclass(eq=False)
class FnDef(Node):
    name: str
    params: list[str]
    body: list[Node]
    name_span: Span | None = None
    param_spans: list[Span] = field(default_factory=list)   # (for editors: where each parameter is named)


@dataclass(eq=False)
class AlgorithmBlock(Node):
    body: list[Node]


@dataclass(eq=False)
class ScheduleBlock(Node):
    name: str | None
    body: list[Node] | None
    name_span: Span | None = None


@dataclass(eq=False)
class Module(Node):
    items: list[Node] = field(default_factory=list)
