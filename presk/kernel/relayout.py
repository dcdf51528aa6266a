"""Moving contraction kernels to other points of the layout space, and plans.

A layout pass changes one field of the `Layout` of the contraction kernels it is given
(every one, or the nest `nest` names: the site of a launch, `"<function>/%<n>"`), checks
the new point (E7002) and builds the kernel again at it with the one builder of
presk/kernel/contraction.py. A kernel that several launches share is copied first when
only some of them are moved. Runs at the kernel stage.
Plans, which name a layout for each nest, are presk/plans.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mlir import ir

from presk.errors import RealizationError
from presk.ir.ops import module_functions, module_launches, python_value, string_attr
from presk.kernel import functions
from presk.kernel.builder import KernelBuilder
from presk.kernel.contraction import Epilogue, Layout, build, check, check_rows, read_nest
from presk.kernel.machine import MACHINES
from presk.kernel.rows import softmax_nest
from presk.kernel.weights import kernel_buffers

_KEPT = ("psk_kernel.ops", "psk_kernel.contraction", "psk_kernel.rows")


def contraction_kernels(module) -> dict[str, ir.Operation]:
    return {
        string_attr(f, "sym_name"): f
        for f in module_functions(module)
        if "psk_kernel.contraction" in f.attributes
    }


def layout_kernels(module) -> dict[str, ir.Operation]:
    """The kernels with a layout: contractions and softmaxes."""
    return {
        string_attr(f, "sym_name"): f
        for f in module_functions(module)
        if "psk_kernel.layout" in f.attributes
    }


def _launches(module) -> list[ir.Operation]:
    return module_launches(module)


def relayout(module, nest: str, change: Callable[[Layout], Layout]) -> int:
    """Move the kernels of `nest` (every contraction if empty) to `change(layout)`; the
    number moved. A nest no kernel with a layout has is refused (E7001)."""
    kernels = layout_kernels(module) if nest else contraction_kernels(module)
    launches = [op for op in _launches(module) if op.attributes["kernel"].value in kernels]
    if nest:
        chosen = [op for op in launches if string_attr(op, "psk.site") == nest]
        if not chosen:
            known = sorted({string_attr(op, "psk.site") for op in launches})
            raise RealizationError(
                f"no contraction or softmax at nest {nest} (nests: {', '.join(known) or 'none'})",
                code="E7001",
            )
        symbols = _own_kernels(module, chosen, launches, kernels)
    else:
        symbols = sorted(kernels)
    current = layout_kernels(module)
    for symbol in symbols:
        try:
            rebuild(current[symbol], change)
        except RealizationError as e:
            e.message = f"nest {nest or symbol}: {e.message}"
            raise
    return len(symbols)


def _own_kernels(module, chosen, launches, kernels) -> list[str]:
    """The kernels of the `chosen` launches, each copied first if another launch shares it."""
    out = []
    for symbol in sorted({op.attributes["kernel"].value for op in chosen}):
        users = [op for op in launches if op.attributes["kernel"].value == symbol]
        mine = [op for op in users if op in chosen]
        if len(mine) == len(users):
            out.append(symbol)
            continue
        copy = kernels[symbol].clone(ip=ir.InsertionPoint.after(kernels[symbol]))
        name = fresh_symbol(module, symbol)
        copy.attributes["sym_name"] = ir.StringAttr.get(name, module.context)
        for op in mine:
            op.attributes["kernel"] = ir.FlatSymbolRefAttr.get(name, module.context)
        out.append(name)
    return out


def fresh_symbol(module, symbol: str) -> str:
    """`symbol`, or `symbol.<n>` if it is taken."""
    taken = {string_attr(f, "sym_name") for f in module_functions(module)}
    if symbol not in taken:
        return symbol
    n = 1
    while f"{symbol}.{n}" in taken:
        n += 1
    return f"{symbol}.{n}"


def rebuild(f: ir.Operation, change: Callable[[Layout], Layout]) -> None:
    """Build kernel `f` again at `change` of its layout, in its place."""
    machine = MACHINES[string_attr(f, "psk_kernel.type")]
    layout = change(Layout.read(f.attributes["psk_kernel.layout"]))
    buffers = kernel_buffers(f)
    if "psk_kernel.contraction" in f.attributes:
        nest, kind = read_nest(f)
        epilogue = epilogue_of(f, buffers)
        layout = replace(layout, epilogue=epilogue is not None)  # a kernel's own, not a choice
        new = contraction_kernel(
            f, string_attr(f, "sym_name"), machine, buffers, nest, kind, layout, epilogue
        )
    else:
        check_rows(layout, buffers[-1][1].rank - 1)
        kb = _builder(f, string_attr(f, "sym_name"), "softmax", machine, buffers)
        axis = python_value(f.attributes["psk_kernel.rows"])["axis"]
        softmax_nest(kb, [t for _, t in buffers[:-1]], axis, layout.form)
        new = _finish(kb, f, layout)
        functions.mark(new, functions.marked(f))  # whose exp, as psk-functions chose
    new.move_before(f)
    f.erase()


def epilogue_of(f: ir.Operation, buffers: list) -> Epilogue | None:
    if "psk_kernel.epilogue" not in f.attributes:
        return None
    i = python_value(f.attributes["psk_kernel.epilogue"])["input"]
    return Epilogue(i, buffers[i][1])


def contraction_kernel(
    template: ir.Operation, symbol: str, machine, buffers, nest, kind, layout, epilogue
) -> ir.Operation:
    """A contraction kernel `symbol` over `buffers` at `layout`, with `template`'s kept
    attributes, built beside `template`."""
    check(nest, layout, machine.name, epilogue)
    kb = _builder(template, symbol, kind, machine, buffers)
    build(kb, nest, layout, epilogue)
    new = _finish(kb, template, layout)
    if epilogue is not None:
        with new.context:
            new.attributes["psk_kernel.epilogue"] = ir.Attribute.parse(
                f"{{input = {epilogue.buffer} : i64}}"
            )
    return new


def _builder(template, symbol, kind, machine, buffers) -> KernelBuilder:
    return KernelBuilder(
        template.parent.regions[0].blocks[0],
        symbol,
        kind,
        machine,
        buffers[:-1],
        buffers[-1],
        template.location,
    )


def _finish(kb: KernelBuilder, template, layout: Layout) -> ir.Operation:
    kb.finish()
    with template.context:
        for name in _KEPT:
            if name in template.attributes:
                kb.func.attributes[name] = template.attributes[name]
        kb.func.attributes["psk_kernel.layout"] = layout.attr()
    return kb.func.operation
