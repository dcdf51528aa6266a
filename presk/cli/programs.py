"""Reading a PSK program and elaborating an entry, as the commands that take FILE do."""

from __future__ import annotations

from presk import backends, stages
from presk.backends.workers import check_threads
from presk.cli.common import whole_number
from presk.fileio import MAX_SOURCE_BYTES, read_text
from presk.front import ast
from presk.front.bindings import check_memory, missing_entry, parse_assignments, parse_entry
from presk.front.check import check_program
from presk.front.elaborate import Elaborated, elaborate
from presk.front.parser import parse
from presk.front.prelude import with_prelude
from presk.ir.context import new_context
from presk.kernel.relayout import plan_path
from presk.stages import REMATS


def add_program_args(p, default_entry: str | None = None) -> None:
    p.add_argument("file", help="the .psk program")
    p.add_argument(  # not required here: its absence is refused with the program's entries
        "--entry",
        default=default_entry,
        metavar="E",
        help="the function to run: fn, Module.fn or 'Module{c1, c2}.fn'"
        + (f" (default {default_entry})" if default_entry else ""),
    )
    p.add_argument("--dim", action="append", metavar="NAME=N", help="bind a dim (repeatable)")
    p.add_argument(
        "--const",
        action="append",
        metavar="NAME=N",
        help="bind a const of the entry's module (repeatable)",
    )
    p.add_argument(
        "--remat",
        choices=REMATS,
        default="store",
        help="a derivative's residuals: store the forward's values (default) or recompute them",
    )


def read_program(path: str) -> ast.Program:
    """The program at `path`, parsed and checked (E0002 if it cannot be read as text of at
    most MAX_SOURCE_BYTES)."""
    program = with_prelude(parse(read_text(path, MAX_SOURCE_BYTES), path))
    check_program(program)
    return program


def entry_bindings(args, program: ast.Program) -> tuple:
    """(the entry, its dims, its consts) as `--entry`, `--dim` and `--const` give them."""
    if args.entry is None:
        raise missing_entry(program)
    dims = parse_assignments(args.dim, "--dim", "E3004")
    consts = parse_assignments(args.const, "--const", "E3007")
    return parse_entry(args.entry), dims, consts


def elaborate_args(args, program: ast.Program | None = None) -> Elaborated:
    """The entry named by `args`, elaborated into PSK-Core, its derivatives expanded;
    refused (E3012) if its buffers would not fit in memory."""
    program = program or read_program(args.file)
    entry, dims, consts = entry_bindings(args, program)
    elaborated = elaborate(program, entry, dims, consts, new_context())
    check_memory(elaborated.module, entry, dims | consts)
    stages.core(elaborated.module, getattr(args, "remat", "store"))
    return elaborated


# MPFR takes far more, but a reference at millions of bits is no use (and GMP aborts the
# process near 2^31).
MAX_BITS = 65536


reference_bits = whole_number(2, MAX_BITS, f"a whole number of bits from 2 to {MAX_BITS}")


def add_backend_args(p, default: str = "interp") -> None:
    p.add_argument(
        "--backend",
        choices=backends.BACKENDS,
        default=default,
        help="interp: the exact reference; kernel: the kernel evaluator in --realize; "
        "mlir: the kernels compiled to native code through MLIR",
    )
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=256,
        help=f"precision of the reference in bits, 2 to {MAX_BITS} (default 256)",
    )
    p.add_argument(
        "--realize",
        default="f64",
        metavar="T|@R.json",
        help="the realization: a machine type (f64, f32, bf16; default f64) or a record "
        "(docs/realizations.md)",
    )
    p.add_argument(
        "--threads",
        type=check_threads,
        metavar="N",
        help="worker threads of the mlir backend (default $PRESK_THREADS, else the cores)",
    )
    add_plan_arg(p)


def add_plan_arg(p) -> None:
    p.add_argument(
        "--plan",
        metavar="@P.json",
        help="a plan: a realization and a layout for each contraction nest it names",
    )


def plan_of(args) -> str | None:
    return plan_path(args.plan) if getattr(args, "plan", None) else None


def make_backend(args, module):
    """The backend the flags name, for `module` (lowered in place for a machine backend)."""
    return backends.make(args.backend, module, args.bits, args.realize, args.threads, plan_of(args))
