"""Timing a call the way every presk benchmark does: once untimed (it compiles, traces and
warms the caches), then `repeat` times, each run's wall time in milliseconds; several
calls compared, in turns."""

from __future__ import annotations

import time
from collections.abc import Callable

# Seconds a peer's threads (OpenMP's, OpenBLAS's, onnxruntime's) may keep spinning after a
# call, taking a core from the next call timed: a pause this long lets them go idle.
SPIN = 0.3
TURNS = 5  # the blocks of back-to-back calls a comparison takes, each contestant's in turn


def timed(call: Callable[[], object], repeat: int) -> list[float]:
    """The wall times of `repeat` calls of `call` after one untimed call, in milliseconds."""
    call()
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        runs.append((time.perf_counter() - start) * 1e3)
    return runs


def timed_in_turns(
    calls: dict[str, Callable[[], object]], repeat: int, turns: int, pause: float = 0.0
) -> dict[str, list[float]]:
    """The wall times of `repeat` calls of each of `calls`, in milliseconds by name, taken
    in `turns`: a turn times each call in a block of back-to-back calls (`timed`, so one
    untimed first), with `pause` seconds after each block. On a shared machine whose load
    drifts over minutes, calls timed in turns see the same load, so their ratio holds
    where blocks taken one after the other would not; the pause lets the threads a call
    leaves spinning (OpenMP's, onnxruntime's) go idle before the next block runs."""
    runs: dict[str, list[float]] = {name: [] for name in calls}
    for turn in range(turns):
        block = repeat * (turn + 1) // turns - repeat * turn // turns
        for name, call in calls.items():
            runs[name] += timed(call, block) if block else []
            time.sleep(pause)
    return runs
