"""Values that are not computed from tensors: constants, and nat values read as reals.

`psk.const` holds a constant as text: a decimal literal, or an expression of literals
with + − × ÷, sqrt, exp, log and pi (the adjoints need 2/√π). The reference evaluates it
at its precision, each operation correctly rounded; a machine type rounds the 256-bit
value once. `psk.to_real` injects an index value into ℝ.
"""

from __future__ import annotations

import ast as pyast

import gmpy2
import numpy as np

from presk.ir.types import TensorType
from presk.prims import exact
from presk.prims.base import Prim, TypingError

_FUNCS = {"sqrt": gmpy2.sqrt, "exp": gmpy2.exp, "log": gmpy2.log}
_BINOPS = {
    pyast.Add: "__add__",
    pyast.Sub: "__sub__",
    pyast.Mult: "__mul__",
    pyast.Div: "__truediv__",
}


def const_value(text: str):
    """The value of a constant's text as an MPFR number at the current precision."""

    def ev(node):
        if isinstance(node, pyast.Constant) and isinstance(node.value, (int, float)):
            # from the digits as written, not through a Python float
            return gmpy2.mpfr(pyast.get_source_segment(text, node))
        if isinstance(node, pyast.UnaryOp) and isinstance(node.op, pyast.USub):
            return -ev(node.operand)
        if isinstance(node, pyast.BinOp) and type(node.op) in _BINOPS:
            return getattr(ev(node.left), _BINOPS[type(node.op)])(ev(node.right))
        if isinstance(node, pyast.Name) and node.id == "pi":
            return gmpy2.const_pi()
        if (
            isinstance(node, pyast.Call)
            and isinstance(node.func, pyast.Name)
            and node.func.id in _FUNCS
            and len(node.args) == 1
        ):
            return _FUNCS[node.func.id](ev(node.args[0]))
        raise ValueError(text)

    try:
        tree = pyast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(text) from None
    return ev(tree.body)


def _const(types, attrs) -> TensorType:
    text = attrs.get("value")
    if not isinstance(text, str):
        raise TypingError("const needs its value as text")
    try:
        with gmpy2.context(precision=64):
            const_value(text)
    except (ValueError, ZeroDivisionError, gmpy2.InvalidOperationError):
        raise TypingError(f"const value {text!r} is not a constant expression") from None
    return TensorType("real")


def _to_real(types, attrs) -> TensorType:
    return types[0].with_kind("real")


PRIMS = [
    Prim(
        "const",
        "psk.const",
        (0, 0),
        _const,
        attr_kinds={"value": "str"},
        reference=lambda ap, xs: np.array(const_value(ap.attrs["value"]), dtype=object),
        vjp=lambda e, ins, out, ct, need: [],
    ),
    Prim(
        "to_real",
        "psk.to_real",
        (1, 1),
        _to_real,
        kinds=("index",),
        reference=lambda ap, xs: exact.exact(xs[0]),
        vjp=lambda e, ins, out, ct, need: [None],
    ),
]
