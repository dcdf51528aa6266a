"""PSK types: tensors with named axes, records and tuples.

One Python model, with two spellings: the MLIR type of the `psk` dialect
(`!psk.real<array<i64: 4, 2>, ["batch", ""]>`) and the readable text the dumps print
(`ℝ[batch: 4, 2]`). An axis has a size and, optionally, a name; an unnamed axis is
positional. A stack of L layers of a module is the record of its parameters with a
leading axis of size L on every leaf.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

KINDS = ("real", "index", "bool")
_TEXT_KIND = {"real": "ℝ", "index": "nat", "bool": "bool"}


def i64_array(values) -> str:
    """MLIR's dense i64 array attribute: `array<i64: 4, 2>`, and `array<i64>` when empty."""
    items = ", ".join(str(v) for v in values)
    return f"array<i64: {items}>" if items else "array<i64>"


@dataclass(frozen=True)
class Axis:
    name: str | None
    size: int

    def text(self) -> str:
        return f"{self.name}: {self.size}" if self.name else str(self.size)


@dataclass(frozen=True)
class TensorType:
    kind: str  # "real" | "index" | "bool"
    axes: tuple[Axis, ...] = ()

    @cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @cached_property
    def names(self) -> tuple[str | None, ...]:
        return tuple(a.name for a in self.axes)

    @cached_property
    def rank(self) -> int:
        return len(self.axes)

    @cached_property
    def size(self) -> int:
        n = 1
        for a in self.axes:
            n *= a.size
        return n

    def with_axes(self, axes) -> TensorType:
        return TensorType(self.kind, tuple(axes))

    def with_kind(self, kind: str) -> TensorType:
        return TensorType(kind, self.axes)

    def shape_attr(self) -> str:
        """The shape as MLIR spells it, `array<i64: 4, 2>`."""
        return i64_array(a.size for a in self.axes)

    def names_attr(self) -> str:
        """The axis names as MLIR spells them, `["batch", ""]` (`""` for a positional axis)."""
        return "[" + ", ".join(f'"{a.name or ""}"' for a in self.axes) + "]"

    def mlir(self) -> str:
        return f"!psk.{self.kind}<{self.shape_attr()}, {self.names_attr()}>"

    def text(self) -> str:
        head = _TEXT_KIND[self.kind]
        if not self.axes:
            return head
        return head + "[" + ", ".join(a.text() for a in self.axes) + "]"


def alignment(t: TensorType, out: TensorType) -> tuple[int | None, ...]:
    """For each axis of `out`, the axis of operand `t` that feeds it, or None where `t`
    repeats: the trailing rule when `t`'s axes end `out`'s, else by name."""
    n = t.rank
    if t.axes == out.axes[out.rank - n :]:
        return (None,) * (out.rank - n) + tuple(range(n))
    where = {a.name: i for i, a in enumerate(t.axes)}
    return tuple(where.get(a.name) if a.name else None for a in out.axes)


@dataclass(frozen=True)
class RecordType:
    fields: tuple[tuple[str, PskType], ...]

    def field(self, name: str) -> PskType:
        for n, t in self.fields:
            if n == name:
                return t
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.fields)

    def mlir(self) -> str:
        names = "[" + ", ".join(f'"{n}"' for n, _ in self.fields) + "]"
        types = "[" + ", ".join(t.mlir() for _, t in self.fields) + "]"
        return f"!psk.record<{names}, {types}>"

    def text(self) -> str:
        return "{" + ", ".join(f"{n}: {t.text()}" for n, t in self.fields) + "}"


@dataclass(frozen=True)
class TupleType:
    items: tuple[PskType, ...]

    def mlir(self) -> str:
        return "tuple<" + ", ".join(t.mlir() for t in self.items) + ">"

    def text(self) -> str:
        return (
            "("
            + ", ".join(t.text() for t in self.items)
            + ("," if len(self.items) == 1 else "")
            + ")"
        )


PskType = TensorType | RecordType | TupleType

REAL_SCALAR = TensorType("real")
INDEX_SCALAR = TensorType("index")


def stacked(t: PskType, count: int) -> PskType:
    """A layer's type as a stack of `count` layers holds it: a leading axis on every leaf."""
    if isinstance(t, TensorType):
        return t.with_axes((Axis(None, count), *t.axes))
    if isinstance(t, RecordType):
        return RecordType(tuple((n, stacked(f, count)) for n, f in t.fields))
    raise TypeError(f"cannot stack {t.text()}")


def unstacked(t: PskType) -> PskType:
    """One layer of a stack: every leaf without its leading axis."""
    if isinstance(t, TensorType):
        return t.with_axes(t.axes[1:])
    if isinstance(t, RecordType):
        return RecordType(tuple((n, unstacked(f)) for n, f in t.fields))
    raise TypeError(f"cannot take a layer of {t.text()}")


def leaves(t: PskType, prefix: str = "") -> list[tuple[str, TensorType]]:
    """The tensor leaves of a type with their dotted paths, in declaration order."""
    if isinstance(t, TensorType):
        return [(prefix, t)]
    if isinstance(t, RecordType):
        out = []
        for n, f in t.fields:
            out.extend(leaves(f, f"{prefix}.{n}" if prefix else n))
        return out
    if isinstance(t, TupleType):
        out = []
        for i, f in enumerate(t.items):
            out.extend(leaves(f, f"{prefix}.{i}" if prefix else str(i)))
        return out
    raise TypeError(f"not a PSK type: {t!r}")


# ---- reading MLIR type text -------------------------------------------------------------

_TOKEN = re.compile(
    r'\s*(?:(!psk\.\w+|tuple|array)|("(?:[^"\\]|\\.)*")|(-?\d+)|(i64)|([<>\[\],:]))'
)


class _Reader:
    def __init__(self, text: str):
        self.toks = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"not a PSK type: {text!r} (at {pos})")
            self.toks.append(next(g for g in m.groups() if g is not None))
            pos = m.end()
        self.i = 0
        self.text = text

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ValueError(f"not a PSK type: {self.text!r} (expected {want!r}, got {tok!r})")
        self.i += 1
        return tok

    def comma_list(self, close: str, item):
        out = []
        if self.peek() == close:
            self.take(close)
            return out
        while True:
            out.append(item())
            if self.take() == close:
                return out

    def string(self) -> str:
        return self.take()[1:-1]

    def type(self) -> PskType:
        head = self.take()
        if head == "tuple":
            self.take("<")
            return TupleType(tuple(self.comma_list(">", self.type)))
        self.take("<")
        if head in ("!psk.real", "!psk.index", "!psk.bool"):
            self.take("array")
            self.take("<")
            self.take("i64")
            shape: list[int] = []
            if self.take() == ":":
                shape = [int(x) for x in self.comma_list(">", self.take)]
            self.take(",")
            self.take("[")
            names = self.comma_list("]", self.string)
            self.take(">")
            return TensorType(
                head[5:], tuple(Axis(n or None, s) for n, s in zip(names, shape, strict=True))
            )
        if head == "!psk.record":
            self.take("[")
            names = self.comma_list("]", self.string)
            self.take(",")
            self.take("[")
            types = self.comma_list("]", self.type)
            self.take(">")
            return RecordType(tuple(zip(names, types, strict=True)))
        raise ValueError(f"not a PSK type: {self.text!r}")


@lru_cache(maxsize=4096)
def parse_mlir_type(text: str) -> PskType:
    """The PSK type an MLIR type prints as (`str(value.type)`)."""
    r = _Reader(text)
    t = r.type()
    if r.peek() is not None:
        raise ValueError(f"not a PSK type: {text!r}")
    return t
