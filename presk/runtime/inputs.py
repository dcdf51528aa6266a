"""Where a run's parameters and arguments come from: a checkpoint or the initializers,
an `.npz` file or the seed."""

from __future__ import annotations

import zipfile

import numpy as np

from presk.errors import FileFormatError
from presk.ir.program import Program
from presk.ir.types import PskType, TensorType
from presk.runtime import checkpoint
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
    if weights:
        return checkpoint.load(weights, t)[0]
    return init_params(t, program.param_specs, seed)


_KIND_DTYPES = {"real": "fc", "index": "iu", "bool": "b"}


def _from_npz(path: str, name: str, t: PskType, arrays) -> Value:
    def make(p: str, leaf: TensorType) -> Tensor:
        if p not in arrays:
            known = ", ".join(sorted(arrays.files)) or "none"
            raise FileFormatError(
                f"{path}: no array {p} for argument {name} (arrays: {known})", code="E9006"
            )
        a = arrays[p]
        if a.dtype.kind not in _KIND_DTYPES[leaf.kind] and not (
            leaf.kind == "real" and a.dtype.kind in "iu"
        ):
            raise FileFormatError(
                f"{path}: array {p} is {a.dtype}, {leaf.text()} needs {leaf.kind} values",
                code="E9006",
            )
        if tuple(a.shape) != leaf.shape:
            raise FileFormatError(
                f"{path}: array {p} has shape {list(a.shape)}, "
                f"{leaf.text()} needs {list(leaf.shape)}",
                code="E9006",
            )
        dtype = {"real": np.float64, "index": np.int64, "bool": bool}[leaf.kind]
        return Tensor(leaf, a.astype(dtype))

    return build(t, make, name)


def arguments(program: Program, seed: int, inputs: str | None) -> list[Value]:
    """The entry's arguments (its parameters excluded): from `inputs` (.npz, one array a
    leaf, named by argument name and path) if given, else drawn from the seed."""
    if inputs is None:
        return list(synth_inputs(program, seed).values())
    try:
        arrays = np.load(inputs, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise FileFormatError(f"{inputs}: not a readable .npz file ({e})", code="E9006") from None
    with arrays:
        return [
            _from_npz(inputs, n, t, arrays)
            for n, t in entry_arguments(program, program.entry_function)
        ]
