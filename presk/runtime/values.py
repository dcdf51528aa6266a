"""Runtime values, the one type every backend takes and gives.

A value is a tree: a `Tensor` (a buffer with its PSK type), a record (a dict of
values, in field order) or a tuple of values. A tensor's buffer is a numpy array of the
type's shape: exact reals as an object array of MPFR numbers (the reference), machine
reals as float64, float32 or bfloat16, index tensors as int64, masks as bool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from presk.ir.types import PskType, RecordType, TensorType, TupleType


@dataclass(eq=False)
class Tensor:
    type: TensorType
    data: np.ndarray

    def __post_init__(self):
        if tuple(self.data.shape) != self.type.shape:
            raise ValueError(f"a buffer of shape {self.data.shape} for {self.type.text()}")


Value = Tensor | dict | tuple


def leaves(value: Value, prefix: str = "") -> list[tuple[str, Tensor]]:
    """The tensors of a value with their dotted paths, in field order."""
    if isinstance(value, Tensor):
        return [(prefix, value)]
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out = []
    for k, v in items:
        out.extend(leaves(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def map_leaves(fn: Callable[[str, Tensor], Tensor], value: Value, prefix: str = "") -> Value:
    """`value` with each tensor replaced by `fn(its dotted path, it)`."""
    if isinstance(value, Tensor):
        return fn(prefix, value)
    items = value.items() if isinstance(value, dict) else enumerate(value)
    done = {k: map_leaves(fn, v, f"{prefix}.{k}" if prefix else str(k)) for k, v in items}
    return done if isinstance(value, dict) else tuple(done.values())


def map_tensors(fn: Callable[[Tensor], Tensor], value: Value) -> Value:
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_tensors(fn, v) for k, v in value.items()}
    return tuple(map_tensors(fn, v) for v in value)


def build(t: PskType, make: Callable[[str, TensorType], Tensor], prefix: str = "") -> Value:
    """A value of type `t` whose leaves `make(path, type)` gives."""
    if isinstance(t, TensorType):
        return make(prefix, t)
    if isinstance(t, RecordType):
        return {n: build(f, make, f"{prefix}.{n}" if prefix else n) for n, f in t.fields}
    assert isinstance(t, TupleType)
    return tuple(
        build(f, make, f"{prefix}.{i}" if prefix else str(i)) for i, f in enumerate(t.items)
    )
