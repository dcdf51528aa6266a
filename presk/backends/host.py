"""The host program: PSK-Core functions evaluated over runtime values.

Calls, folds over stacked layers, records and tuples are the host's; each primitive is
handed to the executor (`apply`), which computes it its own way (exactly, for the
reference), and each kernel launch of a lowered program too. Every executor therefore
shares one host, one call-path scheme for its random draws, and one way of reporting
bad data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import gmpy2
import numpy as np

from presk.core.program import Function, HostProgram, Op
from presk.errors import PreskError, RuntimeDataError, UsageError
from presk.fileio import source_line
from presk.ir.types import Axis
from presk.runtime import rng
from presk.runtime.values import Tensor, Value


@dataclass(frozen=True)
class CallContext:
    """What a run adds to a call: training mode, the step and seed keying its draws."""

    training: bool = False
    step: int = 0
    seed: int = 0


@dataclass(frozen=True)
class Draw:
    """The generator of an op's random draws: keyed by the seed, the step, the kind of
    draw and the op's place in the call tree (`where`), never by what ran before."""

    ctx: CallContext
    kind: str | None
    where: str

    @property
    def path(self) -> str:
        return f"{self.kind}/{self.ctx.step}{self.where}"

    def __call__(self):
        return rng.generator(self.ctx.seed, self.path)


Apply = Callable[[Op, list[Value], CallContext, Callable[[], object]], Tensor]


def locate(e: PreskError, op: Op) -> None:
    """Give an error raised running `op` the op's source position and site."""
    if e.span is None and op.loc:
        e.span = op.loc
        e.source_line = source_line(e.span.file, e.span.line) if e.span else None
        if op.site:
            e.message = f"{e.message} (at {op.site})"


_DOMAIN_ERRORS = (gmpy2.InvalidOperationError, gmpy2.DivisionByZeroError, gmpy2.OverflowResultError)


class Host:
    def __init__(self, program: HostProgram, apply: Apply, stack: Callable = np.stack):
        self.program = program
        self.apply = apply
        self.stack = stack  # layers' buffers -> the stacked buffer (fold_bwd's gradients)
        self._plans: dict[str, list] = {}  # each function's ops with their handlers
        # Called with each function run and its slots (arguments, then each op's value)
        # once it has run: a watcher's view of values no function returns.
        self.observe: Callable[[Function, list], None] | None = None

    def call(self, name: str, args: list[Value], ctx: CallContext, path: str = "") -> Value:
        return self._run(self.program.functions[name], args, ctx, path)

    def _run(self, fn: Function, args: list[Value], ctx: CallContext, path: str) -> Value:
        slots: list = [None] * fn.slots
        slots[: len(args)] = args
        plan = self._plans.get(fn.name)
        if plan is None:
            plan = self._plans[fn.name] = [(self._handler(op), op) for op in fn.ops]
        for handler, op in plan:
            try:
                slots[op.out] = handler(op, [slots[j] for j in op.ins], ctx, path)
            except PreskError as e:
                locate(e, op)
                raise
            except _DOMAIN_ERRORS as e:
                span = op.loc
                kind = type(e).__name__.replace("Error", "").replace("Result", "")
                what = op.prim.name if op.prim else op.name
                raise RuntimeDataError(
                    f"{what} has no real value here ({kind}) at {op.site}",
                    code="E8001",
                    span=span,
                    source_line=source_line(span.file, span.line) if span else None,
                ) from None
        if self.observe is not None:
            self.observe(fn, slots)
        return slots[fn.result]

    def _handler(self, op: Op):
        """The function that runs `op`: `handler(op, ins, ctx, path) -> value`."""
        if op.prim is not None or op.name == "psk_kernel.launch":
            return self._compute
        found = getattr(self, _handler_name(op.name), None)
        if found is None:
            raise AssertionError(f"the host cannot run {op.name}")
        return found

    def _compute(self, op: Op, ins: list, ctx: CallContext, path: str) -> Value:
        kind = op.prim.name if op.prim is not None else op.attrs.get("draw")
        return self.apply(op, ins, ctx, Draw(ctx, kind, f"{path}/{op.key or op.site}"))

    def _psk_field(self, op, ins, ctx, path):
        return ins[0][op.attrs["name"]]

    def _psk_record_empty(self, op, ins, ctx, path):
        return {}

    def _psk_set_field(self, op, ins, ctx, path):
        return {**ins[0], op.attrs["name"]: ins[1]}

    def _psk_tuple_empty(self, op, ins, ctx, path):
        return ()

    def _psk_tuple_append(self, op, ins, ctx, path):
        return (*ins[0], ins[1])

    def _psk_get(self, op, ins, ctx, path):
        return ins[0][op.attrs["index"]]

    def _func_call(self, op, ins, ctx, path):
        return self._run(self.program.functions[op.callee], ins, ctx, f"{path}/{op.callsite}")

    def _psk_fold(self, op, ins, ctx, path):
        stack, carry = ins
        callee = self.program.functions[op.callee]
        for layer in range(_layers(stack)):
            where = f"{path}/{op.callsite}[{layer}]"
            carry = self._run(callee, [_layer(stack, layer), carry], ctx, where)
        return carry

    def _psk_fold_fwd(self, op, ins, ctx, path):  # the callee returns (carry, residuals)
        stack, carry = ins
        callee = self.program.functions[op.callee]
        saved = []
        for layer in range(_layers(stack)):
            where = f"{path}/{op.callsite}[{layer}]"
            carry, res = self._run(callee, [_layer(stack, layer), carry], ctx, where)
            saved.append(res)
        return (carry, tuple(saved))

    def _psk_fold_bwd(self, op, ins, ctx, path):  # (residuals, ct) -> (layer ct, carry ct)
        saved, ct = ins
        callee = self.program.functions[op.callee]
        layers = [None] * len(saved)
        for layer in reversed(range(len(saved))):
            where = f"{path}/{op.callsite}[{layer}]"
            layers[layer], ct = self._run(callee, [saved[layer], ct], ctx, where)
        return (_stacked(layers, self.stack), ct)

    def _psk_grad(self, op, ins, ctx, path):
        raise UsageError(f"{op.name} must be expanded by the psk-vjp pass before it runs")

    _psk_vjp = _psk_grad


@cache
def _handler_name(name: str) -> str:
    """The method that runs ops named `name` (`psk.field`: `_psk_field`), made once a name:
    a program has thousands of ops and a few dozen names."""
    return "_" + name.replace(".", "_")


def _layers(stack: Value) -> int:
    while not isinstance(stack, Tensor):
        stack = next(iter(stack.values())) if isinstance(stack, dict) else stack[0]
    return stack.data.shape[0]


def _stacked(layers: list[Value], stack: Callable) -> Value:
    """Values of one type, one a layer, as a stack: every leaf with a leading layer axis."""
    first = layers[0]
    if isinstance(first, Tensor):
        data = stack([t.data for t in layers])
        return Tensor(first.type.with_axes((Axis(None, len(layers)), *first.type.axes)), data)
    if isinstance(first, dict):
        return {k: _stacked([v[k] for v in layers], stack) for k in first}
    return tuple(_stacked([v[i] for v in layers], stack) for i in range(len(first)))


def _layer(stack: Value, layer: int) -> Value:
    if isinstance(stack, Tensor):
        return Tensor(stack.type.with_axes(stack.type.axes[1:]), stack.data[layer])
    if isinstance(stack, dict):
        return {k: _layer(v, layer) for k, v in stack.items()}
    return tuple(_layer(v, layer) for v in stack)
