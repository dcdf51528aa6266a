"""psk-hoist-loads: loads of inputs that a loop does not change move before the loop.

Nothing in a kernel writes a buffer it only reads, so a load from one whose indices are
all defined outside a loop reads the same element on every iteration: it moves to just
before the loop, and so does pure `arith`/`math` arithmetic whose operands are all
defined outside it (the widening of a bf16 load, an index computation). Loops are
visited innermost first and each body in order, so an invariant chain climbs as far as
it can. Each value is computed once instead of once an iteration, by the same
operations: no bit changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.passes import Pass

from presk.ir.ops import walk_ops
from presk.kernel.loops import body_ops, is_inside, kernel_funcs, loops_of

_LOADS = ("affine.load", "memref.load", "affine.vector_load")
_STORES = ("affine.store", "memref.store", "affine.vector_store")


def written(f) -> set:
    """The memrefs some op of `f` stores to."""
    out = set()
    for op in walk_ops(f, ""):
        if op.name in _STORES:
            out.add(op.operands[1])
    return out


def invariant(op, loop, written_memrefs: set) -> bool:
    """Whether `op` (directly in `loop`'s body) gives the same value on every iteration."""
    if op.regions or any(is_inside(v, loop) for v in op.operands):
        return False
    if op.name in _LOADS:
        return op.operands[0] not in written_memrefs
    return op.name.startswith(("arith.", "math."))


@dataclass(frozen=True)
class PskHoistLoads(Pass):
    name = "psk-hoist-loads"
    description = (
        "move loads of inputs (and arithmetic on them) out of loops that do not change them"
    )

    def run(self, module) -> None:
        for f in kernel_funcs(module):
            stored = written(f)
            for loop in loops_of(f, post_order=True):
                for op in body_ops(loop)[:-1]:
                    if invariant(op, loop, stored):
                        op.move_before(loop)


PASS = PskHoistLoads
