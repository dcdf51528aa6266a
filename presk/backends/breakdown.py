"""Where a native call's time goes (`presk bench --breakdown`): a schedule's replay timed
step by step.

A `Profile` set on a schedule (presk/backends/schedule.py) replays it as `Schedule.run`
does, reading the clock around each part: converting the arguments to their storage
types, the arena, each step, and building the result. A segment's launches are timed
inside C, each going to its kernel's site (a split launch timed as a whole, from its
hand-off to its last piece), and the rest of the segment's call to `launches`. A launch
made from Python (one of more buffers than a segment's steps take) is split in two: what
a launch costs outside its kernel (the same ctypes call on an empty range of a kernel's
splittable loop, measured once) goes to `launches`, the rest to the kernel's site. The
parts of a call add up to the call's time but for the clock's own reads and the
backend's call around the replay.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

from presk.backends.schedule import Launch

ARGUMENTS = "arguments (converted to their storage types)"
ARENA = "arena (allocated, regions' addresses)"
LAUNCHES = "launches (each call outside its kernel)"
RESULT = "result (built over the arena)"
# Calls on an empty range, a splittable kernel, to time a launch outside its kernel.
EMPTY_CALLS = 20


@dataclass
class Part:
    name: str
    kind: str  # "kernel" (a site's launches) or "host"
    ms: float  # in the median profiled call
    count: int  # launches of the site, or steps of the host work; 0 for the call's own parts


class Profile:
    """Each profiled replay's time by part, in seconds."""

    def __init__(self):
        self.calls: list[dict[str | tuple[str, str], float]] = []
        self.overhead: float | None = None  # seconds a launch costs outside its kernel

    def replay(self, schedule, args, ctx):
        """`schedule.run(args, ctx)`, each part timed into a new entry of `calls`."""
        clock = time.perf_counter
        start = clock()
        inputs = schedule.input_arrays(args)
        allocated = clock()
        arrays, regions = schedule.memory(inputs)
        stamps = [clock()]  # one read after each step: the loop adds little to the call
        inside = []  # each segment's launches' nanoseconds, timed in C
        for step, label in schedule.segments:
            if isinstance(label, list):
                inside.append(step.timed(regions))
            else:
                step(regions, arrays, ctx)
            stamps.append(clock())
        out = schedule.output(arrays)
        end = clock()
        if self.overhead is None:
            self.overhead = launch_overhead(schedule, regions)
        parts = defaultdict(float)
        parts[ARGUMENTS] = allocated - start
        parts[ARENA] = stamps[0] - allocated
        parts[RESULT] = end - stamps[-1]
        timed = iter(inside)
        for (_, label), before, after in zip(schedule.segments, stamps, stamps[1:], strict=False):
            if isinstance(label, list):  # a segment: what its launches took outside them
                seconds = [ns * 1e-9 for ns in next(timed)]
                for launch, t in zip(label, seconds, strict=True):
                    parts[launch.site, launch.kernel.name] += t
                parts[LAUNCHES] += after - before - sum(seconds)
            elif isinstance(label, Launch):  # never charged more than the launch took
                outside = min(after - before, self.overhead)
                parts[LAUNCHES] += outside
                parts[label.site, label.kernel.name] += after - before - outside
            else:
                parts[label] += after - before
        self.calls.append(dict(parts))
        return out

    def parts(self, schedule) -> list[Part]:
        """The parts of the median call (by its time), the largest first. Each part's own
        median would not do: a time slice lost to another process lands in one part of
        one call, and those medians would drop every such loss, adding up to less than
        any call took."""
        call = sorted(self.calls, key=lambda c: sum(c.values()))[(len(self.calls) - 1) // 2]
        counts = Counter(
            (x.site, x.kernel.name) if isinstance(x, Launch) else x for x in schedule.labels
        )
        counts[LAUNCHES] = sum(isinstance(x, Launch) for x in schedule.labels)
        out = [
            Part(
                " ".join(key) if isinstance(key, tuple) else str(key),
                "kernel" if isinstance(key, tuple) else "host",
                seconds * 1e3,
                counts.get(key, 0),
            )
            for key, seconds in call.items()
        ]
        return sorted(out, key=lambda p: (-p.ms, p.name))


def launch_overhead(schedule, regions: list[int]) -> float:
    """Seconds a launch costs outside its kernel: the median of calls, made as a launch
    step makes them, of each splittable kernel on an empty range (0 when none is)."""
    clock = time.perf_counter
    runs = []
    seen = set()
    for label in schedule.labels:
        if not isinstance(label, Launch) or not label.kernel.split or label.kernel.name in seen:
            continue
        seen.add(label.kernel.name)
        fn, buffers = label.kernel.native.fn, label.buffers
        for _ in range(EMPTY_CALLS):
            start = clock()
            fn(*[regions[r] + o for r, o in buffers], 0, 0)
            runs.append(clock() - start)
    return statistics.median(runs) if runs else 0.0
