"""The library API calls the commands that take FILE make (presk/api.py): reading the
program, elaborating the entry, compiling it for a backend; the envelope `--precision`
names, checked against them; and the flags that need the API or the backends (the
flags without them are presk/cli/flags.py)."""

from __future__ import annotations

import sys

from presk import api, backends
from presk import realize as realizations
from presk.cli.common import count, real_number
from presk.cli.flags import (
    WEIGHTS_HELP,
    Defaulted,
    add_plan_arg,
    add_seed_arg,
    add_weights_arg,
    given,
    reference_bits,
)
from presk.constants import MAX_BITS
from presk.errors import RealizationError
from presk.fileio import check_exists
from presk.front.bindings import argument_dim, default_entry, missing_entry, parse_assignments
from presk.plans import plan_path, plan_realization
from presk.precision.envelope import Envelope, envelope_for
from presk.toolchain import check_threads
from presk.train.loop import Hyper


def load_program(path: str) -> api.Program:
    """The program at FILE, parsed and checked."""
    check_exists(path)
    return api.load_file(path)


def bindings(args, program: api.Program) -> dict:
    """`--entry`, `--dim` and `--const` as the API's `entry`, `dims` and `consts`; an
    entry left out is the command's default one (`add_program_args`), set in `args`."""
    if args.entry is None:  # refused before the sizes are read, as the API does
        raise missing_entry(program.ast)
    consts = parse_assignments(args.const, "--const", "E3007")
    if not given(args.entry):
        args.entry = default_entry(program.ast, args.entry, consts)
    return {
        "entry": args.entry,
        "dims": parse_assignments(args.dim, "--dim", "E3004"),
        "consts": consts,
    }


def bind_window(args, program: api.Program, window: int) -> None:
    """Bind the dim sizing the tokens' second axis (T) to a data file's window, where
    neither `--dim` nor the program binds it: the data says how long a window is."""
    bound = bindings(args, program)
    name = argument_dim(program.ast, bound["entry"], bound["consts"], 1)
    if name is not None and name not in bound["dims"] and name not in program.ast.dim_defaults:
        args.dim = (args.dim or []) + [f"{name}={window}"]


def elaborate_args(args, program: api.Program | None = None, train_step: bool = False) -> api.Core:
    """The entry the flags name, elaborated (`--remat`), with a training step if asked."""
    program = program or load_program(args.file)
    remat = getattr(args, "remat", "store")
    return program.elaborate(**bindings(args, program), remat=remat, train_step=train_step)


def envelope_of(args, core: api.Core) -> Envelope:
    """The envelope `--precision` names, refused (E7004) unless it was measured on
    `core`'s program, entry and bindings, and on `--weights` where it is given."""
    envelope = envelope_for(args.precision, core)
    measured = envelope.meta.weights
    if args.weights is not None and args.weights != measured:
        raise RealizationError(
            f"{args.precision}: the envelope was measured on weights {measured}, "
            f"not {args.weights}",
            code="E7004",
        )
    return envelope


def add_sample_args(p, machine_backend: str, weights_help: str = WEIGHTS_HELP) -> None:
    """The flags of a command that runs one sample of an entry on a machine backend beside
    the exact reference: its parameters (`--weights`), inputs (`--data`, else drawn from
    `--seed`), the reference's `--bits`, and the machine `--backend` (default
    `machine_backend`)."""
    add_weights_arg(p, weights_help)
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data`: the inputs are its first batch of training "
        "windows; without it they are drawn as `presk run --seed` draws them",
    )
    add_seed_arg(p)
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=128,
        help="precision of the reference in bits (default 128)",
    )
    p.add_argument(
        "--backend",
        choices=backends.names(exact=False),
        default=machine_backend,
        help=f"where the realization runs, the same bits on each (default {machine_backend}): "
        + backends.described(exact=False),
    )


def add_warmup_args(p, defaults: bool = True) -> None:
    """`--warmup` and `--lr` of a command measuring one training step after warm-up steps
    (calibrate --step, solve --step); without `defaults` they stay None when not given, so
    the command can tell they were."""
    p.add_argument(
        "--warmup",
        type=count,
        default=10 if defaults else None,
        metavar="N",
        help="--step: native f64 steps before the measured one (default 10)",
    )
    p.add_argument(
        "--lr",
        type=real_number("a positive finite learning rate", strict=True),
        default=Hyper.lr if defaults else None,
        help=f"--step: the peak learning rate, the measured step's (default {Hyper.lr})",
    )


REFERENCE = "ball"  # what the precision commands measure against unless told


def add_reference_arg(p) -> None:
    """`--reference`: which exact backend a precision command measures against."""
    p.add_argument(
        "--reference",
        choices=backends.names(exact=True),
        default=REFERENCE,
        help=backends.described(exact=True) + f" (default {REFERENCE}: certified balls)",
    )


def add_backend_args(p, default: str = "interp") -> None:
    p.add_argument(
        "--backend",
        choices=backends.names(),
        default=default,
        help=backends.described() + f" (default {default})",
    )
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=256,
        help=f"precision of the reference in bits, 2 to {MAX_BITS} (default 256)",
    )
    p.add_argument(
        "--realize",
        default=Defaulted("f64"),
        metavar="T|@R.json",
        help="the realization: a machine type (f64, f32, bf16) or a record "
        "(docs/realizations.md); default: the --plan file's type, else f64",
    )
    p.add_argument(
        "--threads",
        type=check_threads,
        metavar="N",
        help="worker threads of the mlir backend (default $PRESK_THREADS, else the cores)",
    )
    add_plan_arg(p)


def plan_of(args) -> str | None:
    return plan_path(args.plan) if getattr(args, "plan", None) else None


def compile_args(args, core: api.Core) -> api.Compiled:
    """`core` on `--backend`: a reference at `--bits`, else lowered in `--realize` (and
    `--plan`) and compiled."""
    check_plan_realization(args)
    if backends.backend(args.backend).exact:
        if args.plan:
            print(
                f"note: the reference (--backend {args.backend}) computes exactly at --bits "
                f"{args.bits}: it takes neither the plan's layouts nor its realize",
                file=sys.stderr,
            )
    return core.compile(args.backend, args.realize, args.plan, args.threads, args.bits)


def check_plan_realization(args) -> None:
    """Refuse (E7006) a `--realize` given whose machine type is not the one the `--plan`
    file names: the plan's would replace it unseen. Left out, the plan's type runs."""
    if not (args.plan and given(args.realize)):
        return
    named = plan_realization(plan_path(args.plan))
    ours = realizations.read(args.realize).default
    if named is not None and named != ours:
        flag = f"--realize {args.realize}" + (f" (default {ours})" if ours != args.realize else "")
        raise RealizationError(
            f"{flag} disagrees with the realize {named} of the plan {args.plan}: leave "
            f"--realize out to run the plan's {named}, or plan for {ours} "
            f"(presk plan --realize {ours})",
            code="E7006",
        )
