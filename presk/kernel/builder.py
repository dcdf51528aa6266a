"""Building PSK-Kernel kernels: a `func.func` over `!psk_kernel.buffer` arguments (the
inputs, then the one output) whose body is `scf.for` loops, `psk_kernel.load`/`store`,
`arith`/`math` arithmetic in the kernel's arithmetic type and `psk_kernel.call`s of C
library functions.

A loop is marked `psk_kernel.parallel` when its iterations write different elements and
read nothing another iteration writes (the output loops of a nest), and left unmarked
when it carries a sum or a scan (the contracted and reduced axes, run in increasing
order). The kernel evaluator vectorises the first kind and steps through the second.
"""

from __future__ import annotations

from contextlib import contextmanager

import gmpy2
from mlir import ir
from mlir.dialects import arith, func, scf, vector
from mlir.dialects import math as mmath

from presk.constants import const_value
from presk.ir.types import Axis, TensorType
from presk.kernel.machine import MACHINES, Machine, storage_of
from presk.kernel.weights import Weights, dequantized, quant_attr


def buffer_type(element: str, t: TensorType, ctx: ir.Context) -> ir.Type:
    return ir.Type.parse(f"!psk_kernel.buffer<{element}, {t.shape_attr()}, {t.names_attr()}>", ctx)


def buffer_parts(t: ir.Type) -> tuple[str, list[int]]:
    """(element type, shape) of a `!psk_kernel.buffer` type, read from its text."""
    text = str(t)
    element = text.split("<", 1)[1].split(",", 1)[0].strip()
    dims = text.split("array<i64", 1)[1].split(">", 1)[0].lstrip(":")
    return element, [int(d) for d in dims.split(",") if d.strip()]


def _like(x: ir.Value, element: str) -> ir.Type:
    """The type of `x` (a scalar or a vector) with another element type."""
    t = ir.Type.parse(element)
    return ir.VectorType.get(x.type.shape, t) if isinstance(x.type, ir.VectorType) else t


def rounded(text: str, arith_name: str) -> float:
    """A constant's exact value rounded once to f64 or f32 (subnormals included)."""
    with gmpy2.context(gmpy2.ieee(64 if arith_name == "f64" else 32)):
        with gmpy2.context(gmpy2.get_context(), precision=256):
            exact = const_value(text)
        return float(gmpy2.mpfr(exact))


class KernelBuilder:
    def __init__(
        self,
        body: ir.Block,
        symbol: str,
        kind: str,
        machine: Machine,
        inputs: list[tuple[str | Weights, TensorType]],
        output: tuple[str, TensorType],
        loc: ir.Location,
    ):
        self.machine = machine
        self.ctx = body.owner.context
        self.loc = loc
        with self.ctx, loc:
            self.ftype = machine.mlir_arith()
            self.index = ir.IndexType.get()
            # integer weights: an int8 buffer in the input's place, its scales after the inputs
            self.weights = {i: e for i, (e, _) in enumerate(inputs) if isinstance(e, Weights)}
            stored = [
                ("i8", self.weights[i].stored(t)) if i in self.weights else (e, t)
                for i, (e, t) in enumerate(inputs)
            ]
            scales = [("f32", self.weights[i].scales(inputs[i][1])) for i in sorted(self.weights)]
            types = [buffer_type(e, t, self.ctx) for e, t in [*stored, *scales, output]]
            with ir.InsertionPoint(body):
                self.func = func.FuncOp(symbol, ir.FunctionType.get(types, []))
            self.func.attributes["psk_kernel.kernel"] = ir.StringAttr.get(kind)
            self.func.attributes["psk_kernel.type"] = ir.StringAttr.get(machine.name)
            if self.weights:
                self.func.attributes["psk_kernel.quant"] = quant_attr(
                    self.weights, [t for _, t in inputs]
                )
            block = self.func.add_entry_block()
        self.args = list(block.arguments)
        self.ins, self.out = self.args[: len(inputs)], self.args[-1]
        self.scales = dict(zip(sorted(self.weights), self.args[len(inputs) : -1], strict=True))
        self.elements = [e for e, _ in inputs] + [output[0]]
        self.types = [t for _, t in inputs] + [output[1]]
        self.entry = block
        self._ips = [ir.InsertionPoint(block)]
        self._consts: dict = {}

    # ---- emission context ----
    @contextmanager
    def _at(self):
        with self.ctx, self.loc, self._ips[-1]:
            yield

    @contextmanager
    def loop(self, n: int, parallel: bool = True, mark: str | None = None):
        """`for i in 0..n`, yielding i; ops emitted inside the block go in the loop. `mark`
        names a unit attribute the loop carries for a later pass."""
        with self._at():
            op = scf.ForOp(self.index_const(0), self.index_const(n), self.index_const(1))
            if parallel:
                op.attributes["psk_kernel.parallel"] = ir.UnitAttr.get()
            if mark:
                op.attributes[mark] = ir.UnitAttr.get()
        self._ips.append(ir.InsertionPoint(op.body))
        try:
            yield op.induction_variable
        finally:
            with self.ctx, self.loc, self._ips[-1]:
                scf.YieldOp([])
            self._ips.pop()

    def reduce(
        self, n: int, inits: list[ir.Value], step, parallel: bool = False, mark: str | None = None
    ) -> list[ir.Value]:
        """A loop carrying values: `step(i, carried) -> new carried`, in increasing i. `mark`
        names a unit attribute the loop carries for a later pass."""
        with self._at():
            op = scf.ForOp(self.index_const(0), self.index_const(n), self.index_const(1), inits)
            if parallel:
                op.attributes["psk_kernel.parallel"] = ir.UnitAttr.get()
            if mark:
                op.attributes[mark] = ir.UnitAttr.get()
        self._ips.append(ir.InsertionPoint(op.body))
        try:
            new = step(op.induction_variable, list(op.inner_iter_args))
            with self.ctx, self.loc, self._ips[-1]:
                scf.YieldOp(list(new))
        finally:
            self._ips.pop()
        return list(op.results)

    def finish(self) -> None:
        with self._at():
            func.ReturnOp([])

    # ---- values ----
    def index_const(self, n: int) -> ir.Value:
        """An index constant (at the kernel's entry, so every loop may use it)."""
        key = ("index", n)
        if key not in self._consts:
            with self.ctx, self.loc, ir.InsertionPoint.at_block_begin(self.entry):
                self._consts[key] = arith.constant(self.index, n)
        return self._consts[key]

    def const(self, text: str) -> ir.Value:
        """A real constant (exact text, `2 / sqrt(pi)` included) in the arithmetic type."""
        key = ("real", text)
        if key not in self._consts:
            value = rounded(text, self.machine.arith_name)
            with self.ctx, self.loc, ir.InsertionPoint.at_block_begin(self.entry):
                self._consts[key] = arith.constant(self.ftype, ir.FloatAttr.get(self.ftype, value))
        return self._consts[key]

    def imul(self, a: ir.Value, n: int) -> ir.Value:
        if n == 1:
            return a
        with self._at():
            return arith.muli(a, self.index_const(n))

    def iadd(self, a: ir.Value, b: ir.Value | int) -> ir.Value:
        if isinstance(b, int):
            if b == 0:
                return a
            b = self.index_const(b)
        with self._at():
            return arith.addi(a, b)

    def _buffer(self, buf: int | ir.Value) -> tuple[ir.Value, str]:
        """An argument (by position) or a scratch buffer, and its element type."""
        if isinstance(buf, int):
            return self.args[buf], self.elements[buf]
        return buf, self.machine.arith_name

    def load(self, buf: int | ir.Value, indices: list[ir.Value], lanes: int = 1) -> ir.Value:
        """Element `indices` of buffer `buf` (an argument's position or a scratch buffer):
        a real widened to the arithmetic type, or, from a buffer wider than the kernel's
        type, rounded to it at the load; an index or mask element as it is (i64, i8); with
        `lanes` > 1, a vector of that many consecutive elements along the last axis. An
        integer weight is dequantised (presk/kernel/weights.py) and then read as f32 is."""
        if isinstance(buf, int) and buf in self.weights:
            x = dequantized(
                self, self.weights[buf], self.args[buf], self.scales[buf], indices, lanes
            )
            return self.from_f32(x)
        value, element = self._buffer(buf)
        real = element in MACHINES
        own = storage_of(self.types[buf], self.machine) if isinstance(buf, int) else element
        # another kernel's, in a wider type: rounded at the edge
        wider = real and MACHINES[element].bytes > MACHINES[own].bytes
        with self._at():
            rtype = ir.Type.parse(element) if not real or wider else self.ftype
            vtype = ir.VectorType.get([lanes], rtype) if lanes > 1 else rtype
            x = ir.Operation.create(
                "psk_kernel.load", results=[vtype], operands=[value, *indices]
            ).result
            if wider:  # rounded to the kernel's type, and a value reaches bf16 through f32
                if element == "f64":
                    x = arith.truncf(_like(x, "f32"), x)
                return self.from_f32(x)
            return x

    def from_f32(self, x: ir.Value) -> ir.Value:
        """An f32 value (scalar or vector) in the arithmetic type: widened exactly (f64), as
        it is (f32), or rounded to bf16 and back (a bf16 kernel's operands are bf16)."""
        with self._at():
            if self.machine.name == "f64":
                return arith.extf(_like(x, "f64"), x)
            if self.machine.name == "bf16":
                return arith.extf(_like(x, "f32"), arith.truncf(_like(x, "bf16"), x))
            return x

    def store(self, value: ir.Value, indices: list[ir.Value], buf: int | ir.Value = -1) -> None:
        """Store a scalar, or a vector's lanes to consecutive elements along the last axis."""
        with self._at():
            target = self._buffer(buf)[0]
            ir.Operation.create("psk_kernel.store", operands=[value, target, *indices])

    def scratch(self, shape: list[int]) -> ir.Value:
        """A buffer of the arithmetic type private to the current loop iteration."""
        t = TensorType("real", tuple(Axis(None, n) for n in shape))
        with self._at():
            btype = buffer_type(self.machine.arith_name, t, self.ctx)
            return ir.Operation.create("psk_kernel.scratch", results=[btype]).result

    def broadcast(self, x: ir.Value, lanes: int) -> ir.Value:
        """A scalar in every lane of a vector."""
        if lanes == 1:
            return x
        with self._at():
            return vector.broadcast(ir.VectorType.get([lanes], x.type), x)

    def idiv(self, a: ir.Value, n: int) -> ir.Value:
        with self._at():
            return arith.divui(a, self.index_const(n))

    def irem(self, a: ir.Value, n: int) -> ir.Value:
        with self._at():
            return arith.remui(a, self.index_const(n))

    # ---- arithmetic in the arithmetic type ----
    def add(self, a, b):
        with self._at():
            return arith.addf(a, b)

    def sub(self, a, b):
        with self._at():
            return arith.subf(a, b)

    def mul(self, a, b):
        with self._at():
            return arith.mulf(a, b)

    def fma(self, a, b, c):
        """a·b + c rounded once (a realization's contraction, never another op's)."""
        with self._at():
            return mmath.fma(a, b, c)

    def div(self, a, b):
        with self._at():
            return arith.divf(a, b)

    def neg(self, a):
        with self._at():
            return arith.negf(a)

    def sqrt(self, a):
        with self._at():
            return mmath.sqrt(a)

    def absf(self, a):
        with self._at():
            return mmath.absf(a)

    def call(self, fn: str, *args: ir.Value) -> ir.Value:
        """A C library function (exp, log, tanh, sin, cos, erf, pow) in the arithmetic type."""
        with self._at():
            op = ir.Operation.create(
                "psk_kernel.call",
                results=[self.ftype],
                operands=list(args),
                attributes={"fn": ir.StringAttr.get(fn)},
            )
            return op.result

    def cmp(self, pred: str, a, b):
        """An ordered comparison of reals (oge, ogt, olt, ole, oeq), as i1."""
        code = {"oeq": 1, "ogt": 2, "oge": 3, "olt": 4, "ole": 5}[pred]
        with self._at():
            return arith.cmpf(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), code), a, b)

    def icmp(self, pred: str, a, b):
        """A comparison of integers or indices (eq, ne, slt, sle, sgt, sge), as i1."""
        code = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5}[pred]
        with self._at():
            return arith.cmpi(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), code), a, b)

    def both(self, a, b):
        """The conjunction of two i1 values."""
        with self._at():
            return arith.andi(a, b)

    def select(self, c, a, b):
        with self._at():
            return arith.select(c, a, b)

    def to_i64(self, a):
        """An index value as i64."""
        with self._at():
            return arith.index_cast(ir.IntegerType.get_signless(64), a)

    def to_real(self, a):
        """An i64 (or index) value as a real of the arithmetic type."""
        with self._at():
            if isinstance(a.type, ir.IndexType):
                a = arith.index_cast(ir.IntegerType.get_signless(64), a)
            return arith.sitofp(self.ftype, a)

    def to_index(self, a):
        with self._at():
            return arith.index_cast(self.index, a)

    def truthy(self, a):
        """A mask element (i8) as i1."""
        return self.icmp("ne", a, self.i8(0))

    def mask_value(self, c):
        """An i1 as a mask element (i8)."""
        with self._at():
            return arith.extui(ir.IntegerType.get_signless(8), c)

    def i64(self, n: int):
        return self._int_const(64, n)

    def i8(self, n: int):
        return self._int_const(8, n)

    def _int_const(self, bits: int, n: int):
        key = (f"i{bits}", n)
        if key not in self._consts:
            with self.ctx, self.loc, ir.InsertionPoint.at_block_begin(self.entry):
                self._consts[key] = arith.constant(ir.IntegerType.get_signless(bits), n)
        return self._consts[key]

    def max(self, a, b):
        """a if a ≥ b else b, as the reference picks."""
        return self.select(self.cmp("oge", a, b), a, b)

    def min(self, a, b):
        return self.select(self.cmp("ole", a, b), a, b)
