"""One BERT-large block's forward natively, on f32 weights and on int8 weights.

`Block{1024, 16, 4096}.layer` of corpus/nlp/07_bert.psk (D=1024, 16 heads, FF 4096) at
B=1, T=384, on the mlir backend in f32 at the cost model's layouts, and the same with the
six weight matrices (attention's q, k, v, o and the feed-forward's up and down) stored as
int8, one absmax scale per output column (`"over": 0`, as bench/int8.json): the kernels
read the integers and dequantise at the load (docs/realizations.md, `quant`). Each is
timed `--repeat` times, each call after an untimed one (presk.timing.timed), the f32 and
int8 calls alternated so that a load from other jobs falls on both alike. Printed: each
median, its GFLOP/s (the six weight products, the scores and the weighted sum; about
10.3 GFLOP a call), the int8 call's speed-up over f32, and what int8 costs: the
relative 2-norm gap ‖y_int8 − y_f32‖ / ‖y_f32‖ of the outputs on the same drawn
parameters and inputs.

    python bench/bert_block.py [--repeat 10] [--threads N] [--tokens 384]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from bench.replay_threads import load  # noqa: E402
from presk.realize import Quant, Realization  # noqa: E402
from presk.runtime.inputs import arguments  # noqa: E402
from presk.timing import timed  # noqa: E402
from presk.toolchain import machine  # noqa: E402

PROGRAM = REPO / "corpus" / "nlp" / "07_bert.psk"
D, HEADS, F = 1024, 16, 4096
ENTRY = f"Block{{{D}, {HEADS}, {F}}}.layer"
# The block's weight matrices, as `presk quantize … --list` names them.
MATRICES = ("attn.q.w", "attn.k.w", "attn.v.w", "attn.o.w", "ff.up.w", "ff.down.w")
WEIGHTS = {
    "f32": Realization("f32", spelling="f32"),
    "int8": Realization(
        "f32", quant={m: Quant(8, 0, "absmax") for m in MATRICES}, spelling="int8 weights"
    ),
}


def flops(batch: int, tokens: int) -> int:
    """The multiply-adds of one call, twice: the four D×D projections, the feed-forward's
    two D×F products, the scores (T×T×D) and the weighted sum of the values (the same)."""
    rows = batch * tokens
    return 2 * (4 * rows * D * D + 2 * rows * D * F + 2 * batch * tokens * tokens * D)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10, help="calls timed each (default 10)")
    ap.add_argument("--threads", type=int, help="worker threads (default the cores)")
    ap.add_argument("--tokens", type=int, default=384, help="T (default 384)")
    ap.add_argument("--seed", type=int, default=0, help="of the parameters and inputs")
    opts = ap.parse_args()
    dims = {"B": 1, "T": opts.tokens}
    core = presk.load(PROGRAM).elaborate(ENTRY, dims=dims)
    params = core.params(seed=opts.seed)
    inputs = [np.asarray(x.data) for x in arguments(core.view, opts.seed, None)]
    work = flops(1, opts.tokens)
    print(f"{time.strftime('%Y-%m-%d')}  {machine()}  {load()}")
    print(
        f"{ENTRY}, B=1, T={opts.tokens}: mlir, {opts.threads or 'all'} threads, median of "
        f"{opts.repeat} calls each, the two alternated, each after an untimed one; "
        f"{work / 1e9:.2f} GFLOP a call"
    )
    print(f"{'weights':<14}{'ms':>10}{'GFLOP/s':>10}{'speed-up':>10}{'gap to f32':>12}")
    compiled = {n: core.lower(r).compile("mlir", opts.threads) for n, r in WEIGHTS.items()}
    calls = {n: f.drawn(seed=opts.seed) for n, f in compiled.items()}
    runs = {n: [] for n in calls}
    for _ in range(opts.repeat):  # alternately, so both see the machine's same load
        for n, call in calls.items():
            runs[n] += timed(call, 1)
    base = None
    for n, f in compiled.items():
        ms = statistics.median(runs[n])
        out = np.asarray(f(params, *inputs), dtype=np.float64)
        if base is None:
            base = (ms, out)
        gap = np.linalg.norm(out - base[1]) / np.linalg.norm(base[1])
        print(
            f"{n:<14}{ms:>10.1f}{work / ms / 1e6:>10.1f}{base[0] / ms:>10.2f}{gap:>12.2e}",
            flush=True,
        )
    print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
