"""Elementwise primitives: real functions of one or two operands, broadcasting by name.

Over ℝ: `neg exp log sqrt tanh sin cos erf abs` are the usual functions,
`gelu(x) = x·Φ(x)` with Φ the normal distribution function (through erf), `relu(x) =
max(x, 0)`, `sign` (the adjoint of abs); `+ - * /` and `max(a, b)`, and `where(c, a, b)`
choosing by a mask. They lift over records, tuples and stacks leaf by leaf.
"""

from __future__ import annotations

from presk.ir.types import TensorType
from presk.prims.base import Number, Prim, TypingError, broadcast_axes

UNARY = ("neg", "exp", "log", "sqrt", "tanh", "sin", "cos", "erf", "abs", "gelu", "relu", "sign")
BINARY = ("add", "sub", "mul", "div", "max")


def _same(types, attrs) -> TensorType:
    return types[0]


def _broadcast(types, attrs) -> TensorType:
    return TensorType("real", broadcast_axes(types[0], types[1]))


def _compare(types, attrs) -> TensorType:
    return TensorType("bool", broadcast_axes(types[0], types[1]))


def _select(types, attrs) -> TensorType:
    ab = TensorType("real", broadcast_axes(types[1], types[2]))
    return TensorType("real", broadcast_axes(types[0], ab))


PRIMS = [Prim(n, f"psk.{n}", (1, 1), _same, elementwise=True) for n in UNARY]
PRIMS += [Prim(n, f"psk.{n}", (2, 2), _broadcast, elementwise=True) for n in BINARY]
PRIMS += [
    Prim("gt", "psk.gt", (2, 2), _compare, doc="a > b, as a mask"),
    Prim("where", "psk.select", (3, 3), _select, kinds=("bool", "real")),
]


def _rate_bind(prim, statics, types) -> dict:
    if len(statics) != 1 or not isinstance(statics[0], Number):
        raise TypingError("dropout[p] takes the probability of dropping an element")
    if not 0 <= statics[0].value < 1:
        raise TypingError(f"dropout's probability must be in [0, 1), not {statics[0].text}")
    return {"rate": statics[0].text}


# dropout[p](x): in training, each element is kept with probability 1 − p and scaled by
# 1/(1 − p), the mask drawn from the key of the op's site; outside training, x itself.
PRIMS.append(
    Prim("dropout", "psk.dropout", (1, 1), _same, bind=_rate_bind, attr_kinds={"rate": "str"})
)
