"""psk-auto-layout: every contraction and softmax nest at the layout the cost model prices
cheapest.

For a machine with `bytes`-byte vectors, `workers` worker threads and the core LLVM calls
`cpu` (each 0 or empty: this machine's),
each nest of the kernel stage moves to the point of the layout space presk/kernel/cost.py
predicts fastest, as `presk plan` would write it and psk-plan apply it (a bias add folded
in where every launch of the nest has one; a softmax in the form and split it prices
cheapest). Every point gives the same bits, so the
choice changes only time; it is the mlir backend's default plan (`--plan auto`).
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.ir.ops import string_attr
from presk.kernel.cost import Target
from presk.kernel.planner import choose, plan_entry
from presk.passes import Pass
from presk.passes.psk_plan import apply_plan
from presk.toolchain import default_threads, host_cpu, vector_bytes


@dataclass(frozen=True)
class PskAutoLayout(Pass):
    name = "psk-auto-layout"
    description = (
        "move every contraction and softmax nest to the layout the cost model prices cheapest"
    )
    bytes: int = 0
    workers: int = 0
    cpu: str = ""  # LLVM's name for the core (e.g. znver4, emeraldrapids); "": this machine's

    def run(self, module) -> None:
        width = self.bytes or vector_bytes()
        target = Target.for_machine(
            width, self.workers or default_threads(), self.cpu or host_cpu()[0]
        )
        machine = string_attr(module, "psk_kernel.type")
        choices = choose(module, machine, target)
        apply_plan(module, {"layout": {c.site: plan_entry(c.layout) for c in choices}})


PASS = PskAutoLayout
