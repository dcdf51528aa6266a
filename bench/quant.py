"""A 64×1024×4096 contraction (Linear{1024, 4096} at batch 64) on f32, int8 and int4
weights, natively (MLIR backend, f32), median of `--repeat` calls.

Integer weights are dequantised on the host once a call (docs/realizations.md), so this
measures what they cost today, not what kernels reading integers would save.

    python bench/quant.py [--repeat 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from presk import backends  # noqa: E402
from presk.cli.cmd_bench import _caller  # noqa: E402
from presk.cli.programs import elaborate_args, read_program  # noqa: E402
from presk.realize import Quant, Realization  # noqa: E402

WEIGHTS = {
    "f32": Realization("f32", spelling="f32"),
    "int8": Realization("f32", quant={"w": Quant(8, 0, "absmax")}, spelling="int8"),
    "int4": Realization("f32", quant={"w": Quant(4, 0, "absmax")}, spelling="int4"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    opts = ap.parse_args()
    args = argparse.Namespace(
        file=str(REPO / "tests" / "data" / "layouts.psk"),
        entry="Linear{1024, 4096}.apply",
        dim=["B=64"],
        const=None,
        remat="store",
        seed=0,
        train_step=False,
    )
    program = read_program(args.file)
    print(f"{time.strftime('%Y-%m-%d')}: 64×1024×4096, mlir f32, median of {opts.repeat} calls")
    base = None
    for name, realization in WEIGHTS.items():
        e = elaborate_args(args, program)
        backend = backends.make("mlir", e.module, realize=realization, threads=opts.threads)
        call = _caller(args, e, backend)
        call()
        runs = []
        for _ in range(opts.repeat):
            start = time.perf_counter()
            call()
            runs.append((time.perf_counter() - start) * 1e3)
        median = statistics.median(runs)
        base = base or median
        print(f"  {name:<5} weights  {median:8.2f} ms  ({median / base:.2f}x f32's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
