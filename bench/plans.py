"""The GPTs' forward pass and training step under `presk plan`'s plan against the default
layouts, timed natively (MLIR backend, f32) in the same run.

For each model and each of its entries, `presk plan` chooses a layout for every
contraction nest with the cost model; both versions are timed, alternating, and the
ratio of their medians printed.

    python bench/plans.py [--repeat 20] [--realize f32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from presk.api import load  # noqa: E402
from presk.kernel.cost import Target  # noqa: E402
from presk.kernel.planner import choose, plan_entry  # noqa: E402

MODELS = [
    ("tiny MiniGPT", "tutorial/05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.", {}, {"B": 2, "T": 8}),
    ("corpus GPT", "corpus/nlp/05_gpt.psk", "", {"D": 64, "H": 4, "L": 4}, {"B": 8, "T": 64}),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--realize", default="f32")
    opts = ap.parse_args()
    target = Target.host()
    print(f"{time.strftime('%Y-%m-%d')}, mlir {opts.realize}, median of {opts.repeat} calls")
    for name, path, module, consts, dims in MODELS:
        program = load(REPO / path)
        for what, fn, train in (("forward", "apply", False), ("training step", "loss", True)):
            core = program.elaborate(module + fn, dims, consts, train_step=train)
            module = core.lower(opts.realize).module  # held: its ops live while it does
            choices = choose(module.operation, opts.realize, target)
            plan = {
                "realize": opts.realize,
                "layout": {c.site: plan_entry(c.layout) for c in choices},
            }
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(plan, f)
            try:
                calls = {}
                for label, p in (("default", None), ("plan", f.name)):
                    calls[label] = core.lower(opts.realize, p).compile("mlir").drawn()
                    calls[label]()  # compiles and traces
            finally:
                os.unlink(f.name)
            runs = {label: [] for label in calls}
            for _ in range(opts.repeat):
                for label, call in calls.items():
                    start = time.perf_counter()
                    call()
                    runs[label].append((time.perf_counter() - start) * 1e3)
            default, planned = (statistics.median(runs[k]) for k in ("default", "plan"))
            print(
                f"{name:<13} {what:<14} default {default:8.3f} ms  plan {planned:8.3f} ms  "
                f"{default / planned:5.2f}x  ({len(choices)} nests)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
