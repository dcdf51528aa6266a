"""Elementwise primitives: real functions of one or two operands, broadcasting by name.

Over ℝ: `neg exp log sqrt tanh sin cos erf abs` are the usual functions,
`gelu(x) = x·Φ(x)` with Φ the normal distribution function (through erf), `relu(x) =
max(x, 0)`, `sign` (the adjoint of abs); `+ - * /`, `max(a, b)`, `min(a, b)`, `pow(a, b)`
(aᵇ for a > 0), and `where(c, a, b)` choosing by a mask. They lift over records, tuples
and stacks leaf by leaf.
"""

from __future__ import annotations

import numpy as np

from presk.ir.types import TensorType
from presk.language import BINARY, SIGNATURES, UNARY
from presk.prims import balls, exact
from presk.prims.base import Apply, Number, Prim, TypingError, aligned, broadcast_axes


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
    return x * (1 + exact.erf(x / exact.sqrt(np.array(exact.number(2))))) / 2


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
# On balls: Arb's functions; relu and sign the union of both sides where a ball straddles 0.
_UNARY_BALL = {
    **{n: getattr(balls, n) for n in ("exp", "log", "sqrt", "tanh", "sin", "cos", "erf")},
    "neg": _UNARY_REF["neg"],
    "abs": balls.fabs,
    "gelu": balls.gelu,
    "relu": balls.relu,
    "sign": balls.sign,
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
    "min": lambda a, b: np.where((a <= b).astype(bool), a, b),
    "pow": lambda a, b: a**b,
}
# max and min of overlapping balls: a ball containing either
_BINARY_BALL = _BINARY_REF | {"max": balls.maximum, "min": balls.minimum, "div": balls.divide}


def _gt(num):
    def rule(ap: Apply, xs: list):
        a, b = _operands(ap, xs)
        return np.broadcast_to(num.greater(a, b), ap.out_type.shape).copy()

    return rule


def _select_ref(ap: Apply, xs: list):
    c, a, b = _operands(ap, xs)
    return np.broadcast_to(np.where(c, a, b), ap.out_type.shape).copy()


# ---- adjoints -----------------------------------------------------------------------


def _gelu_slope(e, a):
    # Φ(a) + a·φ(a) = (1 + erf(a / √2)) / 2 + a · exp(−(a·a) / 2) / √(2π)
    scaled = e.prim("div", [a, e.const("sqrt(2)")])
    cdf = e.prim("div", [e.prim("add", [e.const("1"), e.prim("erf", [scaled])]), e.const("2")])
    half_square = e.prim("div", [e.prim("mul", [a, a]), e.const("2")])
    pdf = e.prim("div", [e.prim("exp", [e.prim("neg", [half_square])]), e.const("sqrt(2 * pi)")])
    return e.prim("add", [cdf, e.prim("mul", [a, pdf])])


def _erf_slope(e, a):
    # 2/√π · exp(−a·a)
    return e.prim(
        "mul", [e.const("2 / sqrt(pi)"), e.prim("exp", [e.prim("neg", [e.prim("mul", [a, a])])])]
    )


_UNARY_VJP = {
    "neg": lambda e, a, y, ct: e.prim("neg", [ct]),
    "exp": lambda e, a, y, ct: e.prim("mul", [ct, y]),
    "log": lambda e, a, y, ct: e.prim("div", [ct, a]),
    "sqrt": lambda e, a, y, ct: e.prim("div", [ct, e.prim("mul", [e.const("2"), y])]),
    "tanh": lambda e, a, y, ct: e.prim(
        "mul", [ct, e.prim("sub", [e.const("1"), e.prim("mul", [y, y])])]
    ),
    "sin": lambda e, a, y, ct: e.prim("mul", [ct, e.prim("cos", [a])]),
    "cos": lambda e, a, y, ct: e.prim("neg", [e.prim("mul", [ct, e.prim("sin", [a])])]),
    "erf": lambda e, a, y, ct: e.prim("mul", [ct, _erf_slope(e, a)]),
    "abs": lambda e, a, y, ct: e.prim("mul", [ct, e.prim("sign", [a])]),
    "gelu": lambda e, a, y, ct: e.prim("mul", [ct, _gelu_slope(e, a)]),
    "relu": lambda e, a, y, ct: e.prim(
        "where", [e.prim("gt", [a, e.const("0")]), ct, e.const("0")]
    ),
}


def _unary_vjp(name):
    rule = _UNARY_VJP.get(name)
    if rule is None:  # sign: flat almost everywhere
        return lambda e, ins, out, ct, need: [None]
    return lambda e, ins, out, ct, need: [rule(e, ins[0], out, ct) if need[0] else None]


def _binary_parts(name, e, a, b, out, ct):
    """The cotangents of a and b before summing back to their shapes, as thunks."""
    if name == "add":
        return (lambda: ct), (lambda: ct)
    if name == "sub":
        return (lambda: ct), (lambda: e.prim("neg", [ct]))
    if name == "mul":
        return (lambda: e.prim("mul", [ct, b])), (lambda: e.prim("mul", [ct, a]))
    if name == "div":
        return (
            lambda: e.prim("div", [ct, b]),
            lambda: e.prim("neg", [e.prim("div", [e.prim("mul", [ct, out]), b])]),
        )
    if name in ("max", "min"):  # ties go to a, as the forward picks a
        b_wins = e.prim("gt", [b, a] if name == "max" else [a, b])
        return (
            lambda: e.prim("where", [b_wins, e.const("0"), ct]),
            lambda: e.prim("where", [b_wins, ct, e.const("0")]),
        )
    # pow: d(a^b) = b·a^b/a da + a^b·log(a) db
    return (
        lambda: e.prim("mul", [ct, e.prim("div", [e.prim("mul", [b, out]), a])]),
        lambda: e.prim("mul", [ct, e.prim("mul", [out, e.prim("log", [a])])]),
    )


def _binary_vjp(name):
    def rule(e, ins, out, ct, need):
        a, b = ins
        da, db = _binary_parts(name, e, a, b, out, ct)
        return [
            e.unbroadcast(da(), a) if need[0] else None,
            e.unbroadcast(db(), b) if need[1] else None,
        ]

    return rule


def _select_vjp(e, ins, out, ct, need):
    c, a, b = ins
    return [
        None,
        e.unbroadcast(e.prim("where", [c, ct, e.const("0")]), a) if need[1] else None,
        e.unbroadcast(e.prim("where", [c, e.const("0"), ct]), b) if need[2] else None,
    ]


def _dropout_vjp(e, ins, out, ct, need):
    # the same mask as the forward: the same rate, drawn from the forward op's key
    return [e.prim("dropout", [ct], dict(e.attrs), extra=e.key_of_forward()) if need[0] else None]


# ---- kernels: the computation on loaded scalars (in the kernel's arithmetic type) ----


def _gelu_scalar(kb, x):
    # x · (1 + erf(x / √2)) / 2, in the reference's order
    w = kb.add(kb.const("1"), kb.call("erf", kb.div(x, kb.const("sqrt(2)"))))
    return kb.div(kb.mul(x, w), kb.const("2"))


def _sign_scalar(kb, x):
    zero = kb.const("0")
    negative = kb.select(kb.cmp("olt", x, zero), kb.const("-1"), zero)
    return kb.select(kb.cmp("ogt", x, zero), kb.const("1"), negative)


_UNARY_SCALAR = {
    "neg": lambda kb, x: kb.neg(x),
    "sqrt": lambda kb, x: kb.sqrt(x),
    "abs": lambda kb, x: kb.absf(x),
    "gelu": _gelu_scalar,
    "relu": lambda kb, x: kb.select(kb.cmp("ogt", x, kb.const("0")), x, kb.const("0")),
    "sign": _sign_scalar,
}
for _fn in ("exp", "log", "tanh", "sin", "cos", "erf"):
    _UNARY_SCALAR[_fn] = lambda kb, x, fn=_fn: kb.call(fn, x)

_BINARY_SCALAR = {
    "add": lambda kb, a, b: kb.add(a, b),
    "sub": lambda kb, a, b: kb.sub(a, b),
    "mul": lambda kb, a, b: kb.mul(a, b),
    "div": lambda kb, a, b: kb.div(a, b),
    "max": lambda kb, a, b: kb.max(a, b),
    "min": lambda kb, a, b: kb.min(a, b),
    "pow": lambda kb, a, b: kb.call("pow", a, b),
}


# The functions without a real value somewhere on the reals.
_PARTIAL = {"log", "sqrt", "div", "pow"}

PRIMS = [
    Prim(
        SIGNATURES[n],
        _same,
        elementwise=True,
        partial=n in _PARTIAL,
        reference=lambda ap, xs, f=_UNARY_REF[n]: f(xs[0]),
        ball=lambda ap, xs, f=_UNARY_BALL[n]: f(xs[0]),
        vjp=_unary_vjp(n),
        scalar=lambda kb, v, ap, f=_UNARY_SCALAR[n]: f(kb, v[0]),
    )
    for n in UNARY
]
PRIMS += [
    Prim(
        SIGNATURES[n],
        _broadcast,
        elementwise=True,
        partial=n in _PARTIAL,
        reference=_binary_ref(_BINARY_REF[n]),
        ball=_binary_ref(_BINARY_BALL[n]),
        vjp=_binary_vjp(n),
        scalar=lambda kb, v, ap, f=_BINARY_SCALAR[n]: f(kb, v[0], v[1]),
    )
    for n in BINARY
]
PRIMS += [
    Prim(
        SIGNATURES["gt"],
        _compare,
        result="bool",
        reference=_gt(exact),
        ball=_gt(balls),
        vjp=lambda e, ins, out, ct, need: [None, None],
        scalar=lambda kb, v, ap: kb.mask_value(kb.cmp("ogt", v[0], v[1])),
        doc="a > b, as a mask",
    ),
    Prim(
        SIGNATURES["where"],
        _select,
        kinds=("bool", "real"),
        reference=_select_ref,
        ball=_select_ref,
        vjp=_select_vjp,
        scalar=lambda kb, v, ap: kb.select(kb.truthy(v[0]), v[1], v[2]),
    ),
]


def _rate_bind(prim, statics, types) -> dict:
    if len(statics) != 1 or not isinstance(statics[0], Number):
        raise TypingError("dropout[p] takes the probability of dropping an element")
    if not 0 <= statics[0].value < 1:
        raise TypingError(f"dropout's probability must be in [0, 1), not {statics[0].text}")
    return {"rate": statics[0].text}


def _dropout(num):
    def rule(ap: Apply, xs: list):
        x = xs[0]
        if not ap.training:
            return x
        rate = num.number(ap.attrs["rate"])
        keep = ap.draw().random(x.shape) >= float(ap.attrs["rate"])
        scale = 1 / (1 - rate)
        return np.where(keep, x * scale, num.number(0))

    return rule


# dropout[p](x): in training, each element is kept when a uniform draw from the key of its
# application is at least p, and then multiplied by 1/(1 − p); outside training, x itself.
PRIMS.append(
    Prim(
        SIGNATURES["dropout"],
        _same,
        bind=_rate_bind,
        attr_kinds={"rate": "str"},
        reference=_dropout(exact),
        ball=_dropout(balls),
        # a kernel gets the mask the host drew as a second input (i8: 1 where kept)
        scalar=lambda kb, v, ap: kb.select(
            kb.truthy(v[1]), kb.mul(v[0], kb.const(f"1 / (1 - {ap.attrs['rate']})")), kb.const("0")
        ),
        vjp=_dropout_vjp,
        draws="training",
    )
)
