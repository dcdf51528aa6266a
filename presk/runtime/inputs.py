"""Where a run's parameters and arguments come from: a checkpoint or the initializers,
an `.npz` file or the seed."""

from __future__ import annotations

import zipfile
import zlib

import numpy as np

from presk.errors import FileFormatError, UsageError
from presk.ir.program import Program
from presk.ir.types import PskType, TensorType
from presk.runtime import checkpoint, params_file
from presk.runtime.synth import entry_arguments, init_params, synth_inputs
from presk.runtime.values import Tensor, Value, build


def param_type(program: Program) -> PskType | None:
    fn = program.entry_function
    return fn.arg_types[0] if "psk.module" in program.attrs else None


def parameters(program: Program, seed: int, weights: str | None) -> Value | None:
    """The entry module's parameters: from `weights` if given, else initialised."""
    t = param_type(program)
    if t is None:
        if weights:
            raise FileFormatError(f"{weights}: the entry has no parameters to load", code="E9005")
        return None
    if weights and params_file.is_params_file(weights):
        return params_file.read(weights, t)
    if weights:
        return checkpoint.load(weights, t)[0]
    return init_params(t, program.param_specs, seed)


# What a broken .npz raises, at opening or (members are read lazily) at each read: zip
# damage (a seek to a bad offset is an OSError), a truncated or malformed .npy, an
# unsupported compression (NotImplementedError, a RuntimeError) or an encrypted member.
_NPZ_ERRORS = (OSError, ValueError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error)


def _refused(path: str, what: str) -> FileFormatError:
    return FileFormatError(f"{path}: {what}", code="E9006")


def _open_npz(path: str) -> np.lib.npyio.NpzFile:
    try:
        arrays = np.load(path, allow_pickle=False)
    except OSError as e:
        if e.filename is None:  # not opening the file: reading a damaged one
            raise _refused(path, f"not a readable .npz file ({e})") from None
        raise UsageError(f"cannot read {path}: {e.strerror}", code="E0002") from None
    except _NPZ_ERRORS as e:
        raise _refused(path, f"not a readable .npz file ({e})") from None
    if not isinstance(arrays, np.lib.npyio.NpzFile):
        raise _refused(path, "a single .npy array, not an .npz file of named arrays")
    return arrays


def _header(arrays: np.lib.npyio.NpzFile, p: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of member `p` from its .npy header, without reading its data."""
    name = f"{p}.npy" if f"{p}.npy" in arrays.zip.namelist() else p
    with arrays.zip.open(name) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:  # 3.0 only adds structured dtypes' unicode field names
            raise ValueError(f".npy format {version[0]}.{version[1]}")
    return shape, dtype


_NEEDS = {"real": "real values", "index": "integers int64 holds", "bool": "bools"}


def _dtype_fits(dtype: np.dtype, kind: str) -> bool:
    """Whether `kind` values can be taken from an array of `dtype` as numpy casts safely:
    reals from floats and integers (no complex, long double or object), indices from
    integers int64 holds (no uint64), masks from bools."""
    if kind == "real":
        return dtype.kind in "fiu" and np.can_cast(dtype, np.float64)
    if kind == "index":
        return dtype.kind in "iu" and np.can_cast(dtype, np.int64)
    return dtype.kind == "b"


def _read_leaf(path: str, arrays, p: str, leaf: TensorType) -> np.ndarray:
    """Member `p` as `leaf`'s buffer, its header checked before its data is read."""
    try:
        shape, dtype = _header(arrays, p)
        if not _dtype_fits(dtype, leaf.kind):
            raise _refused(path, f"array {p} is {dtype}, {leaf.text()} needs {_NEEDS[leaf.kind]}")
        if shape != leaf.shape:
            raise _refused(
                path, f"array {p} has shape {list(shape)}, {leaf.text()} needs {list(leaf.shape)}"
            )
        a = arrays[p]
    except _NPZ_ERRORS as e:
        raise _refused(path, f"array {p} cannot be read ({e})") from None
    return a.astype({"real": np.float64, "index": np.int64, "bool": bool}[leaf.kind])


def _from_npz(path: str, name: str, t: PskType, arrays) -> Value:
    def make(p: str, leaf: TensorType) -> Tensor:
        if p not in arrays:
            known = ", ".join(sorted(arrays.files)) or "none"
            raise _refused(path, f"no array {p} for argument {name} (arrays: {known})")
        return Tensor(leaf, _read_leaf(path, arrays, p, leaf))

    return build(t, make, name)


def arguments(program: Program, seed: int, inputs: str | None) -> list[Value]:
    """The entry's arguments (its parameters excluded): from `inputs` (.npz, one array a
    leaf, named by argument name and path) if given, else drawn from the seed."""
    if inputs is None:
        return list(synth_inputs(program, seed).values())
    with _open_npz(inputs) as arrays:
        return [
            _from_npz(inputs, n, t, arrays)
            for n, t in entry_arguments(program, program.entry_function)
        ]
