"""presk run: run an entry on a backend and print or save its output."""

from __future__ import annotations

import sys

from presk.backends.host import CallContext
from presk.backends.interp import Interpreter
from presk.cli.programs import add_program_args, elaborate_args
from presk.errors import UsageError
from presk.ir.program import read_program
from presk.runtime import output
from presk.runtime.inputs import arguments, parameters

HELP = "run an entry (the exact reference: --backend interp) and print its output"


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--backend",
        choices=("interp",),
        default="interp",
        help="interp: the exact reference (mpmath/MPFR at --bits)",
    )
    p.add_argument(
        "--bits", type=int, default=256, help="precision of the reference, in bits (default 256)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of initial parameters and drawn inputs (default 0)",
    )
    p.add_argument(
        "--weights",
        metavar="CKPT.psk.d",
        help="parameters from a checkpoint instead of the initializers",
    )
    p.add_argument(
        "--inputs",
        metavar="IN.npz",
        help="arguments from an .npz file (one array per leaf) instead of drawn",
    )
    p.add_argument(
        "--out", metavar="OUT.npz", help="also write the output as float64 arrays to OUT.npz"
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the output with its axes; json: every element as a decimal string",
    )


def run(args) -> int:
    if args.bits < 2:
        raise UsageError(f"--bits {args.bits}: the reference needs at least 2 bits")
    elaborated = elaborate_args(args)
    program = read_program(elaborated.module)
    params = parameters(program, args.seed, args.weights)
    call_args = ([params] if params is not None else []) + arguments(
        program, args.seed, args.inputs
    )
    backend = Interpreter(program, args.bits)
    result = backend.call(call_args, CallContext(seed=args.seed))
    if args.out:
        output.write_npz(args.out, result)
    if args.format == "json":
        header = {
            "entry": program.entry,
            "backend": backend.name,
            "bits": args.bits,
            "seed": args.seed,
        }
        sys.stdout.write(output.json_text(result, header, args.bits))
    else:
        sys.stdout.write(output.text(result))
    return 0
