"""Split launches on the replay runtime's native workers (presk/backends/replay.c).

Two measurements on the corpus GPT's f32 forward (`loss`, D=64, H=2, L=2, B=2, T=64),
printed after the date, the machine and its load average:

- the hand-off, for each splittable kernel: segments of `--steps` launches of it, each
  step timed in C as `presk bench --breakdown` times it, run unsplit over its whole
  range, unsplit over each half, and split in two pieces; the hand-off is the median
  split step less the median of its slower half;
- the whole forward in one process, the three ways alternated call by call: one thread,
  two threads with each split launch made from Python (a step of its own, its pieces on
  `presk/backends/workers.py`'s thread pool: the schedule before the runtime ran
  splits), and two threads with the splits inside the segments.

    python bench/replay_threads.py [--steps 100] [--calls 300]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from itertools import groupby
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from presk.backends.replay import Segment, replay_for  # noqa: E402
from presk.backends.schedule import Launch  # noqa: E402
from presk.toolchain import machine  # noqa: E402

PROGRAM, CONSTS, DIMS = "corpus/nlp/05_gpt.psk", {"D": 64, "H": 2, "L": 2}, {"B": 2, "T": 64}


def compiled(kernels, threads: int):
    """A traced call on drawn inputs, and its schedule."""
    f = kernels.compile("mlir", threads=threads)
    call = f.drawn(0)
    call()
    (schedule,) = f.backend.schedules.values()
    return call, schedule


def splits_from_python(call, schedule) -> None:
    """The schedule segmented as before the runtime ran splits: a split launch a step."""
    backend = schedule.backend
    out = []
    for inline, run in groupby(
        zip(schedule.steps, schedule.labels, strict=True),
        lambda s: isinstance(s[1], Launch) and backend.pieces(s[1].kernel) == 1,
    ):
        run = list(run)
        if inline:
            launches = [label for _, label in run]
            out.append((backend.segment_step(launches), launches))
        else:
            out.extend(run)
    schedule.segments = out


def regions_of(call, schedule):
    """The arrays and region addresses of one call, kept."""
    kept = {}
    memory = schedule.memory
    schedule.memory = lambda inputs: kept.setdefault("memory", memory(inputs))
    call()
    schedule.memory = memory
    return kept["memory"]


def hand_offs(call, schedule, steps: int) -> None:
    arrays, regions = regions_of(call, schedule)
    replay = replay_for(schedule.backend.compiler)
    print(f"{'kernel':18} {'trips':>5}  one thread  slower half  split in 2  hand-off (µs)")
    seen = set()
    for x in schedule.labels:
        if not isinstance(x, Launch) or x.kernel.split <= 1 or x.kernel.name in seen:
            continue
        seen.add(x.kernel.name)
        fn, trips = x.kernel.native.fn, x.kernel.split
        ways = {
            "whole": (0, trips, 1),
            "first": (0, trips // 2, 1),
            "second": (trips // 2, trips, 1),
            "split": (0, trips, 2),
        }
        segments = {k: Segment(replay, [(fn, x.buffers, *w)] * steps) for k, w in ways.items()}
        ns = {k: [] for k in ways}
        for _ in range(10):
            for k, segment in segments.items():
                ns[k] += segment.timed(regions)[1:]  # the first waits for the workers
        us = {k: statistics.median(v) / 1e3 for k, v in ns.items()}
        slower = max(us["first"], us["second"])
        print(
            f"{x.kernel.name:18} {trips:5} {us['whole']:11.2f} {slower:12.2f} "
            f"{us['split']:10.2f} {us['split'] - slower:9.2f}"
        )


def forwards(ways: dict, calls: int) -> None:
    times = {name: [] for name in ways}
    for _ in range(calls):
        for name, call in ways.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    for name, ts in times.items():
        print(f"{name:44} {statistics.median(ts) * 1e3:7.3f} ms (median of {calls})")


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100, help="launches a timed segment")
    p.add_argument("--calls", type=int, default=300, help="forward calls each way")
    args = p.parse_args()
    print(f"{datetime.date.today()}  {machine()}  {load()}")
    core = presk.load(PROGRAM).elaborate("loss", consts=CONSTS, dims=DIMS)
    kernels = core.lower("f32")
    one, _ = compiled(kernels, 1)
    python, python_schedule = compiled(kernels, 2)
    splits_from_python(python, python_schedule)
    native, native_schedule = compiled(kernels, 2)
    hand_offs(native, native_schedule, args.steps)
    forwards(
        {
            "forward, 1 thread": one,
            "forward, 2 threads, splits made from Python": python,
            "forward, 2 threads, splits in the runtime": native,
        },
        args.calls,
    )
    print(load())


if __name__ == "__main__":
    main()
