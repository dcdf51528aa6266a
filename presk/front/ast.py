"""The abstract syntax of PSK: what the parser builds and the elaborator reads.

Every node has a `span` (file, line, column) for error messages. Sizes inside types and
brackets are ordinary expressions, evaluated when the consts and dims are bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from presk.errors import Span


@dataclass
class Node:
    span: Span


# ---- types ---------------------------------------------------------------------------


@dataclass
class AxisExpr(Node):
    name: str | None  # `name: size`; None for a plain entry, which the binding decides
    size: Expr


@dataclass
class TensorTypeExpr(Node):
    kind: str  # "real" | "index" | "bool"
    axes: list[AxisExpr]
    bound: Expr | None = None  # nat{V}[...]: the values lie in [0, V)


@dataclass
class TupleTypeExpr(Node):
    items: list[TypeExpr]


@dataclass
class RecordTypeExpr(Node):
    fields: list[tuple[str, TypeExpr]]


TypeExpr = TensorTypeExpr | TupleTypeExpr | RecordTypeExpr


# ---- expressions -----------------------------------------------------------------------


@dataclass
class IntLit(Node):
    value: int


@dataclass
class FloatLit(Node):
    text: str


@dataclass
class Name(Node):
    id: str


@dataclass
class Field(Node):
    obj: Expr
    name: str


@dataclass
class Item(Node):
    obj: Expr
    index: int


@dataclass
class Arg(Node):
    name: str | None  # a keyword argument's name
    value: Expr


@dataclass
class Call(Node):
    fn: Expr
    args: list[Arg]


@dataclass
class StaticAxis(Node):
    name: str
    size: Expr


@dataclass
class StaticRename(Node):
    src: Expr
    dst: Expr


StaticArg = "StaticAxis | StaticRename | Expr"


@dataclass
class Static(Node):
    """`fn[args]`: a primitive's static arguments (axes, sizes, renames, numbers)."""

    fn: Expr
    args: list


@dataclass
class Neg(Node):
    x: Expr


@dataclass
class BinOp(Node):
    op: str  # "+", "-", "*", "/", "·"
    lhs: Expr
    rhs: Expr


@dataclass
class TupleLit(Node):
    items: list[Expr]


@dataclass
class RecordLit(Node):
    fields: list[tuple[str, Expr]]


Expr = IntLit | FloatLit | Name | Field | Item | Call | Static | Neg | BinOp | TupleLit | RecordLit


def chain(e: Expr) -> tuple[Expr, list[BinOp]]:
    """`a + b - c …` as its first operand and its operations, left to right: a sum of a
    thousand terms is a thousand left operands deep, so readers loop over it instead of
    recursing (presk/front/parser.py)."""
    links = []
    while isinstance(e, BinOp):
        links.append(e)
        e = e.lhs
    return e, links[::-1]


# ---- declarations ------------------------------------------------------------------------


@dataclass
class Let(Node):
    names: list[str]  # one name, or the names a tuple is taken apart into
    is_tuple: bool
    value: Expr


@dataclass
class FnParam(Node):
    name: str
    type: TypeExpr | None


@dataclass
class FnDef(Node):
    name: str
    params: list[FnParam]
    ret: TypeExpr | None
    lets: list[Let]
    result: Expr


@dataclass
class FnAlias(Node):
    """`fn name = expr`: a function made from another (`grad(loss)`)."""

    name: str
    value: Expr


@dataclass
class Init(Node):
    kind: str  # zeros | ones | normal | uniform
    args: list[Arg]


@dataclass
class ParamDef(Node):
    name: str
    type: TypeExpr
    init: Init


@dataclass
class SubDef(Node):
    name: str
    module: str
    const_args: list[Expr]
    stack: Expr | None  # `stack{L} Block{...}`: the number of layers
    module_span: Span | None = None  # where the module's name is written


@dataclass
class ModuleDef(Node):
    name: str
    consts: list[str]
    members: list[ParamDef | SubDef | FnDef | FnAlias]

    def member(self, name: str):
        for m in self.members:
            if m.name == name:
                return m
        return None


@dataclass
class DimDecl(Node):
    names: list[str]
    spans: list[Span] = field(default_factory=list)  # where each name is written
    defaults: dict[str, int] = field(default_factory=dict)  # `dim N = 32`: N unless bound


@dataclass
class PrecisionDecl(Node):
    kind: str  # budget
    args: list[Arg]


@dataclass
class SourceTree:
    """A whole program's syntax tree: its items by kind and in source order, and the
    source texts they came from (the prelude's too)."""

    file: str
    text: str
    dims: list[tuple[str, Span]] = field(default_factory=list)
    dim_defaults: dict[str, int] = field(default_factory=dict)
    modules: dict[str, ModuleDef] = field(default_factory=dict)
    functions: dict[str, FnDef | FnAlias] = field(default_factory=dict)
    precision: PrecisionDecl | None = None
    items: list[Node] = field(default_factory=list)  # in source order, for dumps
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, the prelude's too

    def source(self, file: str) -> str:
        return self.sources.get(file, self.text)
