"""The flags every command that takes FILE shares, built without MLIR (a command's parser
is made before it runs, and `presk dump --stage ast` runs without it): FILE and its
entry's bindings, `--weights`, `--seed`, `--plan`, the reference's `--bits`.

A flag whose default a checkpoint's record or a plan may replace (`--entry`, `--remat`,
`--realize`) holds its default as a `Defaulted` string, so that what the user gave is
told apart from what they left out (presk/cli/recorded.py)."""

from __future__ import annotations

from presk.cli.common import seed_number, whole_number
from presk.constants import MAX_BITS
from presk.language import REMATS


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


def add_plan_arg(p) -> None:
    p.add_argument(
        "--plan",
        metavar="@P.json|auto|tuned[:S]|default",
        help="a plan: a realization and a layout for each contraction nest it names; auto, "
        "the cost model's layouts; tuned, the fastest of its best points as measured here "
        "(within S seconds; the mlir backend's default on a core the model was not fitted "
        "on, auto on the others); or default, each nest's default layout (the kernel "
        "evaluator's and dump's)",
    )
