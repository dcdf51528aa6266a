"""The exact reference: PSK-Core evaluated over the reals at `--bits` of precision.

Each primitive runs its `reference` semantics (presk/prims) on MPFR numbers: every
operation correctly rounded at the run's precision, every sum term by term in index
order. Inputs and parameters arrive as float64 (or int, bool) buffers and are taken
exactly; the output stays exact (an object array of MPFR numbers) for the caller to
print or measure against. A call longer than a second shows its progress over the
primitives it applies (presk/progress.py).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from presk import stages
from presk.backends import REGISTRY
from presk.backends.host import CallContext, Host
from presk.core.program import HostProgram, Op, read_host_program
from presk.errors import BindingError, RuntimeDataError
from presk.front.bindings import physical_memory
from presk.ir.types import leaves
from presk.prims import exact
from presk.prims.base import Apply
from presk.progress import Progress, shown
from presk.quantize import realized_args
from presk.realize import Realization, check_paths
from presk.runtime.values import Tensor, Value, map_leaves


def check_finite(path: str, t: Tensor) -> None:
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


def to_exact(name: str, value: Value, numbers=exact) -> Value:
    """An argument's machine buffers as MPFR numbers (or `numbers.exact`'s: balls);
    `name` locates a non-finite one."""

    def conv(path: str, t: Tensor) -> Tensor:
        if t.type.kind != "real":
            return t
        check_finite(path, t)
        return Tensor(t.type, numbers.exact(t.data))

    return map_leaves(conv, value, name)


@dataclass(frozen=True)
class Cost:
    """What a call of a function asks of a reference: the primitives it applies, the
    multiply-adds of its contractions (`terms`), the elements its other primitives read
    and write, and the reals it holds at its peak: a function's values live until it
    returns, beside its deepest callee's, and the largest one's temporaries. `lost`, what
    a ball reference expects to lose: the bits by which a radius may grow relative to its
    value along the longest chain from the arguments to the result, log2(√k · 2/π) at
    each contraction of k terms (a radius bounds Σ|aᵢbᵢ|, which is about √k · 2/π times
    |Σ aᵢbᵢ| for terms of random signs)."""

    ops: int = 0
    terms: int = 0
    elements: int = 0
    held: int = 0
    lost: float = 0.0


TEMPORARIES = 3  # values of the largest one's size a primitive's rule makes on its way


def _reals(t) -> int:
    return sum(leaf.size for _, leaf in leaves(t) if leaf.kind == "real")


def cost(program: HostProgram, name: str, memo: dict[str, Cost]) -> Cost:
    """The cost of a call of function `name`: a call's callee's, a fold's callee's once a
    layer (the layers read from the stack's type)."""
    if name in memo:
        return memo[name]
    fn = program.functions[name]
    types = dict(enumerate(fn.arg_types)) | {op.out: op.type for op in fn.ops}
    ops = terms = elements = own = largest = deepest = 0
    lost = dict.fromkeys(range(len(fn.arg_types)), 0.0)  # each value's, from the arguments
    for op in fn.ops:
        # a field, record or tuple op only names values that are held already
        size = _reals(op.type) if op.prim is not None or op.callee is not None else 0
        own += size
        step = 0.0
        if op.prim is not None:
            ops, largest = ops + 1, max(largest, size)
            ins = [leaves(types[i])[0][1] for i in op.ins]
            if op.prim.terms is not None:
                k = op.prim.terms(Apply(op.attrs, ins, op.type, ""))
                terms += op.type.size * k
                step = max(0.0, math.log2(k) / 2 - math.log2(math.pi / 2))
            else:
                elements += sum(t.size for t in ins) + op.type.size
        elif op.callee is not None:
            layers = 1
            if op.name != "func.call":  # a fold; fold_bwd's stack: a tuple of residuals
                stack = types[op.ins[0]]
                layers = len(stack.items) if op.name == "psk.fold_bwd" else _layers_of(stack)
            inner = cost(program, op.callee, memo)
            ops, terms = ops + layers * inner.ops, terms + layers * inner.terms
            elements += layers * inner.elements
            deepest = max(deepest, inner.held)
            step = layers * inner.lost
        lost[op.out] = max((lost[i] for i in op.ins), default=0.0) + step
    held = own + deepest + TEMPORARIES * largest
    memo[name] = Cost(ops, terms, elements, held, lost[fn.result])
    return memo[name]


def _layers_of(stack) -> int:
    return leaves(stack)[0][1].shape[0]


def applications(program: HostProgram, name: str, memo: dict[str, Cost]) -> int:
    """The primitives a call of function `name` applies."""
    return cost(program, name, memo).ops


ANNOUNCE = 10.0  # seconds: a call expected to take longer says so before it starts


class Expected:
    """A call's expected time: before it starts, from its cost at the reference's own
    rates (`numbers.SECONDS_PER_TERM`, `…_PER_ELEMENT`, this machine kind's, an estimate's
    scale); as it runs, from the rates it has shown on the contractions and on the rest."""

    def __init__(self, cost: Cost, numbers):
        self.cost = cost
        self.rates = [numbers.SECONDS_PER_TERM, numbers.SECONDS_PER_ELEMENT]
        self.done = [0, 0]  # terms, elements
        self.spent = [0.0, 0.0]
        self.ops = 0
        self.start = self.last = time.monotonic()

    @property
    def total(self) -> list[int]:
        return [self.cost.terms, self.cost.elements]

    def seconds(self) -> float:
        """The time still expected: each kind's work left at its rate so far."""
        left = 0.0
        for kind in (0, 1):
            rate = self.spent[kind] / self.done[kind] if self.done[kind] else self.rates[kind]
            left += max(0, self.total[kind] - self.done[kind]) * rate
        return left

    def announce(self, name: str, bits: int) -> None:
        expected = self.seconds()
        if expected >= ANNOUNCE and shown(sys.stderr) is not None:
            sys.stderr.write(
                f"note: the reference ({name} at {bits} bits) is expected to take about "
                f"{_duration(expected)} ({self.cost.ops} ops, {self.cost.terms:.3g} "
                f"multiply-adds); it shows its progress\n"
            )

    def after(self, op: Op, ap: Apply) -> str:
        """Count `op`'s work done; the progress line's words."""
        now = time.monotonic()
        out = ap.out_type.size
        if op.prim.terms is not None:
            self.done[0] += out * op.prim.terms(ap)
            self.spent[0] += now - self.last
        else:
            self.done[1] += sum(t.size for t in ap.in_types) + out
            self.spent[1] += now - self.last
        self.last, self.ops = now, self.ops + 1
        return (
            f"{self.ops}/{self.cost.ops}  {now - self.start:.1f} s, "
            f"about {_duration(self.seconds())} more"
        )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Interpreter:
    """The reference over MPFR numbers; a reference over other numbers (the ball backend)
    changes `numbers`, the rule it applies and what it checks of each result."""

    spec = REGISTRY["interp"]
    numbers = exact  # the arithmetic: its context(bits), its exact(machine numbers)

    def __init__(
        self, program: HostProgram, bits: int = 256, realization: Realization | None = None
    ):
        self.program = program
        self.bits = bits
        self.realization = realization or Realization()  # only its parameter types apply
        self.host = Host(program, self._apply)
        self._costs: dict[str, Cost] = {}
        self._progress: Progress | None = None  # while a call runs
        self._expected: Expected | None = None  # while a call runs

    @classmethod
    def create(cls, module, realization: Realization, plan, bits: int, threads) -> Interpreter:
        """The reference for a PSK-Core module; of a realization only its parameters' types
        apply (a plan's layouts and threads are the machine backends')."""
        program = read_host_program(module)
        check_paths(realization, stages.parameter_paths(program))
        return cls(program, bits, realization)

    def rule(self, op: Op):
        """The semantics this reference applies for `op`'s primitive."""
        return op.prim.reference

    def _apply(self, op: Op, ins: list[Value], ctx: CallContext, draw) -> Tensor:
        ap = Apply(op.attrs, [t.type for t in ins], op.type, op.site or "", ctx.training, draw)
        ins = [self.operand(t) for t in ins]
        data = self.rule(op)(ap, [t.data for t in ins])
        data = np.asarray(data, dtype=object if op.type.kind == "real" else None)
        if op.type.kind == "real" and data.dtype != object:
            data = self.numbers.exact(data)
        self.checked(op, ap, ins, data)
        self._progress.advance(detail=self._expected.after(op, ap))
        return Tensor(op.type, data.reshape(op.type.shape))

    def operand(self, t: Tensor) -> Tensor:
        """An operand as the rule takes it (the interpreter's are exact already)."""
        return t

    def checked(self, op: Op, ap: Apply, ins: list[Tensor], data: np.ndarray) -> None:
        """What this reference checks of each result (MPFR traps its own domain errors)."""

    def taken(self, name: str, value: Value) -> Value:
        """An argument as the run holds it: every real an MPFR number."""
        return to_exact(name, value)

    def result(self, value: Value) -> Value:
        """The entry's value as the call returns it."""
        return value

    def argument_bytes(self, reals: int) -> int:
        """What `reals` argument elements take as the run holds them."""
        return reals * self.numbers.number_bytes(self.bits)

    def check_memory(self, entry: str, bits: int) -> Cost:
        """The call's cost, refused (E3012) before it runs when the reals it would hold
        at its peak, at `bits` of precision, would not fit in this machine's memory."""
        c = cost(self.program, entry, self._costs)
        arguments = sum(_reals(t) for t in self.program.functions[entry].arg_types)
        need = c.held * self.numbers.number_bytes(bits) + self.argument_bytes(arguments)
        have = physical_memory()
        if need > have:
            raise BindingError(
                f"the reference ({self.spec.name} at {bits} bits) would hold about "
                f"{c.held} reals at once beside its arguments, about {need / 2**30:.3g} GiB, "
                f"more than this machine's {have / 2**30:.3g} GiB: run smaller sizes (or on "
                "a machine backend, which holds float64 or narrower)",
                code="E3012",
            )
        return c

    def call(
        self, args: list[Value], ctx: CallContext | None = None, entry: str | None = None
    ) -> Value:
        """Run the entry (or function `entry`) on `args`, the parameter record first."""
        entry = entry or self.program.entry
        args = realized_args(args, self.program, self.realization, entry)
        return self.run(args, ctx or CallContext(), entry, self.bits)

    def run(self, args: list[Value], ctx: CallContext, entry: str, bits: int) -> Value:
        """One run of function `entry` on realized `args` at `bits` of precision."""
        names = self.program.functions[entry].arg_names
        c = self.check_memory(entry, bits)
        self._expected = Expected(c, self.numbers)
        with self.numbers.context(bits), Progress("reference: op", c.ops) as self._progress:
            self._expected.announce(self.spec.name, bits)
            args = [self.taken(n, a) for n, a in zip(names, args, strict=True)]
            return self.result(self.host.call(entry, args, ctx))
