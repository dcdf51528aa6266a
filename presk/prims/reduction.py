"""Reductions over axes: `sum`, `mean`, `max` (as `reduce_max`) and `argmax`.

`sum[ax…](x)` adds over the named or numbered axes, term by term in increasing index
order; without brackets it adds over every axis to a scalar. `mean` divides the sum by
the count. `max[ax…](x)` is the largest element; `argmax[ax](x)` the index of the last of
equal maxima, an index tensor.
"""

from __future__ import annotations

from presk.ir.types import TensorType
from presk.prims.base import Prim, TypingError, axis_position, one_axis, without


def _bind_axes(prim, statics, types) -> dict:
    t = types[0]
    if not statics:
        return {"axes": list(range(t.rank))}
    positions = []
    for s in statics:
        if not isinstance(s, (str, int)):
            raise TypingError(f"{prim.name}[...] takes axes, by name or by position")
        p = axis_position(t, s)
        if p in positions:
            raise TypingError(f"{prim.name} names axis {s} twice")
        positions.append(p)
    return {"axes": sorted(positions)}


def _reduce(types, attrs) -> TensorType:
    t = types[0]
    for p in attrs["axes"]:
        if not 0 <= p < t.rank:
            raise TypingError(f"{t.text()} has no axis {p}")
    return without(t, attrs["axes"])


def _argmax(types, attrs) -> TensorType:
    return without(types[0], [attrs["axis"]], kind="index")


PRIMS = [
    Prim("sum", "psk.sum", (1, 1), _reduce, bind=_bind_axes, attr_kinds={"axes": "i64s"}),
    Prim("mean", "psk.mean", (1, 1), _reduce, bind=_bind_axes, attr_kinds={"axes": "i64s"}),
    Prim("reduce_max", "psk.reduce_max", (1, 1), _reduce, bind=_bind_axes, attr_kinds={"axes": "i64s"}),
    Prim("argmax", "psk.argmax", (1, 1), _argmax, bind=one_axis, attr_kinds={"axis": "i64"}),
]
