"""Folding a bias add into the contraction kernel before it (the epilogue).

At the kernel stage `y = x · w + b` is two launches: the contraction's, whose output t
only the add reads, and the add's (a kernel of one op, `t + b` or `b + t`, of t's type).
The fold makes them one: the contraction kernel gets b as a third input and adds it to
each output element before its store (`contraction.Epilogue`), one launch replaces the
two, and the add's kernel goes if nothing else launches it. In f64 and f32 the sum is
the add kernel's bit for bit (t's store and load were exact); in bf16 the product is
stored and read back before the add, as the add's kernel read it.
"""

from __future__ import annotations

from dataclasses import replace

from mlir import ir

from presk.errors import RealizationError
from presk.ir.build import OpBuilder, V
from presk.ir.ops import module_functions, module_launches, psk_type, string_attr
from presk.kernel.contraction import Epilogue, Layout, read_nest
from presk.kernel.machine import MACHINES
from presk.kernel.relayout import contraction_kernel, contraction_kernels, fresh_symbol
from presk.kernel.weights import kernel_buffers


def _tuple_items(v: ir.Value) -> list[tuple[ir.Value, ir.Operation]] | None:
    """The values a chain of psk.tuple_append packs, with the ops that append them."""
    items = []
    while True:
        owner = v.owner
        if isinstance(owner, ir.Block):
            return None
        op = owner.operation
        if op.name == "psk.tuple_empty":
            return list(reversed(items))
        if op.name != "psk.tuple_append":
            return None
        items.append((op.operands[1], op))
        v = op.operands[0]


def _kernels(module) -> dict[str, ir.Operation]:
    return {string_attr(f, "sym_name"): f for f in module_functions(module)}


def fold_epilogues(module, nest: str = "") -> int:
    """Fold the bias add after each contraction of `nest` (every one if empty); how many."""
    contractions = contraction_kernels(module)
    # The products only, collected before any fold: a fold erases the add's launch, and a
    # handle to an erased op reads freed memory.
    products = [
        launch
        for launch in module_launches(module)
        if launch.attributes["kernel"].value in contractions
        and (not nest or string_attr(launch, "psk.site") == nest)
    ]
    folded = 0
    for first in products:
        symbol = first.attributes["kernel"].value
        found = bias_add(module, first)
        if found is None:
            if nest:
                raise RealizationError(
                    f"nest {nest}: no bias add of the product's type reads it alone", code="E7002"
                )
            continue
        second, bias = found
        _fold(module, first, second, bias, contractions[symbol])
        folded += 1
    if nest and not folded:
        raise RealizationError(f"no contraction at nest {nest}", code="E7001")
    return folded


def bias_add(module, first):
    """(the add's launch, the bias value) when the product feeds only a bias add stored in
    the product's own type (folding across types would skip the product's rounding)."""
    t = first.results[0]
    uses = list(t.uses)
    if len(uses) != 1 or uses[0].owner.operation.name != "psk.tuple_append":
        return None
    op = uses[0].owner.operation
    while True:  # along the tuple being packed, to the launch that takes it
        following = [u.owner.operation for u in op.results[0].uses]
        if len(following) != 1:
            return None
        op = following[0]
        if op.name == "psk_kernel.launch":
            break
        if op.name != "psk.tuple_append":
            return None
    second = op
    add = _kernels(module).get(second.attributes["kernel"].value)
    if add is None or string_attr(add, "psk_kernel.kernel") != "add":
        return None
    if add.attributes["psk_kernel.ops"].value != 1 or "psk_kernel.draw" in second.attributes:
        return None
    items = _tuple_items(second.operands[0])
    if items is None or len(items) != 2 or t not in [v for v, _ in items]:
        return None
    if psk_type(second.results[0]) != psk_type(t):
        return None
    product = _kernels(module).get(first.attributes["kernel"].value)
    if product is None or kernel_buffers(product)[-1][0] != kernel_buffers(add)[-1][0]:
        return None  # stored in another type, the product is rounded before the add reads it
    bias = next(v for v, _ in items if v != t)
    return second, bias


def _fold(module, first, second, bias, kernel) -> None:
    machine = MACHINES[string_attr(kernel, "psk_kernel.type")]
    nest, kind = read_nest(kernel)
    buffers = kernel_buffers(kernel)
    add = _kernels(module)[second.attributes["kernel"].value]
    add_buffers = kernel_buffers(add)
    bias_buffer = next(b for b in add_buffers[:-1] if b[1] == psk_type(bias))
    buffers = [*buffers[:-1], bias_buffer, add_buffers[-1]]
    layout = replace(Layout.read(kernel.attributes["psk_kernel.layout"]), epilogue=True)
    symbol = fresh_symbol(module, string_attr(kernel, "sym_name") + ".bias")
    epilogue = Epilogue(len(buffers) - 2, bias_buffer[1])
    contraction_kernel(kernel, symbol, machine, buffers, nest, kind, layout, epilogue)
    operands = [v for v, _ in _tuple_items(first.operands[0])] + [bias]
    b = OpBuilder(second.context, ir.InsertionPoint(second), "", second.location)
    packed = b.tuple([V(v, psk_type(v)) for v in operands])
    with second.context:
        attrs = {
            "kernel": ir.FlatSymbolRefAttr.get(symbol),
            "psk.site": first.attributes["psk.site"],
            "psk_kernel.epilogue_site": second.attributes["psk.site"],
        }
    new = b.op("psk_kernel.launch", [packed], psk_type(second.results[0]), attrs)
    second.results[0].replace_all_uses_with(new.value)
    for op in [second, *_chain(second), first, *_chain(first)]:
        if all(not list(r.uses) for r in op.results):
            op.erase()
    for f in (add, kernel):
        used = any(
            op.attributes["kernel"].value == string_attr(f, "sym_name")
            for op in module_launches(module)
        )
        if not used:
            f.erase()


def _chain(launch) -> list[ir.Operation]:
    """The tuple ops that packed a launch's operands, last first."""
    return [op for _, op in reversed(_tuple_items(launch.operands[0]) or [])] + _empty(launch)


def _empty(launch) -> list[ir.Operation]:
    v = launch.operands[0]
    while not isinstance(v.owner, ir.Block) and v.owner.operation.name == "psk.tuple_append":
        v = v.owner.operation.operands[0]
    return [] if isinstance(v.owner, ir.Block) else [v.owner.operation]
