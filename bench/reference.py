"""The exact reference's speed on the tiny MiniGPT (V=64, D=16, H=2, L=2, B=2, T=8).

Prints the median of five calls of the forward pass and of the loss at 256 bits, against
the seed's Rust/MPFR reference (16.0 and 16.5 ms on its machine): the bar is 100x that.
`--json` prints them as one JSON object instead (bench/record.py reads it).

    python bench/reference.py [BITS] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from programs import program_of  # noqa: E402

from presk.backends.host import CallContext  # noqa: E402
from presk.backends.interp import Interpreter  # noqa: E402
from presk.runtime.inputs import arguments, parameters  # noqa: E402

SEED_MS = {"apply": 16.0, "loss": 16.5}


def main(bits: int = 256, repeat: int = 5, as_json: bool = False) -> None:
    medians = {}
    for fn in ("apply", "loss"):
        program = program_of(
            REPO / "tutorial" / "05_minigpt.psk", f"MiniGPT{{64, 16, 2, 2}}.{fn}", {"B": 2, "T": 8}
        )
        args = [parameters(program, 0, None), *arguments(program, 0, None)]
        interp = Interpreter(program, bits)
        runs = []
        for _ in range(repeat):
            t = time.perf_counter()
            interp.call(args, CallContext())
            runs.append((time.perf_counter() - t) * 1000)
        med = medians[fn] = statistics.median(runs)
        if not as_json:
            print(
                f"MiniGPT.{fn:<6} {bits} bits: median {med:7.1f} ms over {repeat}  "
                f"({med / SEED_MS[fn]:.1f}x the seed's {SEED_MS[fn]} ms)"
            )
    if as_json:
        entries = {fn: {"median_ms": ms, "seed_ms": SEED_MS[fn]} for fn, ms in medians.items()}
        print(json.dumps({"bits": bits, "repeat": repeat, "entries": entries}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bits", nargs="?", type=int, default=256)
    ap.add_argument("--json", action="store_true", help="the medians as JSON on stdout")
    opts = ap.parse_args()
    main(opts.bits, as_json=opts.json)
