"""One `psk_kernel.launch`, planned once: what the kernel evaluator and the native
schedule both do to launch a kernel.

Everything about a launch but the values is known from the op and its kernel: whether
it runs at all (outside training, dropout is the identity), the buffers the kernel reads
in its argument order and how each is made (an input converted to the storage type the
kernel reads it in, or an integer weight's int8 buffer as it is; then dropout's keep
mask; then the integer weights' scales; then the output), which inputs are indices to
check before the kernel reads by them, and the output's type. A `LaunchPlan` holds that
once; `KernelBackend` runs it on numpy arrays now, `Schedule` on buffers of an arena
later, each supplying only how a buffer is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from presk.core.program import Op
from presk.ir.types import TensorType
from presk.kernel.machine import ELEMENTS
from presk.prims import all_prims
from presk.prims.rows import check_indices
from presk.runtime.values import Tensor

GATHERS = frozenset(p.name for p in all_prims() if p.gathers)  # kernels that index by data


@dataclass(frozen=True)
class LaunchPlan:
    kernel: str  # the kernel's name
    type: TensorType  # the launch's result
    identity: bool  # dropout outside training: the result is the first input, no kernel runs
    reads: tuple[str | None, ...]  # each input's storage type; None: an integer weight's ints
    gather: str | None  # the kind of a kernel that indexes by data, checked first
    rate: float | None  # dropout's rate: a keep mask follows the inputs
    output: np.dtype | None  # the output buffer's element (None for the identity)
    ops: int  # the PSK-Core ops the kernel computes (the launches without fusion)

    @classmethod
    def of(cls, op: Op, kernel: Callable[[str], object], inputs: int, training: bool):
        """The plan of `op` on `inputs` inputs; `kernel(name)` is its kernel (the
        evaluator's or a compiled one: `kind`, `elements` with the output last, `quant`,
        `ops`), asked for only if the launch runs."""
        dropout = op.attrs.get("draw") == "dropout"
        name = op.attrs["kernel"]
        if dropout and not training:
            return cls(name, op.type, True, (), None, None, None, 0)
        k = kernel(name)
        return cls(
            kernel=name,
            type=op.type,
            identity=False,
            reads=tuple(None if i in k.quant else e for i, e in enumerate(k.elements[:inputs])),
            gather=k.kind if k.kind in GATHERS else None,
            rate=float(op.attrs["rate"]) if dropout else None,
            output=np.dtype(ELEMENTS[k.elements[-1]]),
            ops=k.ops,
        )

    def buffers(
        self,
        ins: list[Tensor],
        read: Callable[[object, str], object],
        mask: Callable[[], object],
        output: Callable[[], object],
    ) -> list:
        """The kernel's buffers in its argument order, made by the runner's `read(data,
        element)` (an input in its storage type), `mask()` (dropout's keep mask, int8 of
        the result's shape) and `output()`; an integer weight's ints and scales as they are."""
        bufs = [
            t.data.ints if e is None else read(t.data, e)
            for t, e in zip(ins, self.reads, strict=True)
        ]
        if self.rate is not None:
            bufs.append(mask())
        bufs.extend(t.data.scales for t, e in zip(ins, self.reads, strict=True) if e is None)
        bufs.append(output())
        return bufs

    def check(self, ins: list[Tensor], indices: np.ndarray) -> None:
        """Tokens or targets (`indices`, the second input as the kernel reads it) in range,
        checked on the host before a kernel reads by them."""
        check_indices(indices, *self.index_bound(ins))

    def index_bound(self, ins: list[Tensor]) -> tuple[int, str]:
        """What a gathering kernel's indices (its second input) must stay under, and what
        they are: the table's rows for tokens, the row's length for targets."""
        if self.gather == "embed":
            return ins[0].type.axes[0].size, "token"
        logits = ins[0].type  # cross_entropy, cross_entropy_vjp
        return logits.axes[row_axis(logits, ins[1].type)].size, "target"

    def keep(self, generator) -> np.ndarray:
        """Dropout's mask from the launch's generator: kept where a draw is at least the rate."""
        return generator.random(self.type.shape) >= self.rate


def row_axis(logits: TensorType, targets: TensorType) -> int:
    """The axis of the logits a target indexes: the one whose removal leaves the
    targets' axes (the last, where several would)."""
    for axis in reversed(range(logits.rank)):
        if logits.axes[:axis] + logits.axes[axis + 1 :] == targets.axes:
            return axis
    raise AssertionError(f"targets {targets} do not index a row of logits {logits}")


class LaunchPlans:
    """Each launch op's plans (one a training mode), built on the op's first launch."""

    def __init__(self, kernel: Callable[[str], object]):
        self.kernel = kernel  # a kernel by name, read or compiled on first use
        self.plans: dict[tuple[int, bool], LaunchPlan] = {}

    def __call__(self, op: Op, inputs: int, training: bool) -> LaunchPlan:
        key = (id(op), training)  # ops live as long as their program, so ids stay theirs
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = LaunchPlan.of(op, self.kernel, inputs, training)
        return plan
