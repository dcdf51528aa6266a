"""Resident memory of one process compiling many distinct kernels natively.

Each kernel is a program of its own, elaborated, lowered and compiled through the API on
the MLIR backend, and called once: an elementwise chain `exp(x) * x + x` over N elements,
N = 1, 2, … (so each kernel's text differs), and with `--kind dot` also a product
`exp(a · b)` of shape (M, 8) · (8), alternately. The compiled entries are dropped once
called, as a solve or a sweep drops a realization it measured. Prints the date and the
machine, then every `--every` kernels: kernels compiled, seconds, resident memory (VmRSS)
and the kernel libraries mapped. By default the kernels are compiled cold into a
temporary cache; `--cache` names one to fill or reuse (warm loads).

    python bench/compile_memory.py [--kernels 500] [--every 50] [--kind chain|dot]
                                   [--cache DIR]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from test_compile_memory import CHAIN, mapped_kernels, resident_mb  # noqa: E402

import presk  # noqa: E402
from presk.toolchain import machine  # noqa: E402

DOT = """
dim M, K
fn f(a : ℝ[M, K], b : ℝ[K]) -> ℝ[M] {
  exp(a · b)
}
"""


def compile_and_call(i: int, kind: str) -> int:
    """The i-th program (from 1) compiled and called once, then dropped; the kernels it
    compiled."""
    if kind == "dot" and i % 2 == 0:
        m = i // 2
        f = presk.load(DOT).elaborate("f", dims={"M": m, "K": 8}).lower("f64").compile("mlir")
        f(np.ones((m, 8)), np.ones(8))
    else:
        f = presk.load(CHAIN).elaborate("f", dims={"N": i}).lower("f64").compile("mlir")
        f(np.ones(i))
    return len(f.backend.kernels)


def run(kernels: int, every: int, kind: str) -> None:
    cache = os.environ["PRESK_CACHE"]
    print(f"{datetime.date.today()}  {machine()}")
    print(f"cache {cache}, kind {kind}")
    print(f"{'kernels':>8} {'seconds':>8} {'RSS MB':>8} {'mapped':>7}")

    def row(done: int) -> None:
        seconds, mapped = time.perf_counter() - start, len(mapped_kernels(cache))
        print(f"{done:>8} {seconds:>8.1f} {resident_mb():>8.0f} {mapped:>7}", flush=True)

    start = time.perf_counter()
    done = compile_and_call(1, kind)  # MLIR, LLVM and the toolchain loaded: the baseline
    base = resident_mb()
    row(done)
    i = 1
    while done < kernels:
        i += 1
        before, done = done, done + compile_and_call(i, kind)
        if done // every > before // every or done >= kernels:
            gc.collect()
            row(done)
    print(f"growth {resident_mb() - base:.0f} MB over {done} kernels, from the first program's")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=500)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--kind", choices=("chain", "dot"), default="chain")
    ap.add_argument("--cache", help="the kernel cache (default: a temporary one, cold)")
    args = ap.parse_args()
    if args.cache:
        os.environ["PRESK_CACHE"] = args.cache
        run(args.kernels, args.every, args.kind)
        return
    with tempfile.TemporaryDirectory(prefix="presk-cache-") as tmp:
        os.environ["PRESK_CACHE"] = tmp
        run(args.kernels, args.every, args.kind)


if __name__ == "__main__":
    main()
