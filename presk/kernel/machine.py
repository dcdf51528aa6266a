"""Machine types: what a kernel stores and what it computes in.

f64 and f32 store and compute in themselves. bf16 is a storage type only: a bf16 kernel
loads each element widened exactly to f32, computes in f32, and rounds to nearest even
once at each store; its real scalars stay in f32. Index tensors are int64 buffers, masks
int8 buffers of 0 and 1.

`MACHINES` is the one table of the machine types: every fact of a type (its bytes, its
unit roundoff, its largest value) is read from it, derived from its storage dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from mlir import ir

from presk.ir.types import TensorType, parse_mlir_type


@dataclass(frozen=True)
class Machine:
    name: str  # "f64" | "f32" | "bf16"
    storage: np.dtype
    arith: np.dtype  # the type arithmetic is done in

    @property
    def arith_name(self) -> str:
        return {np.dtype(np.float64): "f64", np.dtype(np.float32): "f32"}[self.arith]

    def mlir_arith(self) -> ir.Type:
        return ir.Type.parse(self.arith_name)

    @property
    def bytes(self) -> int:
        """An element's bytes in storage."""
        return self.storage.itemsize

    @property
    def unit_roundoff(self) -> float:
        """u = 2^-p, p the storage's significand bits: half its machine epsilon, the
        largest relative error of a rounding to nearest."""
        return float(ml_dtypes.finfo(self.storage).eps) / 2

    @property
    def largest(self) -> float:
        """The largest finite value the storage holds; past it a rounding overflows."""
        return float(ml_dtypes.finfo(self.storage).max)


MACHINES = {
    "f64": Machine("f64", np.dtype(np.float64), np.dtype(np.float64)),
    "f32": Machine("f32", np.dtype(np.float32), np.dtype(np.float32)),
    "bf16": Machine("bf16", np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)),
}
TYPES = tuple(MACHINES)  # the machine types a realization names, widest first: f64, f32, bf16

# buffer element type (MLIR spelling) -> numpy dtype
ELEMENTS = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i8": np.dtype(np.int8),
}


def storage_of(t: TensorType, machine: Machine) -> str:
    """The buffer element type of a PSK tensor in a machine type. A real scalar is kept
    in the arithmetic type: in bf16, a hyperparameter such as 0.999 would become 1."""
    if t.kind == "real":
        return machine.arith_name if t.rank == 0 else machine.name
    return {"index": "i64", "bool": "i8"}[t.kind]


def to_storage(data: np.ndarray, element: str) -> np.ndarray:
    """A buffer converted to a kernel's element type; reals reach bf16 through f32."""
    dtype = ELEMENTS[element]
    data = np.asarray(data)
    if data.dtype == dtype:
        return data
    if element == "bf16" and data.dtype != np.float32:
        data = data.astype(np.float32)
    if data.dtype == object:  # exact reals, rounded once
        data = np.vectorize(float, otypes=[np.float64])(data)
    return data.astype(dtype)


def buffer_tensor(t: ir.Type) -> tuple[str, TensorType]:
    """(element type, the PSK tensor type with its axis names) of a buffer type."""
    text = str(t)
    element = text.split("<", 1)[1].split(",", 1)[0].strip()
    return element, parse_mlir_type("!psk.real<" + text.split(",", 1)[1])
