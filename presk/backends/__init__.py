"""Executors behind one seam: each takes runtime values and gives runtime values.

`make(name, module, …)` gives the backend called `name` for a PSK-Core module (its
derivatives expanded); every backend has `name` and `call(args, ctx, entry=None)`.
"""

from __future__ import annotations

from presk.errors import UsageError

BACKENDS = ("interp", "kernel", "mlir")
REALIZATIONS = ("f64", "f32", "bf16")


def make(
    name: str,
    module,
    bits: int = 256,
    realize: str = "f64",
    threads: int | None = None,
    plan: str | None = None,
):
    """The backend `name` for `module`; a machine backend lowers the module in place.
    `threads` is the mlir backend's (default: `workers.default_threads()`); `plan` a plan
    file whose realization (if it has one) replaces `realize` and whose layouts move the
    contraction nests it names."""
    from presk.ir.program import read_program

    layouts = None
    if plan is not None and name != "interp":
        from presk.kernel.relayout import read_plan

        layouts = read_plan(plan)
        realize = layouts.get("realize", realize)
    if name == "interp":
        from presk.backends.interp import Interpreter

        return Interpreter(read_program(module), bits)
    if name in ("kernel", "mlir"):
        from presk import stages
        from presk.kernel.machine import MACHINES

        if realize not in MACHINES:
            raise UsageError(f"--realize {realize}: f64, f32 or bf16")
        stages.kernel(module, realize)
        if layouts is not None:
            from presk.kernel.relayout import apply_plan

            apply_plan(module.operation, layouts, plan)
        if name == "kernel":
            from presk.backends.kernel import KernelBackend

            return KernelBackend(read_program(module), module, MACHINES[realize])
        from presk.backends.mlir import MlirBackend
        from presk.backends.workers import default_threads
        from presk.toolchain import vector_bytes

        stages.affine(module, vector_bytes())
        threads = threads or default_threads()
        return MlirBackend(read_program(module), module, MACHINES[realize], threads)
    raise UsageError(f"unknown backend {name!r} (backends: {', '.join(BACKENDS)})")
