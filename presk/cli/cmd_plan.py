"""presk plan: a layout for every contraction and softmax nest of an entry, by the cost
model, and the time it predicts for them against their default layouts."""

from __future__ import annotations

import json
import sys
from collections import Counter

from presk import realize as realizations
from presk.cli.flags import Defaulted, add_program_args, add_weights_arg
from presk.cli.programs import elaborate_args
from presk.cli.recorded import apply_checkpoint
from presk.fileio import write_atomic
from presk.kernel.cost import Target, milliseconds
from presk.kernel.machine import TYPES
from presk.kernel.planner import Choice, choose, nest_shape, plan_entry


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--realize",
        choices=TYPES,
        default=Defaulted("f64"),
        help="the machine type (default: a --weights checkpoint's, else f64)",
    )
    p.add_argument("--train-step", action="store_true", help="plan one training step of the entry")
    p.add_argument("--out", metavar="P.json", help="write the plan there (default: stdout)")
    add_weights_arg(
        p,
        "a checkpoint of presk train: the flags left out (--entry, --const, --dim, --realize, "
        "--remat) are its; its parameters are not read (a plan depends on sizes alone)",
    )


def run(args) -> int:
    if args.weights:
        apply_checkpoint(args, args.weights)
    # a recorded record (`@CKPT.psk.d`) plans for its machine type
    realize = realizations.read(args.realize).default
    module = elaborate_args(args, train_step=args.train_step).lower(realize).module
    choices = choose(module.operation, realize, Target.host())
    plan = {"realize": realize, "layout": {c.site: plan_entry(c.layout) for c in choices}}
    text = json.dumps(plan, indent=2) + "\n"
    if args.out:
        write_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    out = sys.stderr if not args.out else sys.stdout
    for c in choices:
        out.write(site_lines(c))
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


def site_lines(c: Choice) -> str:
    """A site's line: its nest, or how many kernels share its layout and their shapes, one
    a line below (Linear.apply/%0 in Linear{16, 64} and in Linear{64, 16})."""
    times = f"{milliseconds(c.cycles):9.4f} ms predicted, {speedup(c.default_cycles, c.cycles)}"
    if len(c.instances) == 1:
        return f"{c.site:<32} {c.shape:<26} {times} its default\n"
    shapes = Counter(nest_shape(n) for n in c.instances)
    shared = f"{len(c.instances)} kernels, one layout"
    below = "".join(f"  {s}" + (f" ×{k}" if k > 1 else "") + "\n" for s, k in shapes.items())
    return f"{c.site:<32} {shared:<26} {times} their defaults\n{below}"


def speedup(default: float, planned: float) -> str:
    """`planned` against `default` in words: "5.6× faster than", "as fast as"."""
    ratio = default / planned if planned > 0 else 1.0
    if round(ratio, 1) == 1.0:
        return "as fast as"
    if ratio > 1:
        return f"{ratio:.1f}× faster than"
    return f"{1 / ratio:.1f}× slower than"
