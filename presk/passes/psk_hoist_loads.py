"""psk-hoist-loads: loads of inputs that a loop does not change move before the loop.

Nothing in a kernel writes a buffer it only reads, so a load from one whose indices are
all defined outside a loop reads the same element on every iteration: it moves to just
before the loop, and so does pure `arith`/`math` arithmetic whose operands are all
defined outside it (the widening of a bf16 load, an index computation). A pattern on
`affine.for` hoists its body's invariant ops; the walk visits loops innermost first and
each body in order, so an invariant chain climbs as far as it can. Each value is
computed once instead of once an iteration, by the same operations: no bit changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from presk.ir.ops import walk_ops
from presk.kernel.loops import body_ops, is_inside, kernel_funcs
from presk.passes import Pass, apply

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


def hoist(written_memrefs: set, loop, rewriter) -> bool:
    """Move the invariant ops of `loop`'s body to just before it; whether any moved."""
    moved = False
    for op in body_ops(loop)[:-1]:
        if invariant(op, loop, written_memrefs):
            op.move_before(loop)
            moved = True
    return moved


@dataclass(frozen=True)
class PskHoistLoads(Pass):
    name = "psk-hoist-loads"
    description = (
        "move loads of inputs (and arithmetic on them) out of loops that do not change them"
    )

    def run(self, module) -> None:
        for f in kernel_funcs(module):
            apply([f], {"affine.for": partial(hoist, written(f))})


PASS = PskHoistLoads
