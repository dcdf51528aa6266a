"""presk bisect: a realization run beside the exact reference, and the sites where its gap
grew (presk/precision/bisect.py, docs/precision.md)."""

from __future__ import annotations

from presk.cli.common import positive_count, real_number, seed_number
from presk.cli.programs import add_program_args, elaborate_args, reference_bits
from presk.precision.bisect import Inputs, bisect, text

BACKENDS = ("kernel", "mlir")


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--realize",
        required=True,
        metavar="T|@R.json",
        help="the realization run beside the reference: f64, f32, bf16 or a record",
    )
    p.add_argument(
        "--weights",
        metavar="CKPT|P.npz|P.safetensors",
        help="parameters from a checkpoint or a parameters file instead of the initializers",
    )
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data`: the inputs are its first batch of training "
        "windows; without it they are drawn as `presk run --seed` draws them",
    )
    p.add_argument(
        "--budget",
        type=real_number("a positive number", strict=True),
        metavar="ε",
        help="the largest gap of the output, relative to its largest magnitude: say whether "
        "it is inside, and where the gap first passes it",
    )
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the initial parameters and drawn inputs (default 0)",
    )
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=128,
        help="precision of the reference in bits (default 128)",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="kernel",
        help="where the realization runs: the kernel evaluator (default) or native code "
        "through MLIR (the same bits)",
    )
    p.add_argument(
        "--top",
        type=positive_count,
        default=5,
        metavar="K",
        help="how many of the largest jumps to print (default 5)",
    )


def run(args) -> int:
    core = elaborate_args(args)
    inputs = Inputs(args.seed, args.weights, args.data)
    found = bisect(core, args.realize, inputs, args.backend, args.bits)
    print(text(found, args.top, args.budget), end="")
    return 0
