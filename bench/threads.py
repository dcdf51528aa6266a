"""Thread scaling: the course GPT's training step and a 1024³ product on 1 and 2 threads.

For each thread count and type: one training step of the course GPT (corpus/nlp/05_gpt.psk
at D=384, H=6, L=6, B=16, T=256: the loss's forward and backward, clipping, the schedule
and AdamW, as `presk train` takes a step; bench/gpts.py), the median of `--repeat` steps
after a warm-up, and the 1024³ product of bench/gemm.py, the median of `--gemm-repeat`
calls. Both run natively (mlir backend) at the cost model's layouts, planned for as many
workers as run them: $PRESK_THREADS is set to the thread count while each is lowered, so
at 1 thread no nest is split for a second worker. Printed: seconds, speed-up over 1
thread, and for the product its GFLOP/s; after the date, the machine and its load.

`--split` adds, for each type at the largest thread count, the step's time by phase
(forward, gradient, optimizer and the host's work), from `presk bench --train-step
--breakdown`'s kernel sites: a site of a function `….bwd` is the gradient's, one of
`adamw.…` the optimizer's (clipping, schedule, AdamW), the rest the forward's.
`--sweep` adds the best point of bench/gemm.py's layout sweep at each thread count.

    python bench/threads.py [--repeat 3] [--gemm-repeat 20] [--threads 1,2] [--types f32]
                            [--skip-course] [--split] [--sweep]

On a 2-core AVX-512 machine (znver4, docs/performance.md's git history), loaded by other
jobs, a course step took 7-13 s in f32 and 17-40 s in f64 (10 GB), and its kernels compile
in about a minute a plan. The defaults (f32, 3 steps) took 2.6 minutes with the kernels
cached, `--types f32,f64 --split` 12; `--skip-course --repeat 1` is a quick check of the
script.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import gemm  # noqa: E402
from bench.gpts import MODELS  # noqa: E402
from bench.replay_threads import load  # noqa: E402
from presk.cli.main import main as presk_main  # noqa: E402
from presk.kernel.contraction import read_nest  # noqa: E402
from presk.kernel.cost import Target  # noqa: E402
from presk.kernel.machine import MACHINES  # noqa: E402
from presk.kernel.relayout import contraction_kernels  # noqa: E402
from presk.timing import timed  # noqa: E402
from presk.toolchain import machine  # noqa: E402

COURSE = MODELS["course"]
N = 1024  # the product's size


@contextlib.contextmanager
def planned_for(threads: int):
    """$PRESK_THREADS set to `threads`: the cost model splits nests over that many workers."""
    before = os.environ.get("PRESK_THREADS")
    os.environ["PRESK_THREADS"] = str(threads)
    try:
        yield
    finally:
        if before is None:
            del os.environ["PRESK_THREADS"]
        else:
            os.environ["PRESK_THREADS"] = before


def median_seconds(core, t: str, threads: int, repeat: int) -> float:
    """The median of `repeat` calls of `core` natively in `t` on `threads` workers."""
    with planned_for(threads):
        call = core.lower(t).compile("mlir", threads).drawn(seed=0)
    return statistics.median(timed(call, repeat)) / 1e3


def best_swept(t: str, threads: int, repeat: int) -> tuple[float, object]:
    """GFLOP/s (best of `repeat` calls) and layout of the best point of bench/gemm.py's
    sweep of the product."""
    with planned_for(threads):
        module = gemm.core(N).lower(t).module  # held: its ops live while it does
        kernels = contraction_kernels(module.operation)
        nest, _ = read_nest(next(iter(kernels.values())))
        width = Target.host().vector_bytes // MACHINES[t].arith.itemsize
        points = [p for p in gemm.sweep_points(width, threads) if gemm._fits(nest, p, t)]
        results = gemm.sweep(N, t, points, "none", SimpleNamespace(threads=threads, repeat=repeat))
    return results[0]


def phase(part: dict) -> str:
    """The phase of a training step a `presk bench --breakdown` part belongs to."""
    if part["kind"] != "kernel":
        return "host"
    function = part["name"].split("/")[0]
    if function.endswith(".bwd"):
        return "gradient"
    return "optimizer" if function.startswith("adamw.") else "forward"


def step_split(t: str, threads: int, repeat: int) -> dict:
    """The course step's breakdown on `threads` workers, its parts summed by phase (ms),
    with the whole step untimed inside ("step")."""
    consts = [f"--const={k}={v}" for k, v in COURSE.consts.items()]
    dims = [f"--dim={k}={v}" for k, v in COURSE.dims.items()]
    argv = ["bench", str(REPO / COURSE.path), "--entry", COURSE.entry, *consts, *dims]
    argv += ["--train-step", "--breakdown", "--format", "json", "--realize", t]
    argv += ["--threads", str(threads), "--repeat", str(repeat)]
    out = io.StringIO()
    with planned_for(threads), contextlib.redirect_stdout(out):
        presk_main(argv)
    table = json.loads(out.getvalue())[t]
    phases = defaultdict(float)
    for part in table["parts"]:
        phases[phase(part)] += part["ms"]
    return {**phases, "step": table["total_ms"]}


def scaling_rows(what: str, seconds: dict[int, float], flops: float | None) -> list[str]:
    one = seconds.get(1)
    rows = []
    for n, s in seconds.items():
        speedup = f"{one / s:.2f}" if one else "-"
        rate = f"{flops / s / 1e9:.1f}" if flops else ""
        rows.append(f"{what:<28}{n:>8}{s:>12.4f}{speedup:>10}{rate:>10}")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="course steps timed (default 3)")
    ap.add_argument("--gemm-repeat", type=int, default=20, help="products timed (default 20)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--types", default="f32", help="machine types, f32 and/or f64")
    ap.add_argument("--skip-course", action="store_true", help="the product alone")
    ap.add_argument("--split", action="store_true", help="the step's phases (slow)")
    ap.add_argument("--sweep", action="store_true", help="the product's best swept layout")
    opts = ap.parse_args()
    counts = [int(x) for x in opts.threads.split(",")]
    types = opts.types.split(",")
    print(f"{time.strftime('%Y-%m-%d')}  {machine()}  {load()}")
    print(
        f"median of {opts.repeat} steps and {opts.gemm_repeat} products after a warm-up; "
        "layouts planned for the threads that run them"
    )
    print(f"{'':<28}{'threads':>8}{'seconds':>12}{'speed-up':>10}{'GFLOP/s':>10}")
    course = None if opts.skip_course else COURSE.core(train_step=True)
    product = gemm.core(N)
    for t in types:
        if course is not None:
            seconds = {n: median_seconds(course, t, n, opts.repeat) for n in counts}
            print("\n".join(scaling_rows(f"course GPT step {t}", seconds, None)), flush=True)
        seconds = {n: median_seconds(product, t, n, opts.gemm_repeat) for n in counts}
        print("\n".join(scaling_rows(f"{N}³ product {t}", seconds, 2 * N**3)), flush=True)
        if opts.sweep:
            for n in counts:
                rate, layout = best_swept(t, n, min(opts.gemm_repeat, 3))
                print(
                    f"{N}³ {t}, the best swept point on {n} threads: {rate:.1f} GFLOP/s "
                    f"(best of calls), {json.dumps(gemm.plan_entry(layout))}"
                )
    if opts.split and course is not None:
        n = max(counts)
        print(f"\nthe course step by phase, {n} threads, ms (presk bench --breakdown)")
        print(f"{'type':<6}" + "".join(f"{p:>11}" for p in PHASES))
        for t in types:
            split = step_split(t, n, opts.repeat)
            print(f"{t:<6}" + "".join(f"{split.get(p, 0.0):>11.1f}" for p in PHASES), flush=True)
    print(load())
    return 0


PHASES = ("forward", "gradient", "optimizer", "host", "step")


if __name__ == "__main__":
    sys.exit(main())
