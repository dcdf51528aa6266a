"""psk-plan: a plan's layouts applied to the nests it names.

Reads the plan file `file` (presk/kernel/relayout.py describes it) and moves each nest
it names to its layout, as the layout passes would one field at a time (E7001 for a
malformed plan or an unknown nest, E7002 for a point the nest cannot take).
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.passes import Pass

from presk.errors import UsageError
from presk.kernel.relayout import apply_plan, plan_path, read_plan


@dataclass(frozen=True)
class PskPlan(Pass):
    name = "psk-plan"
    description = "apply a plan file's layouts to the contraction nests it names"
    file: str = ""

    def run(self, module) -> None:
        if not self.file:
            raise UsageError("psk-plan needs file=PATH")
        path = plan_path(self.file)
        apply_plan(module, read_plan(path), path)


PASS = PskPlan
