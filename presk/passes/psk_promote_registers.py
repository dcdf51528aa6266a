"""psk-promote-registers: an output element a loop does not move is kept in a register.

Where a loop's body loads an element of a buffer and later stores to the same element
(the same affine map of operands all defined outside the loop), and touches that buffer
nowhere else, the element is loaded once before the loop, carried through it as a loop
value, and stored once after it. The carried value has the buffer's element type, so a
bf16 output is still rounded to bf16 at every iteration, as the store did: no bit
changes, in any type. A pattern on `affine.for` replaces a loop by one that carries each
such element; the walk visits loops innermost first.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine

from presk.kernel.loops import (
    access,
    body_ops,
    encloses,
    is_inside,
    kernel_funcs,
    rebuild_for,
)
from presk.passes import Pass, apply


def _candidate(loop):
    """(load, store) of one element the loop may carry in a register, or None."""
    body = body_ops(loop)
    for i, load in enumerate(body):
        if load.name != "affine.load":
            continue
        buf, m, operands = access(load)
        if any(is_inside(v, loop) for v in operands):
            continue
        inside = [u.owner.operation for u in buf.uses if encloses(loop, u.owner.operation)]
        stores = [u for u in body[i + 1 :] if u.name == "affine.store" and u.operands[1] == buf]
        if len(inside) != 2 or len(stores) != 1:
            continue
        store = stores[0]
        _, m2, operands2 = access(store)
        if m2 == m and list(operands2) == list(operands):
            return load, store
    return None


def _promote(loop, load, store):
    """Carry the element through `loop`; the rebuilt loop."""
    buf, m, operands = access(load)
    with loop.location, ir.InsertionPoint(loop):
        init = affine.AffineLoadOp(load.result.type, buf, operands, m).result
    loop = rebuild_for(loop, inits=[init])
    block = loop.regions[0].blocks[0]
    carried = block.arguments[len(block.arguments) - 1]
    load.result.replace_all_uses_with(carried)
    value = store.operands[0]
    terminator = body_ops(loop)[-1]
    with terminator.location, ir.InsertionPoint(terminator):
        affine.AffineYieldOp([*terminator.operands, value])
    terminator.erase()
    load.erase()
    store.erase()
    with loop.location, ir.InsertionPoint(loop):
        after = affine.AffineStoreOp(loop.results[len(loop.results) - 1], buf, operands, m)
    after.operation.move_after(loop)
    return loop


def promote_all(loop, rewriter) -> bool:
    """Carry every element `loop` may keep in a register; whether there was one."""
    promoted = False
    while (found := _candidate(loop)) is not None:
        loop = _promote(loop, *found)
        promoted = True
    return promoted


@dataclass(frozen=True)
class PskPromoteRegisters(Pass):
    name = "psk-promote-registers"
    description = "keep an output element a loop does not move in a register across the loop"

    def run(self, module) -> None:
        apply(kernel_funcs(module), {"affine.for": promote_all})


PASS = PskPromoteRegisters
