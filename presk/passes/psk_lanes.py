"""psk-lanes: a contraction's columns in vector lanes.

The columns of a tile (of a row, in the row-wise form) go in vectors of `lanes` lanes
(0: the machine's register width for the kernel's arithmetic type): an operand that moves
with J is read as consecutive elements (it must be contiguous along J, or packed:
E7002), one that does not is broadcast. A lane is a column, never a part of a sum, so
each output element sums its k in order as before: the bits stay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.ir.ops import string_attr
from presk.kernel.machine import MACHINES
from presk.kernel.relayout import contraction_kernels, relayout
from presk.passes import Pass
from presk.toolchain import vector_bytes


@dataclass(frozen=True)
class PskLanes(Pass):
    name = "psk-lanes"
    description = "put a contraction's columns in vector lanes (0: the register's width)"
    lanes: int = 0
    nest: str = ""

    def run(self, module) -> None:
        lanes = self.lanes
        if not lanes:  # the register's width for the kernels' arithmetic type
            types = {string_attr(f, "psk_kernel.type") for f in contraction_kernels(module)}
            lanes = vector_bytes() // min((MACHINES[t].arith.itemsize for t in types), default=4)
        relayout(module, self.nest, lambda layout: replace(layout, lanes=lanes))


PASS = PskLanes
