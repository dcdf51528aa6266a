"""psk-plan: a plan's layouts applied to the nests it names.

Reads the plan file `file` (presk/plans.py describes it) and moves each nest
it names to its layout, as the layout passes would one field at a time (E7001 for a
malformed plan or an unknown nest, E7002 for a point the nest cannot take).
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.errors import RealizationError, UsageError
from presk.ir.ops import string_attr
from presk.kernel.epilogue import fold_epilogues
from presk.kernel.relayout import relayout
from presk.passes import Pass
from presk.plans import layout_change, plan_path, read_plan


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


def apply_plan(module, plan: dict, path: str = "plan") -> None:
    lowered = string_attr(module, "psk_kernel.type")
    if "realize" in plan and plan["realize"] != lowered:
        raise RealizationError(
            f"{path}: the plan realizes {plan['realize']}, the kernels are {lowered}",
            code="E7001",
        )
    for nest, entry in plan.get("layout", {}).items():
        change = layout_change(entry)
        if entry.get("epilogue"):
            fold_epilogues(module, nest)
        relayout(module, nest, change)


PASS = PskPlan
