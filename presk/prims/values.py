"""Values that are not computed from tensors: constants, and nat values read as reals.

`psk.const` holds a constant as text: a decimal literal, or an expression of literals
with + − × ÷, sqrt, exp, log and pi (the adjoints need 2/√π). The reference evaluates it
at its precision, each operation correctly rounded; the ball reference encloses it in a
ball; a machine type rounds the 256-bit value once. `psk.to_real` injects an index value into ℝ.
"""

from __future__ import annotations

import gmpy2
import numpy as np

from presk.constants import const_value
from presk.ir.types import TensorType
from presk.language import SIGNATURES
from presk.prims import balls, exact
from presk.prims.base import Prim, TypingError


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
        SIGNATURES["const"],
        _const,
        attr_kinds={"value": "str"},
        reference=lambda ap, xs: np.array(const_value(ap.attrs["value"]), dtype=object),
        ball=lambda ap, xs: balls.objects([balls.const(ap.attrs["value"])], ()),
        vjp=lambda e, ins, out, ct, need: [],
    ),
    Prim(
        SIGNATURES["to_real"],
        _to_real,
        kinds=("index",),
        reference=lambda ap, xs: exact.exact(xs[0]),
        ball=lambda ap, xs: balls.exact(xs[0]),
        vjp=lambda e, ins, out, ct, need: [None],
        scalar=lambda kb, v, ap: kb.to_real(v[0]),
    ),
]
