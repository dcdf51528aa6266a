"""presk export: an entry as a C99 program, through MLIR's EmitC (docs/export.md)."""

from __future__ import annotations

import os

from presk.cli.flags import (
    RECORDED_HELP,
    WEIGHTS_HELP,
    Defaulted,
    add_plan_arg,
    add_program_args,
    add_seed_arg,
    add_weights_arg,
)
from presk.cli.programs import check_plan_realization, elaborate_args
from presk.cli.recorded import apply_checkpoint
from presk.errors import UsageError
from presk.export import export_c


def configure(p) -> None:
    add_program_args(p)
    p.add_argument("--target", choices=["c"], default="c", help="what to write: C99 source")
    p.add_argument(
        "--realize",
        default=Defaulted("f64"),
        metavar="T|@R.json",
        help="the realization: a machine type (f64, f32, bf16) or a record "
        "(docs/realizations.md); default: a --weights checkpoint's, else f64",
    )
    add_plan_arg(p)
    add_seed_arg(p)
    add_weights_arg(p, WEIGHTS_HELP + RECORDED_HELP)
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the directory to write the C files, the Makefile and model.bin to",
    )


def run(args) -> int:
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: not a directory", code="E0003")
    if args.weights:
        apply_checkpoint(args, args.weights)
    check_plan_realization(args)
    kernels = elaborate_args(args).lower(args.realize, args.plan)
    model = export_c(kernels, args.seed, args.weights)
    model.write(args.out)
    names = ", ".join(model.files)
    print(f"wrote {names} to {args.out}; `make -C {args.out}` builds ./model")
    return 0
