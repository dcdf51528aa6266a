"""presk quantize: the parameters a realization's `quant` (and `params`) may name."""

from __future__ import annotations

from presk.cli.programs import add_program_args, bindings, load_program
from presk.errors import UsageError
from presk.ir.types import leaves


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--list", action="store_true", help="print each parameter's path, axes and element count"
    )


def run(args) -> int:
    if not args.list:
        raise UsageError("presk quantize: give --list (integer weights are chosen by --realize)")
    program = load_program(args.file)
    t = program.parameter_type(**bindings(args, program))
    if t is None:
        raise UsageError(f"{args.entry} is not a module's function: it has no parameters")
    for path, leaf in leaves(t):
        print(f"{path:<32} {leaf.text():<24} {leaf.size}")
    return 0
