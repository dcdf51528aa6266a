"""psk-dce: erase PSK-Core ops whose results nothing reads.

IRDL ops declare no side effects, so upstream `canonicalize` and `cse` keep them all.
Every `psk` op is a function of its operands (dropout and sample draw from keys fixed
by their site, not from a state), so one whose results are unused can go. Runs to a
fixed point in one backward sweep per block.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.passes import Pass

from presk.ir.core import walk_ops


@dataclass(frozen=True)
class PskDce(Pass):
    name = "psk-dce"
    description = "erase psk ops whose results are unused"

    def run(self, module) -> None:
        for func in walk_ops(module, "func.func"):
            for region in func.regions:
                for block in region.blocks:
                    for op in reversed(list(block.operations)):
                        op = op.operation
                        if op.name.startswith("psk.") and all(not list(r.uses) for r in op.results):
                            op.erase()


PASS = PskDce
