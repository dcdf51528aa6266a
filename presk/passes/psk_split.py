"""psk-split: a contraction's loop at a depth divided over worker threads.

The loop at `depth` down the nest (the leading axes' loops first, then the block loops
in their order) runs in `workers` contiguous ranges, one a worker, each worker running
the loops around it in full; `workers=0` means the machine's count. The loops down to it
must all be parallel, and the workers the machine's count or half of it (E7002).
Iterations of a parallel loop write different elements: the bits stay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.passes import LayoutPass
from presk.toolchain import default_threads


@dataclass(frozen=True)
class PskSplit(LayoutPass):
    name = "psk-split"
    description = "divide a contraction's loop at a depth over worker threads"
    depth: int = 0
    workers: int = 0

    def change(self, layout):
        return replace(layout, split=(self.depth, self.workers or default_threads()))


PASS = PskSplit
