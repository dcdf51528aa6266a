"""The kernel backend: the lowered program's host over runtime values, each launch run by
the kernel evaluator (presk/kernel/evaluator.py) in the machine type.

Arguments and parameters are converted to the machine type once, on entry (a real
reaches bf16 through f32), but for parameters a realization types or quantises, which
keep their own buffers and are read as they are (presk/reach.py). A kernel's
output buffer is a new numpy array (the evaluator writes every element before it reads
one). Each launch runs its `LaunchPlan` (presk/backends/launch.py), the one description
of a launch the MLIR backend's schedule runs too. Constants, renames and samples run on
the host.
"""

from __future__ import annotations

import numpy as np

from presk.backends import REGISTRY
from presk.backends.host import CallContext, Host
from presk.backends.launch import LaunchPlan, LaunchPlans
from presk.core.program import HostProgram, Op, read_host_program
from presk.kernel.builder import rounded
from presk.kernel.evaluator import read_kernel, run_kernel
from presk.kernel.machine import MACHINES, Machine, storage_of, to_storage
from presk.quantize import machine_args
from presk.realize import Realization
from presk.runtime.values import Tensor, Value


def kernels_of(module) -> dict:
    """The kernel `func.func`s of a lowered module, by name."""
    out = {}
    for op in module.operation.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and "psk_kernel.kernel" in op.attributes:
            out[op.attributes["sym_name"].value] = op
    return out


class Kernels(dict):
    """A lowered module's kernels by name, each made by `make(func_op)` on first use."""

    def __init__(self, module, make):
        super().__init__()
        self.ops = kernels_of(module)
        self.make = make

    def __missing__(self, name: str):
        made = self[name] = self.make(self.ops[name])
        return made


class KernelBackend:
    spec = REGISTRY["kernel"]

    def __init__(
        self, program: HostProgram, module, machine: Machine, realization: Realization | None = None
    ):
        self.program = program
        self.machine = machine
        self.realization = realization or Realization(default=machine.name)
        self.module = module  # owns the kernel ops below
        self.kernels = Kernels(module, read_kernel)  # in first-use order
        self.kernel_ops = self.kernels.ops
        self.plans = LaunchPlans(self.kernels.__getitem__)
        self.host = Host(program, self._apply)
        self.launches = 0
        self.unfused = 0  # the launches the same run would make without fusion

    @classmethod
    def create(cls, module, realization: Realization, plan, bits, threads) -> KernelBackend:
        """The kernel evaluator over a kernel-stage module, at the layouts it has."""
        return cls(read_host_program(module), module, MACHINES[realization.default], realization)

    def storage(self, t: Tensor) -> Tensor:
        return Tensor(t.type, to_storage(t.data, storage_of(t.type, self.machine)))

    def call(
        self, args: list[Value], ctx: CallContext | None = None, entry: str | None = None
    ) -> Value:
        args = machine_args(args, self.program, self.realization, entry, self.storage)
        return self.host.call(entry or self.program.entry, args, ctx or CallContext())

    # ---- each op the host hands over ----
    def _apply(self, op: Op, ins: list, ctx: CallContext, draw) -> Tensor:
        if op.name == "psk_kernel.launch":
            ins = list(ins[0])
            return self.launch(self.plans(op, len(ins), ctx.training), ins, draw)
        if op.prim.draws:  # the host's one primitive that draws: sample
            return Tensor(op.type, sample(ins[0].data, op.attrs["axis"], draw))
        return host_value(op, ins, self.machine)

    def launch(self, plan: LaunchPlan, ins: list[Tensor], draw) -> Tensor:
        """The plan run by the kernel evaluator, on a new output array."""
        if plan.identity:
            return Tensor(plan.type, ins[0].data)
        buffers = plan.buffers(
            ins, to_storage, lambda: plan.keep(draw()).astype(np.int8), lambda: _output(plan)
        )
        if plan.gather is not None:
            plan.check(ins, buffers[1])
        run_kernel(self.kernels[plan.kernel], buffers)
        self.launches += 1
        self.unfused += plan.ops
        return Tensor(plan.type, buffers[-1])


def _output(plan: LaunchPlan) -> np.ndarray:
    out = np.empty(plan.type.shape, dtype=plan.output)
    if out.dtype.kind == "f":
        out.fill(np.nan)  # every kernel writes its output before reading it
    return out


def host_value(op: Op, ins: list, machine: Machine) -> Tensor:
    """A constant, in the machine's storage, or a rename: the host's work on no data."""
    name = op.prim.name
    if name == "const":
        value = rounded(op.attrs["value"], machine.arith_name)
        return Tensor(op.type, to_storage(np.array(value), storage_of(op.type, machine)))
    if name == "rename":
        return Tensor(op.type, ins[0].data)
    raise AssertionError(f"{name} has no kernel and does not run on the host")


def sample(logits: np.ndarray, axis: int, draw) -> np.ndarray:
    """An index a row from softmax(logits), drawn on the host in float64."""
    x = np.moveaxis(np.asarray(logits, dtype=np.float64), axis, -1)
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    u = draw().random(p.shape[:-1])
    above = np.cumsum(p, axis=-1) > u[..., None]
    # where rounding leaves the whole sum at or below u, the last index, as the reference
    pick = np.where(above.any(axis=-1), above.argmax(axis=-1), x.shape[-1] - 1)
    return pick.astype(np.int64)
