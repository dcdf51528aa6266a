"""A 64×1024×4096 contraction (Linear{1024, 4096} at batch 64) on f32, int8 and int4
weights, natively (MLIR backend, f32), at the default layout and at `presk plan`'s, with
numpy's f32 matmul (BLAS, FMA) timed in the same run as the peer: medians of `--repeat`.

The int8 and int4 kernels read the integers themselves (two 4-bit weights a byte) and
dequantise at the load, f32(q)·s: 4× and 8× fewer weight bytes than f32, and the same
bits as f32 weights holding the dequantised values.

    python bench/quant.py [--repeat 10] [--threads 2]
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

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from presk.kernel.cost import Target  # noqa: E402
from presk.kernel.planner import choose, plan_entry  # noqa: E402
from presk.realize import Quant, Realization  # noqa: E402
from presk.timing import timed  # noqa: E402

WEIGHTS = {
    "f32": Realization("f32", spelling="f32"),
    "int8": Realization("f32", quant={"w": Quant(8, 0, "absmax")}, spelling="int8"),
    "int4": Realization("f32", quant={"w": Quant(4, 0, "absmax")}, spelling="int4"),
}


def _median_ms(call, repeat: int) -> float:
    return statistics.median(timed(call, repeat))


def _plan(core, realization) -> str:
    """`presk plan`'s layouts for the entry lowered under `realization`, in a file."""
    module = core.lower(realization).module
    choices = choose(module.operation, realization.default, Target.host())
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"layout": {c.site: plan_entry(c.layout) for c in choices}}, f)
    return f.name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    opts = ap.parse_args()
    program = presk.load(REPO / "tests" / "data" / "layouts.psk")
    core = program.elaborate("Linear{1024, 4096}.apply", dims={"B": 64})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1024), dtype=np.float32)
    w = rng.standard_normal((1024, 4096), dtype=np.float32)
    peer = _median_ms(lambda: x @ w, opts.repeat)
    print(
        f"{time.strftime('%Y-%m-%d')}: 64×1024×4096, mlir f32, {opts.threads} threads, "
        f"median of {opts.repeat} calls; numpy f32 matmul {peer:.2f} ms"
    )
    print(f"  {'weights':<8} {'layout':<8} {'ms':>9} {'numpy/this':>11}")
    for name, realization in WEIGHTS.items():
        plan = _plan(core, realization)
        try:
            for label, p in (("default", None), ("plan", plan)):
                compiled = core.lower(realization, p).compile("mlir", opts.threads)
                ms = _median_ms(compiled.drawn(), opts.repeat)
                print(f"  {name:<8} {label:<8} {ms:9.2f} {peer / ms:11.2f}")
        finally:
            os.unlink(plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
