"""Executors behind one seam: each takes runtime values and gives runtime values.

`make(name, module, …)` gives the backend called `name` for a PSK-Core module (its
derivatives expanded); every backend has `name` and `call(args, ctx, entry=None)`. Each
backend's module is imported only when it is made: the reference needs neither the kernel
evaluator nor the ExecutionEngine.
"""

from __future__ import annotations

from presk import plans, stages
from presk import realize as realizations
from presk.core.program import read_host_program
from presk.errors import UsageError
from presk.kernel.machine import MACHINES
from presk.toolchain import default_threads, vector_bytes

BACKENDS = ("interp", "kernel", "mlir")


def make(
    name: str,
    module,
    bits: int = 256,
    realize="f64",
    threads: int | None = None,
    plan: str | None = None,
):
    """The backend `name` for `module`; a machine backend lowers the module in place
    (`stages.kernel`). `realize` is a realization or its spelling (`f32`, `@R.json`:
    presk/realize.py); `threads` the mlir backend's (default: `toolchain.default_threads()`);
    `plan` a plan file whose realization (if it has one) replaces a uniform `realize` and
    whose layouts move the nests it names, `auto` (the cost model's layouts for this
    machine: the mlir backend's default) or `default` (each nest's default layout: the
    kernel evaluator's)."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r} (backends: {', '.join(BACKENDS)})")
    if name == "mlir" and plan is None:  # native code runs the cost model's layouts
        plan = plans.AUTO
    r = stages.realization(realize, plan if name != "interp" else None)
    if name == "interp":
        from presk.backends.interp import Interpreter

        program = read_host_program(module)
        realizations.check_paths(r, stages.parameter_paths(program))
        return Interpreter(program, bits, r)
    stages.kernel(module, r, plan)
    machine = MACHINES[r.default]
    if name == "kernel":
        from presk.backends.kernel import KernelBackend

        return KernelBackend(read_host_program(module), module, machine, r)
    from presk.backends.mlir import MlirBackend

    stages.affine(module, vector_bytes())
    return MlirBackend(read_host_program(module), module, machine, r, threads or default_threads())
