"""The readable text of a kernel (`presk dump --stage kernel`):

    kernel dot (%0 : f32[batch: 4, 3], %1 : f32[3, 2]) -> %2 : f32[batch: 4, 2] {
      for i0 in 0..4 {
        …
          %2[i0, i2] = (%2[i0, i2] + (s0 * %1[i1, i2]))

Buffers are `%0, %1, …` (the output last), scratch buffers `p0, p1, …`, loop indices
`i0, i1, …` in order of appearance, values carried by a loop `a0, a1, …`, and values used
more than once, or in a loop nested deeper than where they are computed, `s0, s1, …`;
every other value is written inline where it is used. A vector of n lanes reads or
writes `x[i, j..j+n]`. A call of presk's own function (`"functions": "presk"`) is
`presk.exp(…)`, the C library's `exp(…)`.
"""

from __future__ import annotations

import math

from mlir import ir

from presk.kernel.functions import IMPL
from presk.kernel.machine import buffer_tensor

_BINARY = {
    "arith.addf": "+",
    "arith.subf": "-",
    "arith.mulf": "*",
    "arith.divf": "/",
    "arith.addi": "+",
    "arith.muli": "*",
    "arith.andi": "&",
    "arith.xori": "^",
    "arith.subi": "-",
    "arith.shrsi": ">>",
    "arith.divui": "/",
    "arith.remui": "%",
}
_CMPF = {1: "==", 2: ">", 3: ">=", 4: "<", 5: "<="}
_CMPI = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">="}


def _buffer(t: ir.Type) -> str:
    element, tensor = buffer_tensor(t)
    return element + tensor.text()[1:] if tensor.axes else element


def _indices(indices: list[str], t: ir.Type) -> str:
    """`i, j`, or for a vector of n lanes `i, j..j+n`."""
    if isinstance(t, ir.VectorType) and indices:
        *lead, last = indices
        return ", ".join([*lead, f"{last}..{last}+{t.shape[0]}"])
    return ", ".join(indices)


class _Printer:
    def __init__(self, f):
        self.f = f
        self.names: dict = {}
        self.lines: list[str] = []
        self.counts = {"i": 0, "a": 0, "s": 0, "p": 0}

    def fresh(self, prefix: str) -> str:
        n = self.counts[prefix]
        self.counts[prefix] += 1
        return f"{prefix}{n}"

    def expr(self, v) -> str:
        if v in self.names:
            return self.names[v]
        op = v.owner.operation
        name = op.name
        a = [self.expr(x) for x in op.operands]
        if name == "arith.constant":
            attr = op.attributes["value"]
            value = attr.value if hasattr(attr, "value") else attr
            if isinstance(value, float):
                if not math.isfinite(value) or value != int(value) or abs(value) > 1e15:
                    return f"{value:.9g}"
                return str(int(value))
            return str(value)
        if name == "arith.andi" and str(op.operands[0].type) == "i1":
            return f"({a[0]} && {a[1]})"
        if name in _BINARY:
            return f"({a[0]} {_BINARY[name]} {a[1]})"
        if name == "vector.shuffle":  # the nibbles of packed 4-bit weights, low then high
            return f"interleave({a[0]}, {a[1]})"
        if name == "arith.negf":
            return f"-{a[0]}"
        if name == "arith.cmpf":
            return f"({a[0]} {_CMPF[op.attributes['predicate'].value]} {a[1]})"
        if name == "arith.cmpi":
            return f"({a[0]} {_CMPI[op.attributes['predicate'].value]} {a[1]})"
        if name == "arith.select":
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if name == "arith.sitofp" and "i8" in str(op.operands[0].type):  # an integer weight
            return f"f32({a[0]})"
        if name in ("arith.sitofp", "arith.index_cast", "arith.extui", "vector.broadcast"):
            return a[0]
        if name in ("arith.truncf", "arith.extf"):
            t = op.results[0].type
            return f"{t.element_type if isinstance(t, ir.VectorType) else t}({a[0]})"
        if name == "math.fma":  # a realization's fused a·b + c
            return f"fma({a[0]}, {a[1]}, {a[2]})"
        if name == "math.sqrt":
            return f"sqrt({a[0]})"
        if name == "math.absf":
            return f"abs({a[0]})"
        if name == "psk_kernel.call":  # presk's own function (a realization's) named so
            fn = op.attributes["fn"].value
            return f"{'presk.' if IMPL in op.attributes else ''}{fn}({', '.join(a)})"
        if name == "psk_kernel.load":
            return f"{a[0]}[{_indices(a[1:], op.results[0].type)}]"
        raise AssertionError(f"no text for {name}")

    def block(self, block, indent: str) -> None:
        ops = [o.operation for o in block.operations]
        for op in ops:
            name = op.name
            if name == "psk_kernel.store":
                a = [self.expr(x) for x in op.operands]
                where = _indices(a[2:], op.operands[0].type)
                self.lines.append(f"{indent}{a[1]}[{where}] = {a[0]}")
            elif name == "psk_kernel.scratch":
                p = self.fresh("p")
                self.names[op.results[0]] = p
                self.lines.append(f"{indent}{p} = scratch {_buffer(op.results[0].type)}")
            elif name == "scf.for":
                self.loop(op, indent)
            elif name in ("scf.yield", "func.return", "arith.constant"):
                continue
            elif op.results and self.named(op):
                s = self.fresh("s")
                self.lines.append(f"{indent}{s} = {self.expr(op.results[0])}")
                self.names[op.results[0]] = s

    def named(self, op) -> bool:
        """A value gets a name when used twice, or by ops in another block."""
        uses = list(op.results[0].uses)
        if len(uses) > 1:
            return True
        return any(u.owner.operation.parent != op.parent for u in uses)

    def loop(self, op, indent: str) -> None:
        body = op.regions[0].blocks[0]
        iv = self.fresh("i")
        self.names[body.arguments[0]] = iv
        hi = self.expr(op.operands[1])
        for init, arg, res in zip(
            op.operands[3:], list(body.arguments)[1:], op.results, strict=True
        ):
            acc = self.fresh("a")
            self.lines.append(f"{indent}{acc} = {self.expr(init)}")
            self.names[arg] = acc
            self.names[res] = acc
        self.lines.append(f"{indent}for {iv} in 0..{hi} {{")
        self.block(body, indent + "  ")
        yields = [o.operation for o in body.operations][-1]
        for arg, y in zip(list(body.arguments)[1:], yields.operands, strict=True):
            if self.expr(y) != self.names[arg]:
                self.lines.append(f"{indent}  {self.names[arg]} = {self.expr(y)}")
        self.lines.append(f"{indent}}}")

    def print(self) -> str:
        f = self.f
        block = f.regions[0].blocks[0]
        args = list(block.arguments)
        for i, a in enumerate(args):
            self.names[a] = f"%{i}"
        ins = ", ".join(f"%{i} : {_buffer(a.type)}" for i, a in enumerate(args[:-1]))
        out = f"%{len(args) - 1} : {_buffer(args[-1].type)}"
        kind = f.attributes["psk_kernel.kernel"].value
        self.lines.append(f"kernel {kind} ({ins}) -> {out} {{")
        self.block(block, "  ")
        self.lines.append("}")
        return "\n".join(self.lines)


def kernel_text(f) -> str:
    """One kernel `func.func` as readable text."""
    return _Printer(f).print()
