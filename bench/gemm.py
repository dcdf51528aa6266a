"""A square product C = A · B in the layout space against numpy's matmul (OpenBLAS).

For n in 512 and 1024, f32 and f64: numpy's time, then each point of a sweep of the
layout space (register tiles, lanes, packing, k-blocks and orders, split over the
workers), each exact (the kernel's bits are the default kernel's), timed natively on the
MLIR backend with --threads workers; the best point, the cost model's pick (`presk
plan`) and their throughputs against numpy's in the same run. With `--contract fma` the
same sweep runs again under the FMA realization (`"contract": "fma"`: each multiply-add
fused, other bits, every point's equal to the first fused point's), and its best point
is printed beside the best exact one. The best three points of a sweep are then timed
again in turns with numpy (`ROUNDS`), since the sweep's minutes on a shared host move
both. The last line is `best/numpy R` (and `best fma/numpy R` with the sweep), R the
best throughput of those turns over numpy's, at 1024³ f32.

    python bench/gemm.py [--threads 2] [--repeat 3] [--sizes 512,1024] [--types f32,f64]
                         [--contract none|fma] [--json]

`--json` prints the figures as one JSON object on stdout (the report goes to stderr): for
each product, numpy's GFLOP/s and, for each contraction, the sweep's best point and the
cost model's pick (GFLOP/s and layout, as a plan file writes it) and the turns' GFLOP/s
of presk's best and of numpy (bench/record.py reads it).
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
from presk.realize import Realization  # noqa: E402
from presk.timing import SPIN, timed  # noqa: E402

PROGRAM = """
dim M, K, N
fn gemm(a : ℝ[M, K], b : ℝ[K, N]) -> ℝ[M, N] {
  a · b
}
"""
SITE = "gemm/%0"


def core(n: int) -> presk.Core:
    return presk.load(PROGRAM).elaborate("gemm", dims={"M": n, "K": n, "N": n})


def sweep_points(width: int, workers: int) -> list[Layout]:
    """Register tiles in lanes, with and without packing b, k-blocks and the two orders,
    over the workers at depth 0; and the default's form."""
    out = [Layout(tile=(1, 8))]
    for m in (1, 2, 4):
        for n in (8, 16, 32, 64):
            for pack in ("none", "b"):
                for kblock, orders in ((0, ("IJ", "JI")), (128, ("IJK", "JIK"))):
                    for order in orders:
                        out.append(
                            Layout("tiled", (m, n), kblock, order, width, pack, (0, workers))
                        )
    return out


def gflops(n: int, seconds: float) -> float:
    return 2 * n**3 / seconds / 1e9


def best_of(call, repeat: int) -> float:
    """The fastest of `repeat` calls after a warm-up, in seconds."""
    return min(timed(call, repeat)) / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="512,1024")
    ap.add_argument("--types", default="f32,f64")
    ap.add_argument("--contract", choices=("none", "fma"), default="none")
    ap.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    args = ap.parse_args()
    out = sys.stderr if args.json else sys.stdout
    products = []
    os.environ.setdefault("PRESK_THREADS", str(args.threads))
    target = Target.host()
    ratios = {}
    print(
        f"{time.strftime('%Y-%m-%d')}, {args.threads} threads, best of {args.repeat} calls",
        file=out,
    )
    for n in [int(x) for x in args.sizes.split(",")]:
        for t in args.types.split(","):
            dtype = np.float32 if t == "f32" else np.float64
            rng = np.random.default_rng(0)
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            peer = gflops(n, best_of(lambda a=a, b=b: a @ b, args.repeat))
            kernels = core(n).lower(t).module
            nest, _ = read_nest(next(iter(contraction_kernels(kernels.operation).values())))
            element = MACHINES[t].arith.itemsize
            points, pick = sweep_and_pick(
                nest, t, target, sweep_points(target.vector_bytes // element, args.threads)
            )
            print(f"\n{n}³ {t}: numpy {peer:.1f} GFLOP/s", file=out)
            product = {"n": n, "type": t, "numpy": peer, "contracts": {}}
            contracts = ("none", "fma") if args.contract == "fma" else ("none",)
            for contract in contracts:
                results = sweep(n, t, points, contract, args)
                top, _ = results[0]
                picked = next(g for g, lay in results if lay == pick)
                print(f"  {len(results)} {KINDS[contract]} points, the best five:", file=out)
                for g, lay in results[:5]:
                    entry = json.dumps(plan_entry(lay))
                    print(f"  {g:6.1f} GFLOP/s  {g / peer:5.2f} of numpy  {entry}", file=out)
                gap = f"{top / picked:.2f}x from the best"
                print(f"  presk plan's pick: {picked:.1f} GFLOP/s ({gap})", file=out)
                best = [lay for _, lay in results[:3]]
                mine, theirs = alternated(n, t, best, contract, a, b, args)
                print(
                    f"  the best three again, alternated with numpy over {ROUNDS} rounds: "
                    f"{mine:.1f} GFLOP/s against {theirs:.1f}, {mine / theirs:.2f} of numpy",
                    file=out,
                )
                product["contracts"][contract] = {
                    "best": top,
                    "best_layout": plan_entry(results[0][1]),
                    "pick": picked,
                    "pick_layout": plan_entry(pick),
                    "turns": {"presk": mine, "numpy": theirs},
                }
                if n == 1024 and t == "f32":
                    ratios[contract] = mine / theirs
            products.append(product)
    for contract, ratio in ratios.items():
        print(f"best{' fma' if contract == 'fma' else ''}/numpy {ratio:.2f}", file=out)
    if args.json:
        print(json.dumps({"threads": args.threads, "repeat": args.repeat, "products": products}))
    return 0


KINDS = {"none": "exact", "fma": "fused (contract fma)"}


def sweep(n: int, t: str, points: list[Layout], contract: str, args) -> list:
    """(GFLOP/s, layout) of each point, fastest first; every point's bits are asserted
    equal to the first point's (a layout never changes them, whatever the realization)."""
    results = []
    reference = None
    for layout in points:
        out, seconds = run(n, t, layout, contract, args)
        bits = np.asarray(out).view(np.uint8)
        reference = bits if reference is None else reference
        assert np.array_equal(bits, reference), f"{layout} changed the bits"
        results.append((gflops(n, seconds), layout))
    return sorted(results, key=lambda r: -r[0])


def run(n: int, t: str, layout: Layout, contract: str, args):
    call = compiled(n, t, layout, contract, args.threads)
    return np.asarray(call().data), best_of(call, args.repeat)


def compiled(n: int, t: str, layout: Layout, contract: str, threads: int):
    """The product at `layout`, a call on drawn inputs (converted once: only the kernels
    are timed)."""
    realize = Realization(t, contract={"default": contract}, spelling=f"contract {contract}")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"realize": t, "layout": {SITE: plan_entry(layout)}}, f)
    try:
        gemm = core(n).lower(realize, plan=f.name).compile("mlir", threads=threads)
    finally:
        os.unlink(f.name)
    return gemm.drawn(seed=0)


# Rounds of the best points timed alternately with numpy: a sweep takes minutes, over
# which a shared host's speed moves by a fifth or more, so numpy's figure from before it
# is no fair peer for its best points.
ROUNDS = 5


def alternated(n: int, t: str, layouts: list[Layout], contract: str, a, b, args):
    """The best throughput of `layouts` and numpy's, timed in turns (GFLOP/s)."""
    calls = [compiled(n, t, lay, contract, args.threads) for lay in layouts]
    mine = theirs = float("inf")
    for _ in range(ROUNDS):
        theirs = min(theirs, best_of(lambda: a @ b, args.repeat))
        time.sleep(SPIN)
        mine = min([mine, *(best_of(call, args.repeat) for call in calls)])
    return gflops(n, mine), gflops(n, theirs)


if __name__ == "__main__":
    sys.exit(main())
