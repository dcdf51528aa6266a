"""presk params: an entry's parameters, initial or from a checkpoint, written by path in
the type a realization stores them in."""

from __future__ import annotations

from dataclasses import replace

from presk import quantize
from presk import realize as realizations
from presk.cli.common import seed_number
from presk.cli.programs import (
    RECORDED_HELP,
    WEIGHTS_HELP,
    Defaulted,
    add_program_args,
    add_weights_arg,
    elaborate_args,
)
from presk.cli.recorded import apply_checkpoint
from presk.errors import UsageError
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
    realizations.check_paths(realization, [p for p, _ in leaves(params)])
    params_file.write(args.out, stored(params, realization))
    return 0


def stored(params: Value, r: realizations.Realization) -> Value:
    """The parameters as the machine backends store them under `r`: a leaf its `params`
    type in that type, any other in the machine's (a bf16 scalar in f32); a quantised leaf
    as the reals its integer weights are made from, which is what a realization keeps
    (presk/quantize.py), so that reading the file back gives the same integers."""
    typed = quantize.stored_parameters(params, replace(r, quant={}), MACHINES[r.default])
    held = dict(leaves(params))
    return map_leaves(lambda p, t: held[p] if p in r.quant else t, typed)
