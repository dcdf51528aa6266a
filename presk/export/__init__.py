"""`presk export --target c`: an entry as a self-contained C99 program (docs/export.md).

    export_c(kernels)  -> CModel    the files, and how a caller lays out inputs and outputs

The kernels and the host's schedule go through MLIR's EmitC dialect and are printed by
the pinned `mlir-translate --mlir-to-cpp` (presk/export/kernels_c.py, host.py); the
schedule is the MLIR backend's own, traced (trace.py). The parameters, in their realized
types, and the schedule's constants are written to `model.bin`, which the program reads
at run time (files.py writes the header's tables, the Makefile and the data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from presk import quantize
from presk.backends.schedule import Schedule, flatten
from presk.export import files, host, kernels_c, trace
from presk.fileio import write_atomic
from presk.ir.ops import clone_module
from presk.kernel.weights import Weights
from presk.runtime.inputs import arguments, parameters
from presk.runtime.values import Value, leaves
from presk.train.tokenizer import checkpoint_meta, recorded


@dataclass(frozen=True)
class Array:
    """An array the C program reads or writes: its C name, dtype and shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass
class CModel:
    """An exported entry: its files by name, and how a caller lays out its inputs and
    reads its outputs."""

    files: dict[str, str | bytes]
    schedule: Schedule
    params: Value | None  # realized, as model.bin holds them
    param_regions: int  # the schedule's regions the parameters take (integer weights two)
    inputs: list[Array]
    outputs: list[Array]

    def write(self, out: str | Path) -> None:
        for name, data in self.files.items():
            write_atomic(Path(out) / name, data)

    def input_bytes(self, args: list[Value]) -> bytes:
        """The entry's arguments (its parameters excluded) as inputs.bin holds them: each
        leaf in its storage type, one after another."""
        return b"".join(a.tobytes() for a in self._regions(args)[self.param_regions :])

    def read_outputs(self, raw: bytes) -> list[np.ndarray]:
        """outputs.bin as arrays, each in its storage type."""
        out, at = [], 0
        for a in self.outputs:
            out.append(np.frombuffer(raw, a.dtype, math.prod(a.shape), at).reshape(a.shape))
            at += a.nbytes
        return out

    def _regions(self, args: list[Value]) -> list[np.ndarray]:
        given = ([self.params] if self.params is not None else []) + list(args)
        return [np.ascontiguousarray(a) for a in self.schedule.input_arrays(given)]


def export_c(kernels, seed: int = 0, weights: str | None = None, params=None) -> CModel:
    """`kernels` (an api.Kernels) as a C program, its parameters `params` (a runtime
    value) if given, else initialised from `seed` or read from `weights` (a checkpoint or
    parameters file); with the tokenizer a `weights` checkpoint records, if any."""
    module = kernels_c.scalar_affine(clone_module(kernels.module))
    schedule = trace.trace(module, kernels.realization)
    steps = trace.host_steps(schedule)
    launched = sorted({s.kernel.name for s in steps if isinstance(s, trace.Launch)})
    emitted = kernels_c.to_c(kernels_c.emitc_module(module, launched, host.host_mlir(steps)))

    view = kernels.core.view
    if params is None:
        params = parameters(view, seed, weights)
    if params is not None:
        params = quantize.parameter_values(params, kernels.realization, native=True)
    leaves_of_params = len(flatten(params, schedule.arg_types[0])) if params is not None else 0
    taken = sum(2 if isinstance(e, Weights) else 1 for e in schedule.elements[:leaves_of_params])
    model = CModel({}, schedule, params, taken, [], [])
    args = arguments(view, seed, None)  # stand-ins: only their layout is read
    regions = model._regions(args)
    first = len(view.entry_function.arg_names) - len(args)
    names = [
        f"{name}.{path}" if path else name
        for name, arg in zip(view.entry_function.arg_names[first:], args, strict=True)
        for path, _ in leaves(arg)
    ]
    model.inputs = [
        Array(files.c_ident(n), a.dtype, a.shape)
        for n, a in zip(names, regions[taken:], strict=True)
    ]
    model.outputs = [
        Array(files.c_ident(f"out.{p}" if p else "out"), t.data.dtype, t.data.shape)
        for p, t in leaves(schedule.result)
    ]
    tokenizer = recorded(checkpoint_meta(weights), weights) if weights else None
    model.files = files.model_files(kernels, model, regions[:taken], emitted, tokenizer)
    return model
