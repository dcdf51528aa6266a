"""Values that are not computed from tensors: literals, and nat values read as reals.

`psk.const` holds a decimal literal as text (exact: the reference reads it at its
precision, a machine type rounds it once); `psk.to_real` injects an index value into ℝ.
"""

from __future__ import annotations

import numpy as np

from presk.ir.types import TensorType
from presk.prims import exact
from presk.prims.base import Prim, TypingError


def _const(types, attrs) -> TensorType:
    text = attrs.get("value")
    if not isinstance(text, str):
        raise TypingError("const needs its value as text")
    try:
        float(text)
    except ValueError:
        raise TypingError(f"const value {text!r} is not a number") from None
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
        reference=lambda ap, xs: np.array(exact.mpfr(ap.attrs["value"]), dtype=object),
    ),
    Prim(
        "to_real",
        "psk.to_real",
        (1, 1),
        _to_real,
        kinds=("index",),
        reference=lambda ap, xs: exact.exact(xs[0]),
    ),
]
