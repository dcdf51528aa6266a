"""What every primitive shares: its record, typing errors, broadcasting, axis lookup.

A primitive is known by its language name (`softmax`) and its PSK-Core op
(`psk.softmax`), given with its arity and bracket arguments by its signature
(presk/language.py). What backends, passes and the precision tools ask of it (does it
gather, draw at random, run on the host, sum) are facts of its record, not lists of
names. Its typing rule has two halves:

- `bind(statics, operand_types) -> attrs`: the front end's static arguments (the part
  in brackets: axis names or positions, axis specs, renames, numbers) resolved against
  the operand types into the op's attributes (axis positions, names, strings);
- `infer(operand_types, attrs) -> result type`: what the op computes, given its
  attributes. `psk-verify` runs `infer` on every op and compares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from presk.ir.types import Axis, TensorType, alignment
from presk.language import Signature, counted


class TypingError(Exception):
    """A typing rule refused its operands; the caller locates the message."""


@dataclass(frozen=True)
class AxisSpec:
    """`name: size` inside brackets, as `causal_mask[seq: T, seq2: T]` gives it."""

    name: str
    size: int


@dataclass(frozen=True)
class Rename:
    """`src → dst` inside brackets: an axis (name or position) and its new name."""

    src: str | int
    dst: str | None


@dataclass(frozen=True)
class Number:
    """A number inside brackets, kept as its text so no precision is lost."""

    text: str

    @property
    def value(self) -> float:
        return float(self.text)


Static = str | int | AxisSpec | Rename | Number
Attrs = dict[str, object]


@dataclass
class Apply:
    """One application of a primitive, as an executor's semantics see it."""

    attrs: Attrs
    in_types: list[TensorType]
    out_type: TensorType
    site: str
    training: bool = False
    # A generator private to this application (its site, call path and step), for dropout
    # masks and samples.
    draw: Callable[[], object] | None = None


def _no_statics(prim: Prim, statics: list[Static], types: list[TensorType]) -> Attrs:
    if statics:
        raise TypingError(f"{prim.name} takes no arguments in brackets")
    return {}


@dataclass(frozen=True)
class Prim:
    signature: Signature  # name, op, arity, bracket arguments, how a program reaches it
    infer: Callable[[list[TensorType], Attrs], TensorType]
    bind: Callable[[Prim, list[Static], list[TensorType]], Attrs] = _no_statics
    # MLIR attribute name -> kind: "i64", "i64s" (dense array), "str", "strs"
    attr_kinds: dict[str, str] = field(default_factory=dict)
    kinds: tuple[str, ...] = ("real",)  # operand kinds, the last repeated
    result: str = "real"  # its result's kind: real, index, bool, or "any" (its operand's)
    elementwise: bool = False  # lifts over records, tuples and stacks leaf by leaf
    # The exact reference: (application, operand buffers) -> result buffer, exact reals
    # as object arrays of MPFR numbers at the run's precision (presk/prims/exact.py).
    reference: Callable[[Apply, list], object] | None = None
    # The certified reference: the same, on balls that contain the exact reals (Arb, through
    # presk/prims/balls.py); a mask or an index certain, or E8005 asking for more bits.
    ball: Callable[[Apply, list], object] | None = None
    # It can leave the reals (a division, a root, a logarithm): the ball reference checks
    # each of its results finite (a ball reaching 0 there is E8005; an exact 0, E8001).
    partial: bool = False
    # The adjoint, as PSK-Core ops: (emitter, operands, result, cotangent, need) -> one
    # cotangent per operand, None where `need` is False or the operand has none. The
    # emitter (presk/passes/psk_vjp.py) builds ops and knows the forward op's attributes.
    vjp: Callable[..., list] | None = None
    # Kernels (presk/kernel): an elementwise primitive gives its computation on scalars
    # already loaded, `scalar(kb, values, apply) -> value`, which fusion chains in one nest;
    # any other primitive its whole nest, `kernel(kb, apply)`, reading kb's inputs and
    # writing its output. A primitive with neither runs on the host.
    scalar: Callable | None = None
    kernel: Callable | None = None
    # Its kernel indexes by data: the second operand's indices, checked on the host first.
    gathers: bool = False
    # When it draws at random from its application's key: "training" (dropout's keep mask,
    # the identity otherwise) or "always" (sample's index); None: never.
    draws: str | None = None
    # What an output element costs (the precision tools' work): "one" (elementwise, a
    # move, a gather), "terms" (a contraction's k), "reads" (the operand elements it reads).
    work: str = "one"
    sums: int = 0  # how many leading operands its result is a sum over (a contraction's 2)
    # A contraction's terms an output element sums (its k), read off its application.
    terms: Callable[[Apply], int] | None = None
    doc: str = ""

    @property
    def name(self) -> str:
        return self.signature.name

    @property
    def op(self) -> str:
        return self.signature.op

    @property
    def arity(self) -> tuple[int, int]:
        return self.signature.arity

    @property
    def on_host(self) -> bool:
        """Neither a kernel rule nor a scalar one: the host computes it (a constant, a
        rename, a sample)."""
        return self.kernel is None and self.scalar is None

    def operand_kind(self, i: int) -> str:
        return self.kinds[min(i, len(self.kinds) - 1)]

    def check_operands(self, types: list[TensorType]) -> None:
        lo, hi = self.arity
        if not lo <= len(types) <= hi:
            raise TypingError(f"{self.name} takes {counted(lo, 'operand', hi)}, not {len(types)}")
        for i, t in enumerate(types):
            want = self.operand_kind(i)
            if want != "any" and t.kind != want:
                raise TypingError(
                    f"operand {i + 1} of {self.name} must be {_KIND_WORD[want]}, not {t.text()}"
                )

    def type_of(self, statics: list[Static], types: list[TensorType]) -> tuple[Attrs, TensorType]:
        """The attributes and result type of applying this primitive (front end)."""
        self.check_operands(types)
        attrs = self.bind(self, statics, types)
        return attrs, self.infer(types, attrs)


_KIND_WORD = {"real": "a real tensor", "index": "an index (nat) tensor", "bool": "a mask"}


def broadcast_axes(a: TensorType, b: TensorType) -> tuple[Axis, ...]:
    """The axes of an elementwise result of `a` and `b`.

    Trailing positions align when every aligned pair of axes has the same name (both
    unnamed counts) and size; the shorter operand then repeats over the leading axes of
    the longer. Otherwise the operand with fewer axes must have every axis named, each
    present in the other with the same size: it repeats by name, and the result has the
    other's order.
    """
    n = min(a.rank, b.rank)
    ta, tb = a.axes[a.rank - n :], b.axes[b.rank - n :]
    if all(x.name == y.name for x, y in zip(ta, tb, strict=True)):
        for x, y in zip(ta, tb, strict=True):
            if x.size != y.size:
                what = f"axis {x.name}" if x.name else "a trailing positional axis"
                raise TypingError(
                    f"{what} has size {x.size} in {a.text()} and {y.size} in {b.text()}"
                )
        return (a if a.rank >= b.rank else b).axes
    big, small = (a, b) if a.rank >= b.rank else (b, a)
    big_axes = {x.name: x for x in big.axes if x.name}
    if all(x.name in big_axes for x in small.axes):
        for x in small.axes:
            if big_axes[x.name].size != x.size:
                raise TypingError(
                    f"axis {x.name} has size {x.size} in {small.text()} "
                    f"and {big_axes[x.name].size} in {big.text()}"
                )
        return big.axes
    raise TypingError(
        f"cannot broadcast {a.text()} with {b.text()}: trailing axes differ in name, "
        "and not every axis of the smaller one is a named axis of the other"
    )


def aligned(data, t: TensorType, out: TensorType):
    """A view of `data` (of type `t`) broadcastable against a buffer of type `out`."""
    m = alignment(t, out)
    data = data.transpose([i for i in m if i is not None])
    return data.reshape([t.axes[i].size if i is not None else 1 for i in m])


def broadcast_fits(a: TensorType, b: TensorType, out: TensorType) -> bool:
    """Whether `a` and `b` broadcast together to exactly the axes of `out` (a rule that
    needs this says so in its own words, rather than with broadcasting's error)."""
    try:
        return broadcast_axes(a, b) == out.axes
    except TypingError:
        return False


def axis_position(t: TensorType, ref: str | int, what: str = "axis") -> int:
    """The position of an axis given by name or by position (negative from the end)."""
    if isinstance(ref, str):
        for i, a in enumerate(t.axes):
            if a.name == ref:
                return i
        raise TypingError(f"{t.text()} has no axis named {ref}")
    pos = ref + t.rank if ref < 0 else ref
    if not 0 <= pos < t.rank:
        raise TypingError(f"{t.text()} has no {what} at position {ref}")
    return pos


def one_axis(prim: Prim, statics: list[Static], types: list[TensorType]) -> Attrs:
    """Bind `prim[axis]` (a name or a position) on the first operand."""
    if len(statics) != 1 or not isinstance(statics[0], (str, int)):
        raise TypingError(f"{prim.name}[axis] takes one axis, by name or by position")
    return {"axis": axis_position(types[0], statics[0])}


def without(t: TensorType, positions, kind: str | None = None) -> TensorType:
    drop = set(positions)
    axes = tuple(a for i, a in enumerate(t.axes) if i not in drop)
    return TensorType(kind or t.kind, axes)


def check_unique_names(axes, context: str) -> tuple[Axis, ...]:
    names = [a.name for a in axes if a.name]
    for n in names:
        if names.count(n) > 1:
            raise TypingError(f"{context} would have the axis {n} twice")
    return tuple(axes)
