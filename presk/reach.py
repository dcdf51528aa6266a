"""Where a realization's types reach: the host values kernels read them as.

A parameter typed by a realization (`params`: bf16 or f32) or quantised (`quant`) keeps
its own buffer on the machine backends, and a kernel reading it should read that buffer
as it is: widened (or rounded) at the load, or dequantised as f32(q)·s. Kernels are
specialised statically, so this runs the host program abstractly from the entry: the
parameter record's leaves carry their element (`bf16`, or `Weights(8, -2)`: 8-bit integers
whose scales are constant along the second axis from the end), records, tuples, calls
and folds carry them through, and anything else gives no spelling. A function runs once
per call site, so a value gets a spelling only if every run agrees on it (the shared
`Proj.apply` of q, k and v, say); where runs differ, the kernel reads its own type and
the host converts at its edge. The values kernels store are followed the same way
(`stored_elements`), so a kernel reads its argument in the type another function's kernel
stored it in.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.ir.ops import psk_type
from presk.kernel.weights import Weights
from presk.runtime.values import build

_MIXED = object()  # runs disagree on a value


@dataclass(frozen=True)
class _Layers:
    """One layer's residuals of a `psk.fold_fwd`, which its `psk.fold_bwd` reads back."""

    inner: object


class _Reach:
    def __init__(self, module, spell_launches: bool = False, spell_op=None):
        body = module.regions[0].blocks[0]
        self.functions = {
            op.operation.attributes["sym_name"].value: op.operation
            for op in body.operations
            if op.operation.name == "func.func"
        }
        self.seen: dict = {}  # value -> its abstract value, or _MIXED
        self.read_by: dict = {}  # a spelling -> the launch sites of the kernels reading it
        self.spell_launches = spell_launches  # a launch's result spelled by its site
        self.spell_op = spell_op  # a Core op -> its result's spelling, or None

    def note(self, value, abstract) -> None:
        before = self.seen.get(value, abstract)
        self.seen[value] = abstract if before == abstract else _MIXED

    def call(self, name: str, args: list):
        block = self.functions[name].regions[0].blocks[0]
        env = dict(zip(block.arguments, args, strict=True))
        for v, a in env.items():
            self.note(v, a)
        for op in block.operations:
            op = op.operation
            ins = [env.get(v) for v in op.operands]
            if op.name == "func.return":
                return ins[0] if ins else None
            out = self.op(op, ins)
            if op.results:
                env[op.results[0]] = out
                self.note(op.results[0], out)
        return None

    def op(self, op, ins: list):
        name, attrs = op.name, op.attributes
        if name == "psk.field" and isinstance(ins[0], dict):
            return ins[0].get(attrs["name"].value)
        if name == "psk.get" and isinstance(ins[0], tuple):
            return ins[0][attrs["index"].value]
        if name == "psk.tuple_empty":
            return ()
        if name == "psk.tuple_append" and isinstance(ins[0], tuple):
            return (*ins[0], ins[1])
        if name == "psk.record_empty":
            return {}
        if name == "psk.set_field" and isinstance(ins[0], dict):
            return {**ins[0], attrs["name"].value: ins[1]}
        if name == "psk.rename":
            return ins[0]
        if name == "func.call":
            return self.call(attrs["callee"].value, ins)
        if name == "psk_kernel.launch" and isinstance(ins[0], tuple):
            for a in ins[0]:
                if isinstance(a, str):
                    self.read_by.setdefault(a, set()).add(attrs["psk.site"].value)
            return attrs["psk.site"].value if self.spell_launches else None
        if name in ("psk.fold", "psk.fold_fwd"):
            callee = attrs["callee"].value
            stack, carry = ins  # a layer of a stack carries the stack's spellings
            first = self.call(callee, [stack, carry])
            if name == "psk.fold":  # a second run sees the carry a layer hands on
                return self.call(callee, [stack, first])
            second = self.call(callee, [stack, first[0] if isinstance(first, tuple) else None])
            if not (isinstance(first, tuple) and isinstance(second, tuple)):
                return None
            return (second[0], _Layers(first[1] if first[1] == second[1] else None))
        if name == "psk.fold_bwd":
            saved = ins[0].inner if isinstance(ins[0], _Layers) else None
            self.call(attrs["callee"].value, [saved, ins[1]])
            return None
        return self.spell_op(op) if self.spell_op is not None else None


def parameter_elements(module, spellings: dict[str, str]) -> dict:
    """The host values of the entry's run that are, on every run, a parameter leaf with a
    spelling (by its dotted path in `spellings`): value -> spelling."""
    if not spellings or "psk.module" not in module.attributes:
        return {}
    reach = _run(module, spellings.get)
    return {v: a for v, a in reach.seen.items() if isinstance(a, (str, Weights))}


def parameter_readers(module) -> dict[str, set[str]]:
    """By a parameter leaf's dotted path, the launch sites of a kernel-stage module's
    kernels that read it, on any run (a shared function's runs each count): where the
    precision solver charges a parameter's rounding."""
    if "psk.module" not in module.attributes:
        return {}
    return _run(module, lambda path: path).read_by


def value_readers(module) -> dict[str, set[str]]:
    """By a launch site, the launch sites of the kernels reading its result, on any run:
    where the precision solver's time objective charges a conversion at a kernel's edge."""
    reach = _run(module, lambda path: None, spell_launches=True)
    return {k: v for k, v in reach.read_by.items() if k is not None}


def stored_elements(module, element_of) -> dict:
    """The host values of a PSK-Core module's entry run that are, on every run, a value a
    kernel stored in one element type (`element_of(op)`: the element a compute op's
    result is stored in, None for one the host computes): value -> element. A function's
    argument stored by its caller's kernels in bf16, say, is read by its own kernels as
    bf16 through widening or rounding loads, where the host would convert it."""
    if "psk.entry" not in module.attributes:
        return {}
    reach = _run(module, lambda path: None, spell_op=element_of)
    return {v: a for v, a in reach.seen.items() if isinstance(a, str)}


def _run(module, spelling, spell_launches: bool = False, spell_op=None) -> _Reach:
    """The entry run abstractly, each parameter leaf spelled `spelling(path)` (an entry
    of no module has no parameter record)."""
    reach = _Reach(module, spell_launches, spell_op)
    entry = reach.functions[module.attributes["psk.entry"].value]
    args = list(entry.regions[0].blocks[0].arguments)
    if "psk.module" not in module.attributes:
        reach.call(entry.attributes["sym_name"].value, [None] * len(args))
        return reach
    record = build(psk_type(args[0]), lambda path, t: spelling(path))
    reach.call(entry.attributes["sym_name"].value, [record, *[None] * (len(args) - 1)])
    return reach
