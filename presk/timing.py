"""Timing a call the way every presk benchmark does: once untimed (it compiles, traces and
warms the caches), then `repeat` times, each run's wall time in milliseconds."""

from __future__ import annotations

import time
from collections.abc import Callable


def timed(call: Callable[[], object], repeat: int) -> list[float]:
    """The wall times of `repeat` calls of `call` after one untimed call, in milliseconds."""
    call()
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        runs.append((time.perf_counter() - start) * 1e3)
    return runs
