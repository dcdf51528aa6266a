"""The flags of the commands that take FILE, and the library API calls they make
(presk/api.py): reading the program, elaborating the entry, compiling it for a backend."""

from __future__ import annotations

from presk import api, backends
from presk.api import MAX_BITS
from presk.cli.common import count, real_number, seed_number, whole_number
from presk.front.bindings import missing_entry, parse_assignments
from presk.plans import plan_path
from presk.stages import REMATS
from presk.toolchain import check_threads
from presk.train.loop import Hyper


def add_program_args(p, default_entry: str | None = None, file_optional: bool = False) -> None:
    """FILE and the flags that bind its entry; FILE may be left out where a mode of the
    command reads no program (`presk bench --calibrate`)."""
    p.add_argument("file", nargs="?" if file_optional else None, help="the .psk program")
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


def load_program(path: str) -> api.Program:
    """The program at FILE, parsed and checked."""
    return api.load_file(path)


def bindings(args, program: api.Program) -> dict:
    """`--entry`, `--dim` and `--const` as the API's `entry`, `dims` and `consts`."""
    if args.entry is None:  # refused before the sizes are read, as the API does
        raise missing_entry(program.ast)
    return {
        "entry": args.entry,
        "dims": parse_assignments(args.dim, "--dim", "E3004"),
        "consts": parse_assignments(args.const, "--const", "E3007"),
    }


def elaborate_args(args, program: api.Program | None = None, train_step: bool = False) -> api.Core:
    """The entry the flags name, elaborated (`--remat`), with a training step if asked."""
    program = program or load_program(args.file)
    remat = getattr(args, "remat", "store")
    return program.elaborate(**bindings(args, program), remat=remat, train_step=train_step)


reference_bits = whole_number(2, MAX_BITS, f"a whole number of bits from 2 to {MAX_BITS}")


def add_seed_arg(p) -> None:
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the initial parameters and drawn inputs (default 0)",
    )


def add_sample_args(p, machine_backend: str) -> None:
    """The flags of a command that runs one sample of an entry on a machine backend beside
    the exact reference: its parameters (`--weights`), inputs (`--data`, else drawn from
    `--seed`), the reference's `--bits`, and the machine `--backend` (default
    `machine_backend`)."""
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
    add_seed_arg(p)
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=128,
        help="precision of the reference in bits (default 128)",
    )
    p.add_argument(
        "--backend",
        choices=("kernel", "mlir"),
        default=machine_backend,
        help=f"where the realization runs: the kernel evaluator or native code through "
        f"MLIR, the same bits (default {machine_backend})",
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
        metavar="@P.json|auto|default",
        help="a plan: a realization and a layout for each contraction nest it names; auto, "
        "the cost model's layouts (the mlir backend's default), or default, each nest's "
        "default layout (the kernel evaluator's and dump's)",
    )


def plan_of(args) -> str | None:
    return plan_path(args.plan) if getattr(args, "plan", None) else None


def compile_args(args, core: api.Core) -> api.Compiled:
    """`core` lowered in `--realize` (and `--plan`), compiled for `--backend`."""
    kernels = core.lower(args.realize, args.plan)
    return kernels.compile(args.backend, threads=args.threads, bits=args.bits)
