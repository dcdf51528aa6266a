"""presk bisect: a realization run beside the exact reference, and the sites where its gap
grew (presk/precision/bisect.py, docs/precision.md)."""

from __future__ import annotations

from presk.cli.common import positive_count, real_number
from presk.cli.flags import RECORDED_BINDINGS_HELP, WEIGHTS_HELP, add_program_args
from presk.cli.programs import add_reference_arg, add_sample_args, elaborate_args
from presk.cli.recorded import apply_checkpoint
from presk.precision.bisect import Inputs, bisect, text
from presk.progress import Progress


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--realize",
        required=True,
        metavar="T|@R.json",
        help="the realization run beside the reference: f64, f32, bf16 or a record",
    )
    p.add_argument(
        "--budget",
        type=real_number("a positive number", strict=True),
        metavar="ε",
        help="the largest gap of the output, relative to its largest magnitude: say whether "
        "it is inside, and where the gap first passes it",
    )
    add_sample_args(p, "kernel", WEIGHTS_HELP + RECORDED_BINDINGS_HELP)
    p.add_argument(
        "--top",
        type=positive_count,
        default=5,
        metavar="K",
        help="how many of the largest jumps to print (default 5)",
    )
    add_reference_arg(p)


def run(args) -> int:
    if args.weights:
        apply_checkpoint(args, args.weights)
    core = elaborate_args(args)
    inputs = Inputs(args.seed, args.weights, args.data)
    label = f"presk bisect: {args.realize} on {args.backend} beside the reference"
    with Progress(label, phase=True):
        found = bisect(core, args.realize, inputs, args.backend, args.bits, args.reference)
    print(text(found, args.top, args.budget), end="")
    return 0
