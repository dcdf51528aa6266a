"""presk plan: a layout for every contraction and softmax nest of an entry, by the cost
model."""

from __future__ import annotations

import json
import sys

from presk.cli.programs import add_program_args, elaborate_args
from presk.fileio import write_atomic
from presk.kernel.cost import Target, milliseconds
from presk.kernel.machine import TYPES
from presk.kernel.planner import choose, plan_entry


def configure(p) -> None:
    add_program_args(p)
    p.add_argument("--realize", choices=TYPES, default="f64", help="the machine type")
    p.add_argument("--train-step", action="store_true", help="plan one training step of the entry")
    p.add_argument("--out", metavar="P.json", help="write the plan there (default: stdout)")


def run(args) -> int:
    module = elaborate_args(args, train_step=args.train_step).lower(args.realize).module
    choices = choose(module.operation, args.realize, Target.host())
    plan = {"realize": args.realize, "layout": {c.site: plan_entry(c.layout) for c in choices}}
    text = json.dumps(plan, indent=2) + "\n"
    if args.out:
        write_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    out = sys.stderr if not args.out else sys.stdout
    for c in choices:
        print(
            f"{c.site:<32} {c.shape:<22} {milliseconds(c.cycles):9.4f} ms predicted "
            f"({c.default_cycles / c.cycles:.1f}x the default's)",
            file=out,
        )
    return 0
