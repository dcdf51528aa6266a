"""Parameters by path in files other tools read: `.npz` and `.safetensors`, beside `.psk.d`.

A parameters file holds one array a parameter leaf, named by its dotted path
(`blocks.ff.up.w`; a stack's leaves with their layer axis first), as
`presk params` writes it and `--weights` reads it. Reals are written as float64 (an exact
reference value rounded once, a bf16 or f32 value exactly) and read from any float
array; a file is read into exactly the program's layout, as a checkpoint is (E9005).
"""

from __future__ import annotations

import io
import os
import zipfile

import numpy as np
import safetensors.numpy

from presk.errors import FileFormatError, UsageError
from presk.fileio import write_atomic
from presk.ir.types import PskType
from presk.ir.types import leaves as leaf_types
from presk.prims import exact
from presk.runtime import checkpoint, pskd
from presk.runtime.values import Value, leaves

SUFFIXES = (".npz", ".safetensors")


def is_params_file(path: str) -> bool:
    return path.endswith(SUFFIXES)


def _float64(data: np.ndarray) -> np.ndarray:
    if data.dtype == object:
        return exact.to_float64(data)
    return np.array(data, dtype=np.float64, order="C")  # keeps a scalar 0-d


def encode(path: str, params: Value) -> bytes:
    """The bytes of a parameters file for `path`'s suffix."""
    arrays = {p: _float64(t.data) for p, t in leaves(params)}
    if path.endswith(".safetensors"):
        return safetensors.numpy.save(arrays, metadata={"format": "presk.params"})
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def write(path: str, params: Value) -> None:
    write_atomic(path, encode(path, params))


def _read_arrays(path: str, limit: int) -> dict[str, np.ndarray]:
    """Every array of an `.npz` or `.safetensors` file, read now (an npz reads lazily),
    refused unless it is a real-valued array; files past `limit` bytes are refused unread."""
    try:
        size = os.path.getsize(path)
        if size > limit:
            raise FileFormatError(
                f"{path}: {size} bytes, more than {limit} for these parameters", code="E9006"
            )
        if path.endswith(".safetensors"):
            with open(path, "rb") as f:
                arrays = safetensors.numpy.load(f.read())
        else:
            npz = np.load(path, allow_pickle=False)
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise FileFormatError(f"{path}: a .npy array, not an .npz file", code="E9006")
            with npz:
                arrays = {name: npz[name] for name in npz.files}
    except FileFormatError:
        raise
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}", code="E0002") from None
    except (ValueError, EOFError, zipfile.BadZipFile, safetensors.SafetensorError) as e:
        kind = "a .safetensors" if path.endswith(".safetensors") else "an .npz"
        raise FileFormatError(f"{path}: not {kind} file ({e})", code="E9006") from None
    for name, a in arrays.items():
        if a.dtype.kind != "f":
            raise FileFormatError(
                f"{path}: parameter {name} is {a.dtype}, parameters are real (float) arrays",
                code="E9006",
            )
    return arrays


def read(path: str, param_type: PskType) -> Value:
    """The parameter tree in `path` (`.npz` or `.safetensors`), in the program's layout."""
    need = sum(leaf.size for _, leaf in leaf_types(param_type))
    arrays = _read_arrays(path, limit=16 * need + (1 << 20))
    stored = {f"params/{name}": a.astype(np.float64) for name, a in arrays.items()}
    return checkpoint.tree_from(pskd.Container("params", {}, stored), param_type, "params", path)
