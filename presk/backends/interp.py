"""The exact reference: PSK-Core evaluated over the reals at `--bits` of precision.

Each primitive runs its `reference` semantics (presk/prims) on MPFR numbers: every
operation correctly rounded at the run's precision, every sum term by term in index
order. Inputs and parameters arrive as float64 (or int, bool) buffers and are taken
exactly; the output stays exact (an object array of MPFR numbers) for the caller to
print or measure against. A call longer than a second shows its progress over the
primitives it applies (presk/progress.py).
"""

from __future__ import annotations

import numpy as np

from presk import stages
from presk.backends import REGISTRY
from presk.backends.host import CallContext, Host
from presk.core.program import HostProgram, Op, read_host_program
from presk.errors import RuntimeDataError
from presk.ir.types import leaves
from presk.prims import exact
from presk.prims.base import Apply
from presk.progress import Progress
from presk.quantize import realized_args
from presk.realize import Realization, check_paths
from presk.runtime.values import Tensor, Value, map_leaves


def _check_finite(path: str, t: Tensor) -> None:
    """A machine buffer holds only reals the reference can take: no NaN nor infinity."""
    if t.data.dtype == object:  # exact already (a reference run's own values)
        return
    bad = np.argwhere(~np.isfinite(t.data))
    if bad.size:
        at = tuple(int(i) for i in bad[0])
        raise RuntimeDataError(
            f"{path}{list(at) if at else ''} is {t.data[at]}: the reference computes over "
            "the reals",
            code="E8001",
        )


def to_exact(name: str, value: Value) -> Value:
    """An argument's machine buffers as MPFR numbers; `name` locates a non-finite one."""

    def conv(path: str, t: Tensor) -> Tensor:
        if t.type.kind != "real":
            return t
        _check_finite(path, t)
        return Tensor(t.type, exact.exact(t.data))

    return map_leaves(conv, value, name)


def applications(program: HostProgram, name: str, memo: dict[str, int]) -> int:
    """The primitives a call of function `name` applies: a call's callee's, a fold's
    callee's once a layer (the layers read from the stack's type)."""
    if name in memo:
        return memo[name]
    fn = program.functions[name]
    types = dict(enumerate(fn.arg_types)) | {op.out: op.type for op in fn.ops}
    count = 0
    for op in fn.ops:
        if op.prim is not None:
            count += 1
        elif op.name == "func.call":
            count += applications(program, op.callee, memo)
        elif op.name in ("psk.fold", "psk.fold_fwd", "psk.fold_bwd"):
            stack = types[op.ins[0]]  # fold_bwd's: a tuple of residuals, one a layer
            layers = len(stack.items) if op.name == "psk.fold_bwd" else leaves(stack)[0][1].shape[0]
            count += layers * applications(program, op.callee, memo)
    memo[name] = count
    return count


class Interpreter:
    spec = REGISTRY["interp"]

    def __init__(
        self, program: HostProgram, bits: int = 256, realization: Realization | None = None
    ):
        self.program = program
        self.bits = bits
        self.realization = realization or Realization()  # only its parameter types apply
        self.host = Host(program, self._apply)
        self._applications: dict[str, int] = {}
        self._progress: Progress | None = None  # while a call runs

    @classmethod
    def create(cls, module, realization: Realization, plan, bits: int, threads) -> Interpreter:
        """The reference for a PSK-Core module; of a realization only its parameters' types
        apply (a plan's layouts and threads are the machine backends')."""
        program = read_host_program(module)
        check_paths(realization, stages.parameter_paths(program))
        return cls(program, bits, realization)

    def _apply(self, op: Op, ins: list[Value], ctx: CallContext, draw) -> Tensor:
        ap = Apply(op.attrs, [t.type for t in ins], op.type, op.site or "", ctx.training, draw)
        data = op.prim.reference(ap, [t.data for t in ins])
        data = np.asarray(data, dtype=object if op.type.kind == "real" else None)
        if op.type.kind == "real" and data.dtype != object:
            data = exact.exact(data)
        self._progress.advance()
        return Tensor(op.type, data.reshape(op.type.shape))

    def call(
        self, args: list[Value], ctx: CallContext | None = None, entry: str | None = None
    ) -> Value:
        """Run the entry (or function `entry`) on `args`, the parameter record first."""
        entry = entry or self.program.entry
        args = realized_args(args, self.program, self.realization, entry)
        names = self.program.functions[entry].arg_names
        total = applications(self.program, entry, self._applications)
        with exact.context(self.bits), Progress("reference: op", total) as self._progress:
            args = [to_exact(n, a) for n, a in zip(names, args, strict=True)]
            return self.host.call(entry, args, ctx or CallContext())
