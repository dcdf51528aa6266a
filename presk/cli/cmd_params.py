"""presk params: an entry's parameters, initial or from a checkpoint, written by path (or,
for an imported program, by ONNX initializer) in the type a realization stores them in."""

from __future__ import annotations

import os
from dataclasses import replace

from presk import quantize
from presk import realize as realizations
from presk.cli.common import seed_number
from presk.cli.flags import (
    RECORDED_HELP,
    WEIGHTS_HELP,
    Defaulted,
    add_program_args,
    add_weights_arg,
)
from presk.cli.programs import elaborate_args
from presk.cli.recorded import apply_checkpoint
from presk.errors import FileFormatError, UsageError
from presk.importer.names import WEIGHTS
from presk.kernel.machine import MACHINES
from presk.runtime import params_file
from presk.runtime.inputs import parameters
from presk.runtime.values import Value, leaves, map_leaves


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--seed", type=seed_number, default=0, help="seed of the initial parameters (default 0)"
    )
    add_weights_arg(p, WEIGHTS_HELP + RECORDED_HELP)
    p.add_argument(
        "--realize",
        default=Defaulted("f64"),
        metavar="T|@R.json",
        help="write each parameter in the type this realization stores it in: f64 (the "
        "default) float64, f32 float32, bf16 bfloat16 (a scalar float32), a record's "
        "`params` in their types",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="P.npz|P.safetensors",
        help="where to write them: one array a parameter, named by its path (bfloat16 "
        "needs .safetensors)",
    )
    p.add_argument(
        "--names",
        choices=("path", "onnx"),
        default="path",
        help="name each array by its parameter path (the default), or, for a program presk "
        f"import wrote, by the ONNX initializer it holds, as the {WEIGHTS} beside FILE records "
        "them: the way back to the graph and the model it was exported from",
    )


def run(args) -> int:
    if not params_file.is_params_file(args.out):
        raise UsageError(f"--out {args.out}: write parameters to a .npz or .safetensors file")
    if args.weights:
        apply_checkpoint(args, args.weights)
    realization = realizations.read(args.realize)
    view = elaborate_args(args).view
    params = parameters(view, args.seed, args.weights)
    if params is None:
        raise UsageError(f"{args.entry} is not a module's function: it has no parameters")
    paths = [p for p, _ in leaves(params)]
    realizations.check_paths(realization, paths)
    names = onnx_names(args.file, paths) if args.names == "onnx" else None
    params_file.write(args.out, stored(params, realization), names)
    return 0


def onnx_names(program: str, paths: list[str]) -> dict[str, str]:
    """Each of `paths` by the ONNX initializer it holds, from the weights presk import
    wrote beside `program`; a path they do not name is refused (E9005)."""
    recorded = os.path.join(os.path.dirname(program), WEIGHTS)
    names = params_file.onnx_names(recorded)
    for p in paths:
        if p not in names:
            raise FileFormatError(
                f"{recorded}: names no ONNX initializer for parameter {p} of {program}: "
                "--names onnx needs the weights presk import wrote for this program",
                code="E9005",
            )
    return names


def stored(params: Value, r: realizations.Realization) -> Value:
    """The parameters as the machine backends store them under `r`: a leaf its `params`
    type in that type, any other in the machine's (a bf16 scalar in f32); a quantised leaf
    as the reals its integer weights are made from, which is what a realization keeps
    (presk/quantize.py), so that reading the file back gives the same integers."""
    typed = quantize.stored_parameters(params, replace(r, quant={}), MACHINES[r.default])
    held = dict(leaves(params))
    return map_leaves(lambda p, t: held[p] if p in r.quant else t, typed)
