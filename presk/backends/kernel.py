"""The kernel backend: the lowered program's host over runtime values, each launch run by
the kernel evaluator (presk/kernel/interp.py) in the machine type.

Arguments and parameters are converted to the machine type once, on entry (a real
reaches bf16 through f32), but for parameters a realization types or quantises, which
keep their own buffers and are read as they are (presk/kernel/params.py). A kernel's
output buffer is a new numpy array (the evaluator writes every element before it reads
one). Constants, renames and samples run on the host. The MLIR backend subclasses this
one, running the same launches compiled.
"""

from __future__ import annotations

import numpy as np

from presk.backends.host import CallContext, Host
from presk.ir.program import Op, Program
from presk.kernel.builder import rounded
from presk.kernel.interp import read_kernel, run_kernel
from presk.kernel.machine import ELEMENTS, Machine, storage_of, to_storage
from presk.prims.rows import check_indices
from presk.realize import Realization, machine_args
from presk.runtime.values import Tensor, Value


def kernels_of(module) -> dict:
    """The kernel `func.func`s of a lowered module, by name."""
    out = {}
    for op in module.operation.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and "psk_kernel.kernel" in op.attributes:
            out[op.attributes["sym_name"].value] = op
    return out


class KernelBackend:
    name = "kernel"

    def __init__(
        self, program: Program, module, machine: Machine, realization: Realization | None = None
    ):
        self.program = program
        self.machine = machine
        self.realization = realization or Realization(default=machine.name)
        self.module = module  # owns the kernel ops below
        self.kernel_ops = kernels_of(module)
        self.kernels: dict = {}  # read on first use
        self.host = Host(program, self._apply)
        self.launches = 0
        self.unfused = 0  # the launches the same run would make without fusion
        self.launched: list[str] = []  # kernel names in launch order (first use)

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
            return self.launch(op, list(ins[0]), draw, ctx.training)
        name = op.prim.name
        if name == "const":
            value = rounded(op.attrs["value"], self.machine.arith_name)
            return self.storage(Tensor(op.type, np.array(value)))
        if name == "rename":
            return Tensor(op.type, ins[0].data)
        if name == "sample":
            return Tensor(op.type, sample(ins[0].data, op.attrs["axis"], draw))
        raise AssertionError(f"{name} has no kernel and does not run on the host")

    def kernel(self, name: str):
        if name not in self.kernels:
            self.kernels[name] = read_kernel(self.kernel_ops[name])
            self.launched.append(name)
        return self.kernels[name]

    def launch(self, op: Op, ins: list[Tensor], draw, training: bool) -> Tensor:
        if op.attrs.get("draw") == "dropout" and not training:
            return Tensor(op.type, ins[0].data)  # outside training, dropout is the identity
        name = op.attrs["kernel"]
        k = self.kernel(name)
        buffers = [
            t.data.ints if i in k.quant else to_storage(t.data, e)
            for i, (t, e) in enumerate(zip(ins, k.elements, strict=False))
        ]
        if k.kind in GATHERS:
            check_gathers(k.kind, ins)
        if op.attrs.get("draw") == "dropout":  # kept where a draw is at least the rate
            keep = draw().random(op.type.shape) >= float(op.attrs["rate"])
            buffers.append(keep.astype(np.int8))
        buffers.extend(ins[i].data.scales for i in sorted(k.quant))  # integer weights' scales
        out = np.empty(op.type.shape, dtype=ELEMENTS[k.elements[-1]])
        if out.dtype.kind == "f":
            out.fill(np.nan)  # every kernel writes its output before reading it
        buffers.append(out)
        run_kernel(k, buffers)
        self.launches += 1
        self.unfused += k.ops
        return Tensor(op.type, out)


GATHERS = ("embed", "cross_entropy", "cross_entropy_vjp")  # kernels that index by data


def check_gathers(kind: str, ins: list[Tensor]) -> None:
    """Tokens and targets in range, checked on the host before a kernel reads by them."""
    if kind == "embed":
        check_indices(np.asarray(ins[1].data), ins[0].type.axes[0].size, "token")
    elif kind in ("cross_entropy", "cross_entropy_vjp"):
        logits, targets = ins[0], ins[1]
        check_indices(np.asarray(targets.data), logits.type.axes[-1].size, "target")


def sample(logits: np.ndarray, axis: int, draw) -> np.ndarray:
    """An index a row from softmax(logits), drawn on the host in float64."""
    x = np.moveaxis(np.asarray(logits, dtype=np.float64), axis, -1)
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    u = draw().random(p.shape[:-1])
    pick = (np.cumsum(p, axis=-1) > u[..., None]).argmax(axis=-1)
    return pick.astype(np.int64)
