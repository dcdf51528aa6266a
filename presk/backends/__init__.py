"""Executors behind one seam: each takes runtime values and gives runtime values.

`make(name, module, …)` gives the backend called `name` for a PSK-Core module (its
derivatives expanded); every backend has `name` and `call(args, ctx, entry=None)`.
"""

from __future__ import annotations

from dataclasses import replace

from presk.errors import UsageError
from presk.kernel.machine import TYPES

BACKENDS = ("interp", "kernel", "mlir")
REALIZATIONS = TYPES


def make(
    name: str,
    module,
    bits: int = 256,
    realize="f64",
    threads: int | None = None,
    plan: str | None = None,
):
    """The backend `name` for `module`; a machine backend lowers the module in place.
    `realize` is a realization or its spelling (`f32`, `@R.json`: presk/realize.py);
    `threads` the mlir backend's (default: `workers.default_threads()`); `plan` a plan
    file whose realization (if it has one) replaces a uniform `realize` and whose layouts
    move the nests it names."""
    from presk import realize as realizations
    from presk.ir.program import read_program

    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r} (backends: {', '.join(BACKENDS)})")
    r = realize if isinstance(realize, realizations.Realization) else realizations.read(realize)
    layouts = None
    if plan is not None and name != "interp":
        from presk.kernel.relayout import read_plan

        layouts = read_plan(plan)
        if "realize" in layouts and r.uniform:
            r = replace(r, default=realizations.read(layouts["realize"]).default)
    program = read_program(module)
    realizations.check_paths(r, _parameter_paths(program))
    if name == "interp":
        from presk.backends.interp import Interpreter

        return Interpreter(program, bits, r)
    from presk import stages
    from presk.kernel.machine import MACHINES

    stages.kernel(module, r)
    _realize_orders(module, r, name)
    if layouts is not None:
        from presk.kernel.relayout import apply_plan

        apply_plan(module.operation, layouts, plan)
    machine = MACHINES[r.default]
    if name == "kernel":
        from presk.backends.kernel import KernelBackend

        return KernelBackend(read_program(module), module, machine, r)
    from presk.backends.mlir import MlirBackend
    from presk.backends.workers import default_threads
    from presk.toolchain import vector_bytes

    stages.affine(module, vector_bytes())
    return MlirBackend(read_program(module), module, machine, r, threads or default_threads())


def _parameter_paths(program) -> list[str]:
    from presk.ir.types import leaves
    from presk.runtime.inputs import param_type

    t = param_type(program)
    return [p for p, _ in leaves(t)] if t is not None else []


def _realize_orders(module, r, backend: str) -> None:
    """Check the realization's sites against the kernels', and give each `order` site's
    contraction its order: blocked(W) is a k-block of W (the same bits as sequential),
    interleaved(P) sums in P partials (another realization)."""
    from presk import realize as realizations
    from presk.ir.core import string_attr, walk_ops
    from presk.kernel.relayout import relayout

    sites = sorted(
        {string_attr(op, "psk.site") for op in walk_ops(module.operation, "psk_kernel.launch")}
    )
    realizations.check_sites(r, sites, backend)
    for site, text in r.order.items():
        if text == "sequential":
            continue
        width = int(text[text.index("(") + 1 : -1])
        if text.startswith("blocked"):
            relayout(module.operation, site, lambda lay, w=width: _blocked(lay, w))
        else:
            relayout(module.operation, site, lambda lay, p=width: _interleaved(lay, p))


def _blocked(layout, width: int):
    tiled = layout if layout.form == "tiled" else replace(layout, form="tiled", tile=(1, 1))
    return replace(tiled, kblock=width, order=tiled.order.replace("K", "") + "K")


def _interleaved(layout, partials: int):
    tiled = layout if layout.form == "tiled" else replace(layout, form="tiled", tile=(1, 1))
    return replace(tiled, partials=partials, kblock=0, order=tiled.order.replace("K", ""))
