"""Files of named arrays other tools write, `.npz` and `.safetensors`, read into leaves.

Both hold one array a name. A member is checked from its header (dtype, shape) against
the leaf it is read into before its data is read, and every read is inside the error
check (an npz reads its members lazily), so a damaged or mismatched file ends in one
coded line (E9006), and a file that cannot be opened in E0002.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from contextlib import contextmanager

import ml_dtypes
import numpy as np
import safetensors
from safetensors import safe_open

from presk.errors import FileFormatError, UsageError
from presk.ir.types import TensorType

SUFFIXES = (".npz", ".safetensors")

# What a broken file raises, at opening or at each read: zip damage (a seek to a bad
# offset is an OSError), a truncated or malformed .npy, an unsupported compression
# (NotImplementedError, a RuntimeError), an encrypted member, a bad safetensors header.
_ERRORS = (
    OSError,
    ValueError,
    EOFError,
    RuntimeError,
    zipfile.BadZipFile,
    zlib.error,
    safetensors.SafetensorError,
)

# safetensors' dtype names; any other (F8 variants, complex) is refused by name.
_SAFETENSORS_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U64": np.uint64,
    "U32": np.uint32,
    "U16": np.uint16,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def refused(path: str, what: str) -> FileFormatError:
    return FileFormatError(f"{path}: {what}", code="E9006")


class _Npz:
    def __init__(self, path: str):
        arrays = np.load(path, allow_pickle=False)
        if not isinstance(arrays, np.lib.npyio.NpzFile):
            raise refused(path, "a single .npy array, not an .npz file of named arrays")
        self._arrays = arrays

    @property
    def names(self) -> list[str]:
        return list(self._arrays.files)

    def header(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        zip_name = f"{name}.npy" if f"{name}.npy" in self._arrays.zip.namelist() else name
        with self._arrays.zip.open(zip_name) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:  # 3.0 only adds structured dtypes' unicode field names
                raise ValueError(f".npy format {version[0]}.{version[1]}")
        return shape, dtype

    def read(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def close(self) -> None:
        self._arrays.close()


class _Safetensors:
    def __init__(self, path: str):
        self._file = safe_open(path, framework="numpy")

    @property
    def names(self) -> list[str]:
        return list(self._file.keys())

    def header(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        part = self._file.get_slice(name)
        dtype = _SAFETENSORS_DTYPES.get(part.get_dtype())
        if dtype is None:
            raise ValueError(f"array {name} is {part.get_dtype()}, a type presk does not read")
        return tuple(part.get_shape()), np.dtype(dtype)

    def read(self, name: str) -> np.ndarray:
        return self._file.get_tensor(name)

    def close(self) -> None:
        pass  # safe_open maps the file and releases it with the object


@contextmanager
def open_arrays(path: str):
    """The arrays of an `.npz` or `.safetensors` file (by its suffix), for `read_leaf`."""
    kind = _Safetensors if path.endswith(".safetensors") else _Npz
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        # a FIFO or a device: a read could block or never end
        raise UsageError(f"cannot read {path}: not a regular file", code="E0002")
    try:
        arrays = kind(path)
    except OSError as e:
        if e.filename is None:  # not opening the file: reading a damaged one
            raise refused(path, f"not a readable {_suffix(path)} file ({e})") from None
        raise UsageError(f"cannot read {path}: {e.strerror}", code="E0002") from None
    except _ERRORS as e:
        raise refused(path, f"not a readable {_suffix(path)} file ({e})") from None
    try:
        yield arrays
    finally:
        arrays.close()


def _suffix(path: str) -> str:
    return ".safetensors" if path.endswith(".safetensors") else ".npz"


_NEEDS = {"real": "real values", "index": "integers int64 holds", "bool": "bools"}
_BUFFER = {"real": np.float64, "index": np.int64, "bool": bool}


def _dtype_fits(dtype: np.dtype, kind: str) -> bool:
    """Whether `kind` values can be taken from an array of `dtype` as numpy casts safely:
    reals from floats and integers (no complex, long double or object), indices from
    integers int64 holds (no uint64), masks from bools."""
    if kind == "real":
        return (dtype.kind in "fiu" or dtype == ml_dtypes.bfloat16) and np.can_cast(
            dtype, np.float64
        )
    if kind == "index":
        return dtype.kind in "iu" and np.can_cast(dtype, np.int64)
    return dtype.kind == "b"


def read_leaf(
    path: str, arrays, name: str, leaf: TensorType, shape_code: str = "E9006"
) -> np.ndarray:
    """Member `name` as `leaf`'s buffer (float64, int64 or bool), its header checked
    before its data is read; a shape other than the leaf's is refused with `shape_code`
    (E9005 for parameters, as a checkpoint's)."""
    try:
        shape, dtype = arrays.header(name)
        if not _dtype_fits(dtype, leaf.kind):
            raise refused(path, f"array {name} is {dtype}, {leaf.text()} needs {_NEEDS[leaf.kind]}")
        if shape != leaf.shape:
            raise FileFormatError(
                f"{path}: array {name} has shape {list(shape)}, "
                f"{leaf.text()} needs {list(leaf.shape)}",
                code=shape_code,
            )
        data = arrays.read(name)
    except _ERRORS as e:
        raise refused(path, f"array {name} cannot be read ({e})") from None
    return data.astype(_BUFFER[leaf.kind])
