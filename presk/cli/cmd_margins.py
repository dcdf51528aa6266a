"""presk margins: the exact model's margins on held-out positions, the budget on the logits
an accuracy target asks (ε*), and the decisions a realization changes against what the
margins allow (presk/precision/margins.py, docs/precision.md)."""

from __future__ import annotations

import argparse
import shlex
from decimal import ROUND_FLOOR, Decimal

import numpy as np

from presk import backends
from presk.cli.cmd_generate import recorded_setup
from presk.cli.common import positive_count, real_number
from presk.cli.flags import add_program_args, recorded_help, reference_bits
from presk.cli.programs import add_reference_arg, elaborate_args, load_program
from presk.errors import UsageError
from presk.precision.margins import (
    Bound,
    Check,
    check,
    check_logits_entry,
    epsilon_star,
    exact_logits,
    held_out_batches,
    held_out_job,
    margins_of,
    needed_positions,
)
from presk.progress import Progress
from presk.toolchain import default_threads
from presk.train.data import Windows

_positive = real_number("a number between 0 and 1", strict=True)


def open_fraction(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1."""
    x = _positive(text)
    if x >= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1")
    return x


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--weights",
        required=True,
        metavar="CKPT|P.npz|P.safetensors",
        help="the trained parameters whose decisions are measured"
        + recorded_help("--const, --dim, --remat, --data; its module's apply for --entry"),
    )
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data`: the margins are read on its held-out windows "
        "(default: the data a --weights checkpoint was trained on)",
    )
    p.add_argument(
        "--delta",
        type=open_fraction,
        default=1e-3,
        metavar="δ",
        help="the fraction of decisions a realization may change (default 1e-3)",
    )
    p.add_argument(
        "--confidence",
        type=open_fraction,
        default=0.95,
        help="the confidence that at most a δ fraction of margins lie below 2ε* (default 0.95)",
    )
    p.add_argument(
        "--samples",
        type=positive_count,
        metavar="N",
        help="read the first N batches of held-out windows (default: every full batch)",
    )
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=64,
        help="precision of the reference in bits (default 64: margins far above 2^-64 of "
        "the logits need no more, and it is the fastest)",
    )
    add_reference_arg(p)
    p.add_argument(
        "--workers",
        type=positive_count,
        metavar="N",
        help="local processes the batches are spread over (default: the cores)",
    )
    p.add_argument(
        "--check",
        metavar="T|@R.json",
        help="run this realization on the same positions: count the decisions it changes "
        "and those the margins allow",
    )
    p.add_argument(
        "--backend",
        choices=backends.names(exact=False),
        help="where --check runs the realization: the kernel evaluator (default) or native "
        "code through MLIR (the same bits)",
    )


def run(args) -> int:
    if args.backend is not None and args.check is None:
        raise UsageError("--backend chooses where --check runs a realization: give --check")
    program = load_program(args.file)
    meta = recorded_setup(args, program)  # the logits: the recorded module's apply
    if args.data is None:
        if not (meta and meta.get("data")):
            raise UsageError("give --data: the windows whose held-out margins are read")
        args.data = meta["data"]
    core = elaborate_args(args, program)
    data = Windows.load(args.data)
    batch = check_logits_entry(core.view, data)[0].shape[0]
    batches = held_out_batches(data, batch, args.samples)
    job = held_out_job(program, core, args.weights, args.data, batches, args.bits, args.reference)
    workers = args.workers if args.workers is not None else default_threads()
    with Progress(f"presk margins: the exact logits of {batches} batches", phase=True):
        exact = exact_logits(core, job, workers)
    margins = margins_of(exact)
    bound = epsilon_star(margins, args.delta, args.confidence)
    print(_header(args, core.entry, f"{batches} × {batch}", margins))
    print(_bound(bound))
    if bound.epsilon > 0:
        print(_commands(args, bound))
    if args.check is not None:
        backend = args.backend or "kernel"
        with Progress(f"presk margins: --check {args.check} on {backend}", phase=True):
            checked = check(core, job.meta, exact, args.check, backend)
        print(_check(args.check, backend, checked, bound))
    return 0


def _header(args, entry: str, batches: str, margins: np.ndarray) -> str:
    return "\n".join(
        [
            f"presk margins: `{entry}` of {args.file} on {len(margins)} held-out positions "
            f"({batches} windows of {args.data}), exact reference at {args.bits} bits",
            f"margins (top logit − second): min {_n(float(np.min(margins)))}, "
            f"median {_n(float(np.median(margins)))}",
        ]
    )


def _bound(b: Bound) -> str:
    head = f"ε*(δ = {b.delta:g}) at confidence {b.confidence:g}:"
    if b.rank is None:
        return (
            f"{head} none: {b.positions} positions are too few to bound a δ fraction at "
            f"this confidence; it needs {needed_positions(b.delta, b.confidence)} "
            "(more held-out windows, or a larger batch)"
        )
    return (
        f"{head} {_n(b.epsilon)}, half the margin of rank {b.rank} of {b.positions} (smallest "
        f"first): a realization within ε* of every logit changes at most a δ fraction"
    )


def _commands(args, b: Bound) -> str:
    """The commands that solve for ε* on the logits, the flags of this one repeated."""
    program = [args.file, "--entry", args.entry]
    for flag, given in (("--dim", args.dim), ("--const", args.const)):
        for assignment in given or []:
            program += [flag, assignment]
    if args.remat != "store":
        program += ["--remat", args.remat]
    weights = ["--weights", args.weights]
    calibrate = ["presk", "calibrate", "--precision", *program, *weights, "--out", "ENV.json"]
    solve = ["presk", "solve", *program, "--precision", "ENV.json", *weights]
    solve += ["--budget-abs", _budget(b.epsilon), "--out", "R.json"]
    lines = ["the budget on the logits, solved:", shlex.join(calibrate), shlex.join(solve)]
    return "\n  ".join(lines)


def _budget(epsilon: float) -> str:
    """ε* to 3 significant digits, rounded down so that the budget stays inside it."""
    exact = Decimal(epsilon)
    step = Decimal(1).scaleb(exact.adjusted() - 2)
    return str(exact.quantize(step, rounding=ROUND_FLOOR).normalize())


def _check(realize: str, backend: str, c: Check, b: Bound) -> str:
    within = (
        ""
        if b.rank is None
        else f" (ε* {_n(b.epsilon)}: " + ("inside)" if c.gap <= b.epsilon else "outside)")
    )
    verdict = "within what they allow" if c.changed <= c.allowed else "MORE than they allow"
    return "\n".join(
        [
            f"check {realize} ({backend}): largest gap to the exact logits {_n(c.gap)}{within}",
            f"decisions changed: {c.changed} of {b.positions}; the margins allow {c.allowed} "
            f"(margin ≤ 2 × gap): {verdict}",
        ]
    )


def _n(x: float) -> str:
    return f"{x:.3g}"
