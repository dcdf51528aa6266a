"""The flags of the commands that take FILE, and the library API calls they make
(presk/api.py): reading the program, elaborating the entry, compiling it for a backend;
and the envelope `--precision` names, checked against them.

A flag whose default a checkpoint's record or a plan may replace (`--entry`, `--remat`,
`--realize`) holds its default as a `Defaulted` string, so that what the user gave is
told apart from what they left out (presk/cli/recorded.py)."""

from __future__ import annotations

import sys

from presk import api, backends
from presk import realize as realizations
from presk.api import MAX_BITS
from presk.cli.common import count, real_number, seed_number, whole_number
from presk.errors import RealizationError
from presk.front.bindings import argument_dim, default_entry, missing_entry, parse_assignments
from presk.plans import plan_path, plan_realization
from presk.precision.envelope import Envelope, envelope_for
from presk.runtime.inputs import check_exists
from presk.stages import REMATS
from presk.toolchain import check_threads
from presk.train.loop import Hyper


class Defaulted(str):
    """A flag's default, told apart from the same value given: a checkpoint's recorded
    binding or a plan's realization replaces it, never what the user gave."""


def given(value) -> bool:
    """Whether a flag's value is the user's: neither left out nor its default."""
    return value is not None and not isinstance(value, Defaulted)


def add_program_args(p, default_entry: str | None = None, file_optional: bool = False) -> None:
    """FILE and the flags that bind its entry; FILE may be left out where a mode of the
    command reads no program (`presk bench --calibrate`). Without `--entry`, a command
    with a `default_entry` (train's `loss`, run's `apply`) takes the one entry of that
    name whose module's consts are given (`bindings`)."""
    p.add_argument("file", nargs="?" if file_optional else None, help="the .psk program")
    p.add_argument(  # not required here: its absence is refused with the program's entries
        "--entry",
        default=Defaulted(default_entry) if default_entry else None,
        metavar="E",
        help="the function to run: fn, Module.fn or 'Module{c1, c2}.fn'"
        + (
            f" (left out: the one {default_entry} whose module's consts are given)"
            if default_entry
            else ""
        ),
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
        default=Defaulted("store"),
        help="a derivative's residuals: store the forward's values (default) or recompute them",
    )


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


reference_bits = whole_number(2, MAX_BITS, f"a whole number of bits from 2 to {MAX_BITS}")


WEIGHTS_HELP = (
    "parameters from a checkpoint (.psk.d) or a parameters file (.npz, .safetensors: presk "
    "params) instead of the initializers"
)


def recorded_help(flags: str = "--entry, --const, --dim, --realize, --remat") -> str:
    """What `--weights`' help adds where a checkpoint gives the `flags` left out
    (presk/cli/recorded.py)."""
    return f"; a checkpoint of presk train also gives the flags left out ({flags})"


RECORDED_HELP = recorded_help()
# Where a command's --realize names what it measures or reads, not how the entry runs
RECORDED_BINDINGS_HELP = recorded_help("--entry, --const, --dim, --remat")


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


def add_weights_arg(p, help: str = WEIGHTS_HELP, required: bool = False) -> None:
    """`--weights`: the parameters a command reads (presk/runtime/inputs.py)."""
    p.add_argument("--weights", metavar="CKPT|P.npz|P.safetensors", required=required, help=help)


def add_seed_arg(p) -> None:
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the initial parameters and drawn inputs (default 0)",
    )


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


def add_plan_arg(p) -> None:
    p.add_argument(
        "--plan",
        metavar="@P.json|auto|default",
        help="a plan: a realization and a layout for each contraction nest it names; auto, "
        "the cost model's layouts (the mlir backend's default), or default, each nest's "
        "default layout (the kernel evaluator's and dump's)",
    )


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
