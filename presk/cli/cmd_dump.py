"""presk dump: show a program at a stage of the pipeline."""

from __future__ import annotations

import sys

from presk.cli.programs import add_program_args, elaborate_args, read_program
from presk.errors import UsageError
from presk.front.unparse import program as unparse
from presk.ir.core_text import core_text

HELP = "show a program at a stage: its syntax tree (ast) or PSK-Core (core)"
STAGES = ("ast", "core")


def configure(p) -> None:
    add_program_args(p, entry_required=False)
    p.add_argument(
        "--stage", choices=STAGES, default="core", help="the stage to show (default core)"
    )
    p.add_argument(
        "--format",
        choices=("text", "mlir"),
        default="text",
        help="readable text, or the MLIR module presk-opt reads (core only)",
    )


def run(args) -> int:
    program = read_program(args.file)
    if args.stage == "ast":
        sys.stdout.write(unparse(program))
        return 0
    if not args.entry:
        raise UsageError("--stage core needs --entry")
    elaborated = elaborate_args(args, program)
    if args.format == "mlir":
        sys.stdout.write(str(elaborated.module))
    else:
        sys.stdout.write(core_text(elaborated.module))
    return 0
