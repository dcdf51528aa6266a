"""Where a run's parameters and arguments come from: a checkpoint, a parameters file or
the initializers; an `.npz` (or `.safetensors`) file or the seed. A path that is not there
is refused with the nearest name in its folder, and a run's folder given for a checkpoint
with the checkpoints inside."""

from __future__ import annotations

import os

from presk.core.program import HostProgram
from presk.errors import FileFormatError, PreskError
from presk.fileio import check_exists, no_such_file
from presk.ir.types import PskType, TensorType
from presk.runtime import checkpoint, params_file
from presk.runtime.arrays_file import open_arrays, read_leaf, refused
from presk.runtime.synth import entry_arguments, init_params, synth_inputs
from presk.runtime.values import Tensor, Value, build

# The checkpoints `presk train --out DIR` writes in DIR (presk/train/loop.py): the last
# step's, and the one of the lowest validation loss.
RUN_CHECKPOINTS = ("checkpoint.psk.d", "best.psk.d")


def checkpoint_refusal(path: str, error: PreskError) -> PreskError:
    """`error`, a refusal to read the checkpoint at `path`, told better where no container
    is there (E9001) because nothing is, or because `path` is the folder of a run: its
    checkpoints named."""
    if error.code != "E9001":
        return error
    if not os.path.lexists(path):
        return FileFormatError(f"cannot read {path}: {no_such_file(path)}", code="E9001")
    inside = [
        os.path.join(path, n) for n in RUN_CHECKPOINTS if os.path.isdir(os.path.join(path, n))
    ]
    if inside:
        return FileFormatError(
            f"{path}: the folder of a run, not a checkpoint; give {' or '.join(inside)}",
            code="E9001",
        )
    return error


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
        check_exists(weights)
        return params_file.read(weights, t)
    if weights:
        try:
            return checkpoint.load(weights, t)[0]
        except FileFormatError as e:
            raise checkpoint_refusal(weights, e) from None
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
    check_exists(inputs)
    with open_arrays(inputs) as arrays:
        return [
            _from_arrays(inputs, n, t, arrays)
            for n, t in entry_arguments(program, program.entry_function)
        ]
