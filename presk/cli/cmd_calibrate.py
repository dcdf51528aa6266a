"""presk calibrate --precision: the magnitude envelope of an entry, measured on the exact
reference over samples (presk/precision/calibrate.py, docs/precision.md); and
presk calibrate --step: one training step under realizations against the exact step
(presk/precision/step_gap.py)."""

from __future__ import annotations

import datetime
import os
import sys

from presk.cli.common import count, positive_count
from presk.cli.flags import (
    RECORDED_BINDINGS_HELP,
    WEIGHTS_HELP,
    add_program_args,
    add_seed_arg,
    add_weights_arg,
    reference_bits,
)
from presk.cli.programs import (
    add_reference_arg,
    add_warmup_args,
    elaborate_args,
    load_program,
)
from presk.cli.recorded import apply_checkpoint
from presk.errors import UsageError
from presk.fileio import check_writable
from presk.precision.calibrate import Job, calibrate, on_processes, serially
from presk.precision.cluster import on_cluster
from presk.precision.envelope import GRAINS, Envelope, Meta, program_digest, write_envelope
from presk.precision.samples import sample_arguments
from presk.precision.step_gap import DEFAULTS, Measured, Setup, measure, read_realizations
from presk.progress import Progress
from presk.runtime.inputs import parameters
from presk.toolchain import default_threads
from presk.train.data import Windows
from presk.train.loop import sci

SHOWN = 10  # sites listed, the largest magnitudes first


def configure(p) -> None:
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--precision", action="store_true", help="measure the magnitude envelope")
    what.add_argument(
        "--step",
        action="store_true",
        help="measure one training step of a loss under realizations against the exact step",
    )
    add_program_args(p)
    p.add_argument("--out", metavar="ENV.json", help="write the envelope here (--precision)")
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data`, a batch a sample (with --step, a step); "
        "without it inputs are drawn",
    )
    add_weights_arg(p, WEIGHTS_HELP + " (--step needs them)" + RECORDED_BINDINGS_HELP)
    p.add_argument(
        "--bits",
        type=reference_bits,
        help="precision of the reference in bits (default 128; 64 with --step)",
    )
    add_reference_arg(p)
    p.add_argument(
        "--samples", type=positive_count, default=8, metavar="N", help="samples (default 8)"
    )
    p.add_argument(
        "--first", type=count, default=0, metavar="I", help="the first sample's index (default 0)"
    )
    add_seed_arg(p)
    p.add_argument(
        "--grain",
        choices=GRAINS,
        default="site",
        help="keep one magnitude a site (default), a row (all axes but the last) or a "
        "channel (the last axis)",
    )
    p.add_argument(
        "--workers",
        type=positive_count,
        metavar="N",
        help="local processes the samples are spread over (default: the cores)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="send the samples to this Dask scheduler instead (needs presk[cluster])",
    )
    add_warmup_args(p, defaults=True)
    p.add_argument(
        "--realize",
        metavar="R,…",
        help="--step: the realizations, f64, f32, bf16, recipe or @R.json (default "
        f"{','.join(DEFAULTS)})",
    )


def run(args) -> int:
    if args.weights:  # its --realize names the realizations --step measures
        apply_checkpoint(args, args.weights, realize=False)
    if args.step:
        return run_step(args)
    if args.out is None:
        raise UsageError("--precision writes the envelope: give --out ENV.json")
    check_writable(args.out)  # before the run, which may take long
    program = load_program(args.file)
    core = elaborate_args(args, program)
    meta = Meta(
        program=program_digest(program),
        entry=core.entry,
        dims=dict(sorted(core.dims.items())),
        consts=dict(sorted(core.consts.items())),
        weights=args.weights,
        data=args.data,
        seed=args.seed,
        samples=args.samples,
        first=args.first,
        bits=args.bits or 128,
        grain=args.grain,
        date=_today(),
        reference=args.reference,
    )
    sample_arguments(core, meta, meta.first + meta.samples - 1)  # refused here, not in a worker
    job = Job(program.ast.text, args.file, args.remat, meta)
    label = f"presk calibrate: the reference on {args.samples} samples"
    with Progress(label, args.samples, phase=True) as progress:
        env = calibrate(job, _spread(args), lambda done: progress.advance(done - progress.done))
    write_envelope(env, args.out)
    sys.stdout.write(summary(env))
    return 0


def _today() -> str:
    """The UTC day, or SOURCE_DATE_EPOCH's (a reproducible build's fixed time)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        now = datetime.datetime.now(datetime.UTC)
    elif epoch.isdigit():
        now = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
    else:
        raise UsageError(f"SOURCE_DATE_EPOCH={epoch!r} is not a whole number of seconds")
    return now.date().isoformat()


def _spread(args):
    if args.scheduler is not None:
        return on_cluster(args.scheduler)
    workers = args.workers if args.workers is not None else default_threads()
    return serially if workers == 1 or args.samples == 1 else on_processes(workers)


def summary(env: Envelope) -> str:
    """The header, the sites of largest magnitude, and the condition every bound keeps."""
    meta = env.meta
    lines = [
        f"presk calibrate: {len(env.sites)} sites over {meta.samples} samples of "
        f"`{meta.entry}` at {meta.bits} bits"
    ]
    ranked = sorted(env.sites.items(), key=lambda kv: -kv[1].magnitude)
    width = max((len(site) for site, _ in ranked[:SHOWN]), default=0)
    for site, s in ranked[:SHOWN]:
        lines.append(f"  {site:<{width}}  {s.op:<14} {sci(s.magnitude, 4)}")
    if len(ranked) > SHOWN:
        lines.append(f"  … and {len(ranked) - SHOWN} more")
    lines.append("every bound from this file holds over these samples only")
    return "\n".join(lines) + "\n"


def run_step(args) -> int:
    if args.weights is None:
        raise UsageError("--step measures a step from trained parameters: give --weights CKPT")
    if args.out is not None:
        raise UsageError("--step prints its table and writes no file: drop --out")
    program = load_program(args.file)
    core = elaborate_args(args, program, train_step=True)
    spellings = [s.strip() for s in (args.realize or ",".join(DEFAULTS)).split(",") if s.strip()]
    if not spellings:
        raise UsageError(f"--realize {args.realize!r}: name at least one realization")
    rs = read_realizations(spellings, core)
    data = Windows.load(args.data) if args.data else None
    params = parameters(core.view, args.seed, args.weights)
    bits = args.bits or 64
    setup = Setup(core, params, data, args.warmup, args.lr, args.seed, bits, args.reference)
    label = f"presk calibrate --step: the exact step and {len(rs)} realizations"
    with Progress(label, phase=True):
        measured = measure(setup, rs)
    sys.stdout.write(step_table(measured, setup))
    return 0


def step_table(m: Measured, setup: Setup) -> str:
    """A header, then a row a realization: its gaps and its step's time against f64."""
    w = max(14, *(len(row.label) for row in m.rows))  # a record's path may be long
    lines = [
        f"presk calibrate --step: step {setup.step} of `{setup.core.entry}` after "
        f"{setup.warmup} warm-up steps in f64 (peak lr {setup.lr:g}), against the exact step "
        f"on the {setup.reference} reference at {setup.bits} bits; the exact update is "
        f"{sci(m.update, 2)} of ‖θ‖",
        f"{'realization':<{w}} {'update gap':>10} {'storage floor':>13} {'gradient gap':>12} "
        f"{'step ms':>9} {'vs f64':>7}",
    ]
    for row in m.rows:
        lines.append(
            f"{row.label:<{w}} {sci(row.update_gap, 2):>10} {sci(row.floor, 2):>13} "
            f"{sci(row.grad_gap, 2):>12} {row.ms:>9.3f} {row.ms / m.f64_ms:>6.2f}×"
        )
    lines.append(certainty(setup.reference, m.radius))
    return "\n".join(lines) + "\n"


def certainty(reference: str, radius: float) -> str:
    """What the step's gaps are, given the reference they were measured on."""
    if reference == "ball":
        return (
            "each gap is its upper end over the reference's balls, whose certified radius is "
            f"at most {sci(radius, 2)} of the exact update or gradient it measures"
        )
    return "the MPFR reference's own error is estimated (bench/delta_p.py), not certified"
