"""presk calibrate --precision: the magnitude envelope of an entry, measured on the exact
reference over samples (presk/precision/calibrate.py, docs/precision.md)."""

from __future__ import annotations

import datetime
import os
import sys

from presk.cli.common import count, positive_count, seed_number
from presk.cli.programs import add_program_args, elaborate_args, load_program, reference_bits
from presk.errors import UsageError
from presk.fileio import check_writable
from presk.precision.calibrate import Job, calibrate, on_processes, serially
from presk.precision.cluster import on_cluster
from presk.precision.envelope import GRAINS, Envelope, Meta, program_digest, write_envelope
from presk.precision.samples import sample_arguments
from presk.toolchain import default_threads
from presk.train.loop import sci

SHOWN = 10  # sites listed, the largest magnitudes first


def configure(p) -> None:
    p.add_argument(
        "--precision",
        action="store_true",
        required=True,
        help="measure the magnitude envelope (the one calibration there is)",
    )
    add_program_args(p)
    p.add_argument("--out", required=True, metavar="ENV.json", help="write the envelope here")
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data`, a batch a sample; without it inputs are drawn",
    )
    p.add_argument(
        "--weights",
        metavar="CKPT|P.npz|P.safetensors",
        help="parameters from a checkpoint or a parameters file instead of the initializers",
    )
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=128,
        help="precision of the reference in bits (default 128)",
    )
    p.add_argument(
        "--samples", type=positive_count, default=8, metavar="N", help="samples (default 8)"
    )
    p.add_argument(
        "--first", type=count, default=0, metavar="I", help="the first sample's index (default 0)"
    )
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the initial parameters and drawn inputs (default 0)",
    )
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


def run(args) -> int:
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
        bits=args.bits,
        grain=args.grain,
        date=_today(),
    )
    sample_arguments(core, meta, meta.first + meta.samples - 1)  # refused here, not in a worker
    job = Job(program.ast.text, args.file, args.remat, meta)
    env = calibrate(job, _spread(args), _progress(args.samples))
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


def _progress(total: int):
    """A `sample i/N` counter on stderr, when stderr is a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(done: int) -> None:
        end = "\n" if done == total else ""
        print(f"\rsample {done}/{total}", end=end, file=sys.stderr, flush=True)

    return show


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
