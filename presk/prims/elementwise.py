"""Elementwise primitives: real functions of one or two operands, broadcasting by name.

Over ℝ: `neg exp log sqrt tanh sin cos erf abs` are the usual functions,
`gelu(x) = x·Φ(x)` with Φ the normal distribution function (through erf), `relu(x) =
max(x, 0)`, `sign` (the adjoint of abs); `+ - * /` and `max(a, b)`, and `where(c, a, b)`
choosing by a mask. They lift over records, tuples and stacks leaf by leaf.
"""

from __future__ import annotations

import numpy as np

from presk.ir.types import TensorType
from presk.prims import exact
from presk.prims.base import Apply, Number, Prim, TypingError, aligned, broadcast_axes

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


# ---- the exact reference -------------------------------------------------------------


def _operands(ap: Apply, xs: list) -> list:
    return [aligned(x, t, ap.out_type) for x, t in zip(xs, ap.in_types, strict=True)]


def _gelu(x):
    # x · (1 + erf(x / √2)) / 2, each step rounded, in this order (the kernels follow it).
    return x * (1 + exact.erf(x / exact.sqrt(np.array(exact.mpfr(2))))) / 2


def _relu(x):
    return np.where((x > 0).astype(bool), x, exact.mpfr(0))


def _sign(x):
    return np.where(
        (x > 0).astype(bool),
        exact.mpfr(1),
        np.where((x < 0).astype(bool), exact.mpfr(-1), exact.mpfr(0)),
    )


_UNARY_REF = {
    "neg": lambda x: -x,
    "exp": exact.exp,
    "log": exact.log,
    "sqrt": exact.sqrt,
    "tanh": exact.tanh,
    "sin": exact.sin,
    "cos": exact.cos,
    "erf": exact.erf,
    "abs": exact.fabs,
    "gelu": _gelu,
    "relu": _relu,
    "sign": _sign,
}


def _binary_ref(fn):
    def ref(ap: Apply, xs: list):
        a, b = _operands(ap, xs)
        return np.broadcast_to(fn(a, b), ap.out_type.shape).copy()

    return ref


_BINARY_REF = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: np.where((a >= b).astype(bool), a, b),
}


def _gt_ref(ap: Apply, xs: list):
    a, b = _operands(ap, xs)
    return np.broadcast_to((a > b).astype(bool), ap.out_type.shape).copy()


def _select_ref(ap: Apply, xs: list):
    c, a, b = _operands(ap, xs)
    return np.broadcast_to(np.where(c, a, b), ap.out_type.shape).copy()


PRIMS = [
    Prim(
        n,
        f"psk.{n}",
        (1, 1),
        _same,
        elementwise=True,
        reference=lambda ap, xs, f=_UNARY_REF[n]: f(xs[0]),
    )
    for n in UNARY
]
PRIMS += [
    Prim(n, f"psk.{n}", (2, 2), _broadcast, elementwise=True, reference=_binary_ref(_BINARY_REF[n]))
    for n in BINARY
]
PRIMS += [
    Prim("gt", "psk.gt", (2, 2), _compare, reference=_gt_ref, doc="a > b, as a mask"),
    Prim("where", "psk.select", (3, 3), _select, kinds=("bool", "real"), reference=_select_ref),
]


def _rate_bind(prim, statics, types) -> dict:
    if len(statics) != 1 or not isinstance(statics[0], Number):
        raise TypingError("dropout[p] takes the probability of dropping an element")
    if not 0 <= statics[0].value < 1:
        raise TypingError(f"dropout's probability must be in [0, 1), not {statics[0].text}")
    return {"rate": statics[0].text}


def _dropout_ref(ap: Apply, xs: list):
    x = xs[0]
    if not ap.training:
        return x
    rate = exact.mpfr(ap.attrs["rate"])
    keep = ap.draw().random(x.shape) >= float(ap.attrs["rate"])
    scale = 1 / (1 - rate)
    return np.where(keep, x * scale, exact.mpfr(0))


# dropout[p](x): in training, each element is kept when a uniform draw from the key of its
# application is at least p, and then multiplied by 1/(1 − p); outside training, x itself.
PRIMS.append(
    Prim(
        "dropout",
        "psk.dropout",
        (1, 1),
        _same,
        bind=_rate_bind,
        attr_kinds={"rate": "str"},
        reference=_dropout_ref,
    )
)
