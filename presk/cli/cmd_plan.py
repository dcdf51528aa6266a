"""presk plan: a layout for every contraction and softmax nest of an entry, by the cost
model, and the time it predicts for them against their default layouts; with `--tune`,
each the fastest of the model's best points as measured here (presk/backends/tuning.py)."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from dataclasses import replace

from presk import plans
from presk import realize as realizations
from presk.backends import tuning
from presk.backends.native import shared_compiler
from presk.cli.flags import Defaulted, add_program_args, add_weights_arg
from presk.cli.programs import elaborate_args
from presk.cli.recorded import apply_checkpoint
from presk.errors import UsageError
from presk.fileio import write_atomic
from presk.kernel.contraction import Layout
from presk.kernel.cost import Target, milliseconds, predict
from presk.kernel.machine import MACHINES, TYPES
from presk.kernel.planner import Choice, choose, nest_shape, plan_entry
from presk.toolchain import default_threads


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--realize",
        choices=TYPES,
        default=Defaulted("f64"),
        help="the machine type (default: a --weights checkpoint's, else f64)",
    )
    p.add_argument("--train-step", action="store_true", help="plan one training step of the entry")
    p.add_argument(
        "--tune",
        nargs="?",
        const="inf",
        metavar="S",
        help="measure the cost model's best points of each nest on this machine and keep "
        "the fastest, within S seconds (default: every nest), as --plan tuned does",
    )
    p.add_argument("--out", metavar="P.json", help="write the plan there (default: stdout)")
    add_weights_arg(
        p,
        "a checkpoint of presk train: the flags left out (--entry, --const, --dim, --realize, "
        "--remat) are its; its parameters are not read (a plan depends on sizes alone)",
    )


def run(args) -> int:
    budget = _budget(args.tune) if args.tune is not None else None
    if args.weights:
        apply_checkpoint(args, args.weights)
    # a recorded record (`@CKPT.psk.d`) plans for its machine type
    realize = realizations.read(args.realize).default
    core = elaborate_args(args, train_step=args.train_step)
    target = Target.host()
    choices = choose(core.lower(realize).module.operation, realize, target)
    notes = {}
    if budget is not None:
        measured = core.lower(realize, plans.AUTO).module  # from the model's layouts
        tuned = tuning.tune(measured, default_threads(), shared_compiler(), budget)
        notes = {site: "measured" for site in tuned.measured}
        notes |= {site: "measured before" for site in tuned.cached}
        notes |= {site: "not measured (the bound)" for site in tuned.left}
        choices = [_tuned(c, tuned.picks.get(c.site), realize, target) for c in choices]
    plan = {"realize": realize, "layout": {c.site: plan_entry(c.layout) for c in choices}}
    text = json.dumps(plan, indent=2) + "\n"
    if args.out:
        write_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    out = sys.stderr if not args.out else sys.stdout
    for c in choices:
        out.write(site_lines(c, notes.get(c.site)))
    if choices:
        planned = sum(c.cycles for c in choices)
        default = sum(c.default_cycles for c in choices)
        print(
            f"predicted for these {len(choices)} sites: {milliseconds(planned):.4f} ms with "
            f"this plan, {milliseconds(default):.4f} ms with their default layouts: "
            f"{speedup(default, planned)} the default",
            file=out,
        )
    return 0


def _budget(text: str) -> float:
    """`--tune S`: seconds, a number from 0 (left out: no bound)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0:
        raise UsageError(f"--tune {text}: the seconds to measure for, a number from 0")
    return seconds


def _tuned(c: Choice, pick: Layout | None, realize: str, target: Target) -> Choice:
    """A site's choice at its measured pick (its epilogue kept), with the pick's price."""
    if pick is None:
        return c
    element = MACHINES[realize].arith.itemsize
    cycles = sum(predict(n, pick, element, target) for n in c.instances)
    return replace(c, layout=replace(pick, epilogue=c.layout.epilogue), cycles=cycles)


def site_lines(c: Choice, tuned: str | None = None) -> str:
    """A site's line: its nest, or how many kernels share its layout and their shapes, one
    a line below (Linear.apply/%0 in Linear{16, 64} and in Linear{64, 16}); with `tuned`,
    how `--tune` chose it."""
    times = f"{milliseconds(c.cycles):9.4f} ms predicted, {speedup(c.default_cycles, c.cycles)}"
    how = f"; {tuned}" if tuned else ""
    if len(c.instances) == 1:
        return f"{c.site:<32} {c.shape:<26} {times} its default{how}\n"
    shapes = Counter(nest_shape(n) for n in c.instances)
    shared = f"{len(c.instances)} kernels, one layout"
    below = "".join(f"  {s}" + (f" ×{k}" if k > 1 else "") + "\n" for s, k in shapes.items())
    return f"{c.site:<32} {shared:<26} {times} their defaults{how}\n{below}"


def speedup(default: float, planned: float) -> str:
    """`planned` against `default` in words: "5.6× faster than", "as fast as"."""
    ratio = default / planned if planned > 0 else 1.0
    if round(ratio, 1) == 1.0:
        return "as fast as"
    if ratio > 1:
        return f"{ratio:.1f}× faster than"
    return f"{1 / ratio:.1f}× slower than"
