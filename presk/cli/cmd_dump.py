"""presk dump: show a program at a stage of the pipeline. The syntax tree is shown without
loading MLIR; every later stage by presk/cli/dump_stages.py, imported when asked for."""

from __future__ import annotations

import sys

from presk.cli.common import seed_number
from presk.cli.flags import (
    WEIGHTS_HELP,
    add_plan_arg,
    add_program_args,
    add_weights_arg,
    reference_bits,
)
from presk.errors import UsageError
from presk.fileio import MAX_SOURCE_BYTES, check_exists, read_text
from presk.front.check import checked_source
from presk.front.unparse import program as unparse
from presk.precision.choices import SWEEPS
from presk.toolchain import vector_bytes

STAGES = ("ast", "core", "kernel", "affine", "llvm", "sensitivity")


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--stage",
        choices=STAGES,
        default="core",
        help="the stage to show (default core); sensitivity: each value's ‖∂L/∂v‖₁ for the "
        "entry L, ranked (docs/precision.md)",
    )
    p.add_argument(
        "--format",
        choices=("text", "mlir"),
        default="text",
        help="readable text, or the MLIR module presk-opt reads",
    )
    p.add_argument(
        "--vector-bytes",
        type=int,
        choices=(16, 32, 64),
        metavar="{16,32,64}",
        help="--stage affine, llvm: lower for vectors of this many bytes, another machine's "
        f"(default: this machine's, {vector_bytes()})",
    )
    p.add_argument(
        "--realize",
        default="f64",
        metavar="T|@R.json",
        help="the machine type of the kernels (--stage kernel, affine, llvm; default f64); "
        "with --stage core --format mlir, a realization's storage and parameter types",
    )
    add_plan_arg(p)
    add_weights_arg(p, "--stage sensitivity: " + WEIGHTS_HELP)
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="--stage sensitivity: seed of initial parameters and drawn inputs (default 0)",
    )
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=128,
        help="--stage sensitivity: precision of the reference in bits (default 128)",
    )
    p.add_argument(
        "--sweep",
        choices=SWEEPS,
        default="reference",
        help="--stage sensitivity: the sweep on the exact reference (default), or in "
        "binary64 on the kernel evaluator (f64)",
    )


def run(args) -> int:
    if args.stage in ("ast", "sensitivity") and args.format == "mlir":
        raise UsageError(
            f"--format mlir shows an elaborated module, not --stage {args.stage} (text only)"
        )
    if args.stage == "ast":  # a parse and a check: no MLIR loaded
        check_exists(args.file)
        text = read_text(args.file, MAX_SOURCE_BYTES)
        sys.stdout.write(unparse(checked_source(text, args.file)))
        return 0
    from presk.cli import dump_stages  # loads MLIR

    return dump_stages.run(args)
