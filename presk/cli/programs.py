"""Reading a PSK program and elaborating an entry, as the commands that take FILE do."""

from __future__ import annotations

from presk import backends, stages
from presk.backends.workers import check_threads
from presk.errors import UsageError
from presk.front import ast
from presk.front.bindings import parse_assignments, parse_entry
from presk.front.check import check_program
from presk.front.elaborate import Elaborated, elaborate
from presk.front.parser import parse
from presk.front.prelude import with_prelude
from presk.ir.context import new_context
from presk.kernel.relayout import plan_path
from presk.stages import REMATS


def add_program_args(p, entry_required: bool = True, default_entry: str | None = None) -> None:
    p.add_argument("file", help="the .psk program")
    p.add_argument(
        "--entry",
        required=entry_required and default_entry is None,
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
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read {path}: not UTF-8 text") from None
    program = with_prelude(parse(text, path))
    check_program(program)
    return program


def entry_bindings(args) -> tuple:
    """(the entry, its dims, its consts) as `--entry`, `--dim` and `--const` give them."""
    dims = parse_assignments(args.dim, "--dim", "E3004")
    consts = parse_assignments(args.const, "--const", "E3007")
    return parse_entry(args.entry), dims, consts


def elaborate_args(args, program: ast.Program | None = None) -> Elaborated:
    """The entry named by `args`, elaborated into PSK-Core, its derivatives expanded."""
    program = program or read_program(args.file)
    elaborated = elaborate(program, *entry_bindings(args), new_context())
    stages.core(elaborated.module, getattr(args, "remat", "store"))
    return elaborated


def add_backend_args(p, default: str = "interp") -> None:
    p.add_argument(
        "--backend",
        choices=backends.BACKENDS,
        default=default,
        help="interp: the exact reference; kernel: the kernel evaluator in --realize; "
        "mlir: the kernels compiled to native code through MLIR",
    )
    p.add_argument("--bits", type=int, default=256, help="precision of the reference (default 256)")
    p.add_argument(
        "--realize",
        default="f64",
        metavar="T|@R.json",
        help="the realization: a machine type (f64, f32, bf16; default f64) or a record "
        "(docs/realizations.md)",
    )
    p.add_argument(
        "--threads",
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
    if args.bits < 2:
        raise UsageError(f"--bits {args.bits}: the reference needs at least 2 bits")
    threads = check_threads(args.threads) if args.threads is not None else None
    return backends.make(args.backend, module, args.bits, args.realize, threads, plan_of(args))
