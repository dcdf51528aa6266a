"""Parameters by path in files other tools read: `.npz` and `.safetensors`, beside `.psk.d`.

A parameters file holds one array a parameter leaf, named by its dotted path
(`blocks.ff.up.w`; a stack's leaves with their layer axis first), as
`presk params` writes it and `--weights` reads it. Reals are written in the type they are
held in (float64, float32 or bfloat16; an exact reference value rounded once to float64)
and read from any array whose values float64 holds, so a value read back is the value
written; a file is read into exactly the program's layout, as a checkpoint is (E9005).
An `.npz` cannot hold bfloat16 (numpy writes it as raw 2-byte records, which it reads
back as bytes), so bfloat16 parameters go to `.safetensors` only (E0001). Parameters of
a program `presk import` wrote may be written under the ONNX initializers' names instead
(`onnx_names`), the way back to the graph.
"""

from __future__ import annotations

import io
import os

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

from presk.errors import FileFormatError, UsageError
from presk.fileio import write_atomic
from presk.importer import names as imported_names
from presk.ir.types import PskType
from presk.ir.types import leaves as leaf_types
from presk.runtime import output
from presk.runtime.arrays_file import SUFFIXES, open_arrays, read_leaf, refused
from presk.runtime.values import Tensor, Value, build


def is_params_file(path: str) -> bool:
    return path.endswith(SUFFIXES)


def encode(path: str, params: Value, names: dict[str, str] | None = None) -> bytes:
    """The bytes of a parameters file for `path`'s suffix, each leaf in the type it is
    held in (E0001 for bfloat16 in an `.npz`), named by its path or by `names` of it."""
    arrays = output.held_arrays(params)  # a parameter tree's leaves are all real
    if names is not None:
        arrays = {names[p]: a for p, a in arrays.items()}
    if path.endswith(".safetensors"):
        return safetensors.numpy.save(arrays, metadata={"format": "presk.params"})
    bf16 = [p for p, a in arrays.items() if a.dtype == ml_dtypes.bfloat16]
    if bf16:
        raise UsageError(
            f"{path}: an .npz cannot hold bfloat16 (numpy reads it back as raw bytes), and "
            f"parameter {bf16[0]} is bfloat16: write a .safetensors file, or float64 "
            "arrays (presk params --realize f64)"
        )
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def write(path: str, params: Value, names: dict[str, str] | None = None) -> None:
    write_atomic(path, encode(path, params, names))


def onnx_names(path: str) -> dict[str, str]:
    """Each parameter path's ONNX initializer, from the metadata of the weights `presk
    import` wrote at `path` (presk/importer/names.py): E0002 if there is no file to read,
    E9006 if it is no safetensors file or holds no such names."""
    if not os.path.isfile(path):
        why = "not a regular file" if os.path.lexists(path) else "no such file"
        raise UsageError(
            f"cannot read {path}, where presk import writes a program's weights and their ONNX "
            f"names: {why}",
            code="E0002",
        )
    try:
        meta = safetensors.safe_open(path, framework="numpy").metadata() or {}
    except (OSError, safetensors.SafetensorError) as e:
        raise refused(path, f"not a readable .safetensors file ({e})") from None
    if imported_names.KEY not in meta:
        raise refused(path, f"no {imported_names.KEY} in its metadata (presk import writes them)")
    try:
        return imported_names.parse(meta[imported_names.KEY])
    except ValueError as e:
        raise refused(path, str(e)) from None


def read(path: str, param_type: PskType) -> Value:
    """The parameter tree in `path` (`.npz` or `.safetensors`), refused unless it holds
    exactly the program's paths and shapes (E9005) in real arrays (E9006)."""
    want = dict(leaf_types(param_type))
    with open_arrays(path) as arrays:
        missing = [p for p in want if p not in arrays.names]
        if missing:
            leaf = want[missing[0]]
            raise FileFormatError(
                f"{path}: has no parameter {missing[0]} ({leaf.text()}) of this program",
                code="E9005",
            )
        extra = sorted(set(arrays.names) - set(want))
        if extra:
            raise FileFormatError(
                f"{path}: has parameter {extra[0]}, which this program lacks", code="E9005"
            )
        return build(
            param_type, lambda p, leaf: Tensor(leaf, read_leaf(path, arrays, p, leaf, "E9005"))
        )
