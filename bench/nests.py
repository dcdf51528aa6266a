"""The GPTs' contraction nests in the layout space: the cost model's pick against the best
point of a sweep, each nest alone.

A training step's products are of four shapes (docs/layouts.md, section 1): a forward
`dot` (x[B, T, D] · w[D, F]), its derivatives `dot_vjp_l` (g[B, T, F] · w[D, F]ᵀ, b read
across J) and `dot_vjp_r` (x[B, T, D]ᵀ · g[B, T, F], summed over B and T), and
attention's `ein` (q · kᵀ over each head). Each is written here as one `ein`, whose nest
is the same as the op's (the same operand axes, so the same points and the same
prediction), at the course GPT's widths (D=384, F=1536, 6 heads) over B·T = 1024 rows,
or with `--size corpus` at the corpus GPT's (D=64, F=256, 4 heads, B=8, T=64).
For each, a sweep of register tiles in vector lanes (m in 1, 2, 4; n in 16, 32, 64),
each pack the nest takes, no k-block (IJ, JI) and a k-block of 128 (JIK, KJI), plus the
model's pick among every point of the space (`presk plan`'s), is timed natively on the
MLIR backend, every point's bits asserted equal to the first's. It prints each nest's
best point, the pick and their ratio; `--dump F.json` writes every point's time.

    python bench/nests.py [--threads 1] [--repeat 3] [--nests fwd,vjp_l,vjp_r,qk]
                          [--types f32] [--size course|corpus] [--dump F.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from presk.kernel.contraction import Layout, read_nest  # noqa: E402
from presk.kernel.cost import Target  # noqa: E402
from presk.kernel.machine import MACHINES  # noqa: E402
from presk.kernel.planner import plan_entry, sweep_and_pick  # noqa: E402
from presk.kernel.relayout import contraction_kernels  # noqa: E402
from presk.timing import timed  # noqa: E402

PROGRAM = """
dim B, T, D, F, H, E
fn fwd(x : ℝ[b: B, t: T, d: D], w : ℝ[d: D, f: F]) -> ℝ[b: B, t: T, f: F] {
  ein[b, t, f](x, w)
}
fn vjp_l(g : ℝ[b: B, t: T, f: F], w : ℝ[d: D, f: F]) -> ℝ[b: B, t: T, d: D] {
  ein[b, t, d](g, w)
}
fn vjp_r(x : ℝ[b: B, t: T, d: D], g : ℝ[b: B, t: T, f: F]) -> ℝ[d: D, f: F] {
  ein[d, f](x, g)
}
fn qk(q : ℝ[b: B, h: H, t: T, e: E], k : ℝ[b: B, h: H, s: T, e: E]) -> ℝ[b: B, h: H, t: T, s: T] {
  ein[b, h, t, s](q, k)
}
"""
# the course GPT's widths over B·T = 1024 rows, and the corpus GPT's training shapes
SIZES = {
    "course": {
        "fwd": {"B": 4, "T": 256, "D": 384, "F": 1536},
        "vjp_l": {"B": 4, "T": 256, "D": 384, "F": 1536},
        "vjp_r": {"B": 4, "T": 256, "D": 384, "F": 1536},
        "qk": {"B": 4, "H": 6, "T": 256, "E": 64},
    },
    "corpus": {
        "fwd": {"B": 8, "T": 64, "D": 64, "F": 256},
        "vjp_l": {"B": 8, "T": 64, "D": 64, "F": 256},
        "vjp_r": {"B": 8, "T": 64, "D": 64, "F": 256},
        "qk": {"B": 8, "H": 4, "T": 64, "E": 16},
    },
}
DIMS = dict(SIZES["course"])


def core(name: str) -> presk.Core:
    return presk.load(PROGRAM).elaborate(name, dims=DIMS[name])


def flops(name: str) -> int:
    d = DIMS[name]
    if name == "qk":
        return 2 * d["B"] * d["H"] * d["T"] * d["T"] * d["E"]
    return 2 * d["B"] * d["T"] * d["D"] * d["F"]


def sweep_points(width: int, workers: int) -> list[Layout]:
    split = (0, workers) if workers > 1 else None
    out = []
    for m in (1, 2, 4):
        for n in (16, 32, 64):
            for pack in ("none", "b", "ab"):
                for kblock, orders in ((0, ("IJ", "JI")), (128, ("JIK", "KJI"))):
                    for order in orders:
                        out.append(Layout("tiled", (m, n), kblock, order, width, pack, split))
    return out


def run(name: str, t: str, layout: Layout, threads: int, repeat: int):
    """The output bytes and the fastest of `repeat` calls, in seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"realize": t, "layout": {f"{name}/%0": plan_entry(layout)}}, f)
    try:
        compiled = core(name).lower(t, plan=f.name).compile("mlir", threads=threads)
    finally:
        os.unlink(f.name)
    call = compiled.drawn(seed=0)
    return np.asarray(call().data).tobytes(), min(timed(call, repeat)) / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nests", default="fwd,vjp_l,vjp_r,qk")
    ap.add_argument("--types", default="f32")
    ap.add_argument("--size", choices=sorted(SIZES), default="course")
    ap.add_argument("--dump", help="write every point's time to this JSON file")
    args = ap.parse_args()
    os.environ["PRESK_THREADS"] = str(args.threads)
    DIMS.update(SIZES[args.size])
    target = Target.host()
    dump = []
    print(f"{time.strftime('%Y-%m-%d')}, {args.threads} threads, best of {args.repeat} calls")
    for t in args.types.split(","):
        element = MACHINES[t].arith.itemsize
        for name in args.nests.split(","):
            module = core(name).lower(t).module  # held: its ops live while it does
            nest, _ = read_nest(next(iter(contraction_kernels(module.operation).values())))
            points, pick = sweep_and_pick(
                nest, t, target, sweep_points(target.vector_bytes // element, args.threads)
            )
            reference, results = None, []
            for layout in points:
                bits, seconds = run(name, t, layout, args.threads, args.repeat)
                reference = bits if reference is None else reference
                assert bits == reference, f"{layout} changed the bits"
                results.append((flops(name) / seconds / 1e9, layout))
                dump.append(
                    {"nest": name, "size": args.size, "type": t, "threads": args.threads}
                    | {"seconds": seconds}
                    | {"layout": plan_entry(layout), "pick": layout == pick}
                )
            results.sort(key=lambda r: -r[0])
            top, best = results[0]
            picked = next(g for g, lay in results if lay == pick)
            print(f"\n{name} {t} {DIMS[name]}: {len(results)} points")
            print(f"  best {top:6.1f} GFLOP/s  {json.dumps(plan_entry(best))}")
            print(f"  pick {picked:6.1f} GFLOP/s  {json.dumps(plan_entry(pick))}")
            print(f"  the pick is {top / picked:.2f}x from the best")
    if args.dump:
        Path(args.dump).write_text(json.dumps(dump, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
