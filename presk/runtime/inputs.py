"""Where a run's parameters and arguments come from: a checkpoint, a parameters file or
the initializers; an `.npz` (or `.safetensors`) file or the seed."""

from __future__ import annotations

from presk.core.program import HostProgram
from presk.errors import FileFormatError
from presk.ir.types import PskType, TensorType
from presk.runtime import checkpoint, params_file
from presk.runtime.arrays_file import open_arrays, read_leaf, refused
from presk.runtime.synth import entry_arguments, init_params, synth_inputs
from presk.runtime.values import Tensor, Value, build


def param_type(program: HostProgram) -> PskType | None:
    fn = program.entry_function
    return fn.arg_types[0] if "psk.module" in program.attrs else None


def parameters(program: HostProgram, seed: int, weights: str | None) -> Value | None:
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


def _from_arrays(path: str, name: str, t: PskType, arrays) -> Value:
    def make(p: str, leaf: TensorType) -> Tensor:
        if p not in arrays.names:
            known = ", ".join(sorted(arrays.names)) or "none"
            raise refused(path, f"no array {p} for argument {name} (arrays: {known})")
        return Tensor(leaf, read_leaf(path, arrays, p, leaf))

    return build(t, make, name)


def arguments(program: HostProgram, seed: int, inputs: str | None) -> list[Value]:
    """The entry's arguments (its parameters excluded): from `inputs` (.npz or
    .safetensors, one array a leaf, named by argument name and path) if given, else drawn
    from the seed."""
    if inputs is None:
        return list(synth_inputs(program, seed).values())
    with open_arrays(inputs) as arrays:
        return [
            _from_arrays(inputs, n, t, arrays)
            for n, t in entry_arguments(program, program.entry_function)
        ]
