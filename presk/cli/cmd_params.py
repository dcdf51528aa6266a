"""presk params: an entry's parameters, initial or from a checkpoint, written by path."""

from __future__ import annotations

from presk.cli.common import seed_number
from presk.cli.programs import add_program_args, add_weights_arg, elaborate_args
from presk.errors import UsageError
from presk.runtime import params_file
from presk.runtime.inputs import parameters


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--seed", type=seed_number, default=0, help="seed of the initial parameters (default 0)"
    )
    add_weights_arg(p)
    p.add_argument(
        "--out",
        required=True,
        metavar="P.npz|P.safetensors",
        help="where to write them: one float64 array a parameter, named by its path",
    )


def run(args) -> int:
    if not params_file.is_params_file(args.out):
        raise UsageError(f"--out {args.out}: write parameters to a .npz or .safetensors file")
    params = parameters(elaborate_args(args).view, args.seed, args.weights)
    if params is None:
        raise UsageError(f"{args.entry} is not a module's function: it has no parameters")
    params_file.write(args.out, params)
    return 0
