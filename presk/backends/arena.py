"""Where a schedule's buffers lie in its arena: each its own bytes, or bytes shared by
buffers whose lives do not overlap.

A schedule (presk/backends/schedule.py) is traced from the types alone, so tracing it
twice makes the same buffers in the same order. The first trace (`Bump`) gives every
buffer its own bytes and records which steps read or write each; from that, each
buffer's first and last step (`Lives`). The second (`Shared`) places each buffer when it
is made, at step s, in bytes freed by buffers whose last step came before s: a step's
operands are all still live while it runs, so no step reads bytes its own output or
another live buffer overwrites, and every value is computed as before. A buffer the
call's result holds lives through the call; one that a step run before all others writes
(dropout's key) lives from the start, in bytes no other buffer ever holds.

A training step at GPT-2-small's size (85M parameters) held 86 bytes a parameter in its
arena with a place each; most of its buffers (the gradient's terms, the optimizer's
intermediates) live for a step or two.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field

ALIGN = 64  # bytes: every buffer starts on a cache line
FOREVER = 1 << 62  # the last step of a buffer that outlives the call's steps
BEFORE = -1  # the step of the steps run before all others (the dropout key's writer)


def aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Bump:
    """Every buffer its own bytes, one after the other; the references of each step to
    them recorded, for `lives`."""

    size: int = 0
    starts: list[int] = field(default_factory=list)  # each buffer's offset, in order made
    sizes: list[int] = field(default_factory=list)
    first: list[int] = field(default_factory=list)  # each buffer's first step so far
    last: list[int] = field(default_factory=list)  # each buffer's last step so far

    def place(self, nbytes: int, step: int) -> int:
        offset = aligned(self.size)
        self.size = offset + max(nbytes, 1)
        self.starts.append(offset)
        self.sizes.append(nbytes)
        self.first.append(step)
        self.last.append(step)
        return offset

    def used(self, offset: int, step: int) -> None:
        """Step `step` reads or writes the buffer at `offset` (or a layer of it): BEFORE
        for a step run before all others, FOREVER for the call's result."""
        i = bisect.bisect_right(self.starts, offset) - 1
        self.first[i] = min(self.first[i], step)
        self.last[i] = max(self.last[i], step)

    def lives(self) -> Lives:
        return Lives(list(self.sizes), list(self.first), list(self.last))


@dataclass(frozen=True)
class Lives:
    """Each buffer's bytes and its first and last step, in the order the trace made
    them."""

    sizes: list[int]
    first: list[int]  # a step before the one the buffer is made at: it lives from then
    last: list[int]


class Shared:
    """Buffers placed in bytes that buffers whose last step has passed set free: first
    fit over the free ranges, kept merged, else past the arena's end."""

    def __init__(self, lives: Lives):
        self.lives = lives
        self.size = 0
        self.made = 0
        self._live: list[tuple[int, int, int]] = []  # (last step, offset, bytes), a heap
        self._free: list[tuple[int, int]] = []  # (offset, bytes), sorted, merged

    def place(self, nbytes: int, step: int) -> int:
        i, self.made = self.made, self.made + 1
        if i >= len(self.lives.sizes) or self.lives.sizes[i] != nbytes:
            raise AssertionError(f"schedule: buffer {i} of {nbytes} bytes not the first trace's")
        while self._live and self._live[0][0] < step:
            _, offset, size = heapq.heappop(self._live)
            self._release(offset, size)
        size = aligned(max(nbytes, 1))
        # written before it is made (by a step run before all others): bytes no buffer
        # has held, past the end
        offset = self._take(size) if self.lives.first[i] >= step else self._end(size)
        heapq.heappush(self._live, (self.lives.last[i], offset, size))
        return offset

    def _take(self, size: int) -> int:
        for k, (offset, free) in enumerate(self._free):
            if free >= size:
                if free == size:
                    del self._free[k]
                else:
                    self._free[k] = (offset + size, free - size)
                return offset
        offset = self.size
        if self._free and sum(self._free[-1]) == self.size:  # the last range reaches the end
            offset = self._free.pop()[0]
        self.size = offset + size
        return offset

    def _end(self, size: int) -> int:
        offset, self.size = self.size, self.size + size
        return offset

    def _release(self, offset: int, size: int) -> None:
        k = bisect.bisect_left(self._free, (offset, 0))
        self._free.insert(k, (offset, size))
        if k + 1 < len(self._free) and offset + size == self._free[k + 1][0]:
            self._free[k] = (offset, size + self._free.pop(k + 1)[1])
        if k > 0 and sum(self._free[k - 1]) == offset:
            before = self._free.pop(k - 1)
            self._free[k - 1] = (before[0], before[1] + self._free[k - 1][1])
