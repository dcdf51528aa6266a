"""The exact reference: PSK-Core evaluated over the reals at `--bits` of precision.

Each primitive runs its `reference` semantics (presk/prims) on MPFR numbers: every
operation correctly rounded at the run's precision, every sum term by term in index
order. Inputs and parameters arrive as float64 (or int, bool) buffers and are taken
exactly; the output stays exact (an object array of MPFR numbers) for the caller to
print or measure against.
"""

from __future__ import annotations

import numpy as np

from presk.backends.host import CallContext, Host
from presk.ir.program import Op, Program
from presk.prims import exact
from presk.prims.base import Apply
from presk.realize import Realization, realized_args
from presk.runtime.values import Tensor, Value, map_tensors


def to_exact(value: Value) -> Value:
    def conv(t: Tensor) -> Tensor:
        return Tensor(t.type, exact.exact(t.data)) if t.type.kind == "real" else t

    return map_tensors(conv, value)


class Interpreter:
    name = "interp"

    def __init__(self, program: Program, bits: int = 256, realization: Realization | None = None):
        self.program = program
        self.bits = bits
        self.realization = realization or Realization()  # only its parameter types apply
        self.host = Host(program, self._apply)

    def _apply(self, op: Op, ins: list[Value], ctx: CallContext, draw) -> Tensor:
        ap = Apply(op.attrs, [t.type for t in ins], op.type, op.site or "", ctx.training, draw)
        data = op.prim.reference(ap, [t.data for t in ins])
        data = np.asarray(data, dtype=object if op.type.kind == "real" else None)
        if op.type.kind == "real" and data.dtype != object:
            data = exact.exact(data)
        return Tensor(op.type, data.reshape(op.type.shape))

    def call(
        self, args: list[Value], ctx: CallContext | None = None, entry: str | None = None
    ) -> Value:
        """Run the entry (or function `entry`) on `args`, the parameter record first."""
        args = realized_args(args, self.program, self.realization, entry)
        with exact.context(self.bits):
            args = [to_exact(a) for a in args]
            return self.host.call(entry or self.program.entry, args, ctx or CallContext())
