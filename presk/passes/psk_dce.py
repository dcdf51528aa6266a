"""psk-dce: erase PSK-Core ops whose results nothing reads.

IRDL ops declare no side effects, so upstream `canonicalize` and `cse` keep them all.
Every `psk` op is a function of its operands (dropout and sample draw from keys fixed
by their site, not from a state), so one whose results are unused can go. A pattern on
each psk op erases it when unused; the walk visits a block's ops in order, so the ops
only an erased op read go on the next walk, and the pass walks until one erases nothing
(as many walks as the longest chain of dead ops, plus one).
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.ir.ops import walk_ops
from presk.passes import Pass, apply


def erase_unused(op, rewriter) -> bool:
    if any(list(r.uses) for r in op.results):
        return False
    rewriter.erase_op(op)
    return True


@dataclass(frozen=True)
class PskDce(Pass):
    name = "psk-dce"
    description = "erase psk ops whose results are unused"

    def run(self, module) -> None:
        patterns = {name: erase_unused for name in {op.name for op in walk_ops(module, "psk.")}}
        while apply([module], patterns):
            pass


PASS = PskDce
