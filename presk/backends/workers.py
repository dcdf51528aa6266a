"""How a kernel's outermost parallel loop is cut into pieces, and a pool of Python
threads that runs the pieces of a launch the replay runtime does not take.

A split launch in a segment runs on the replay runtime's native workers
(presk/backends/replay.c), with the same cuts as `Workers.run`: its `pieces` go in the
segment's step. A launch the runtime cannot take (more buffers than its steps do) is
run by `Workers.run`: each worker calls the compiled kernel on its own contiguous range
`[lo, hi)` of the loop; ctypes releases the GIL for the call, so the pieces run in
parallel. The loop's iterations write disjoint elements and read nothing another
writes, so any split gives the bits of one call over the whole range.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cache

# Below this many scalar operations a launch runs on one thread: handing pieces to the
# workers costs tens of microseconds.
SPLIT_WORK = 1 << 17
# Pieces a thread of the replay runtime's split launch: on a 2-vCPU guest the second core
# runs slowly for ~20 ms after an idle spell, and with one piece a thread the first
# waited for it (the imported GPT-2's forward after 0.3 s idle: 2.2 ms, 1.6 with four).
CLAIMS = 4


def split_workers(trips: int, work: int, workers: int, threads: int, split_work: int) -> int:
    """The workers a launch of a kernel is split over (1: it runs on one thread): its
    layout's `workers` if it names a split, but never more than `threads` (a plan made for
    two cores, run with --threads 1, runs on one: the split loop's whole range in one
    piece, the same bits); else `threads` where its `work` (scalar operations) is at least
    `split_work`; never where its splittable loop has no two `trips`."""
    if trips <= 1:
        return 1
    if workers:
        return min(workers, threads)
    return threads if work >= split_work else 1


def replay_pieces(workers: int, trips: int) -> tuple[int, int]:
    """(pieces, threads) of a launch split over `workers` (`split_workers`) as the replay
    runtime runs it: `Workers.claimed` pieces, claimed by that many threads; (1, 1) on one."""
    return (1, 1) if workers <= 1 else (Workers(workers).claimed(trips), workers)


@cache
def _pool(n: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(n, thread_name_prefix="presk-worker")


class Workers:
    def __init__(self, threads: int):
        self.threads = threads

    def pieces(self, trips: int) -> int:
        """How many pieces a loop of `trips` iterations is cut into here: piece i is
        `[trips * i // n, trips * (i + 1) // n)`."""
        return min(self.threads, trips)

    def claimed(self, trips: int) -> int:
        """How many pieces the replay runtime cuts the loop into, cut as `pieces` cuts:
        CLAIMS a thread, which its threads claim one at a time, so a thread the host runs
        slower takes fewer. (Python's pool hands out its pieces at once: `run` keeps one a
        thread.)"""
        return min(self.threads * CLAIMS, trips)

    def run(self, fn, args: list, trips: int) -> None:
        """`fn(*args, lo, hi)` over `[0, trips)`, in pieces on the workers and this thread."""
        n = self.pieces(trips)
        cuts = [trips * i // n for i in range(n + 1)]
        pool = _pool(self.threads - 1) if n > 1 else None
        futures = [pool.submit(fn, *args, cuts[i], cuts[i + 1]) for i in range(1, n)]
        fn(*args, cuts[0], cuts[1])
        for f in futures:
            f.result()
