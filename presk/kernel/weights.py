"""Integer weights in kernels: the buffers they take and the loads that dequantise them.

A kernel input whose element is `Weights` (8 or 4 bits, scales constant along the axis
`over` counts from the end) is an integer weight: an int8 buffer (at 4 bits two to a byte
along the last axis, the even element in the low nibble) and an f32 buffer of scales,
one per index of every axis but `over`. The scale buffers follow the kernel's other
inputs (after a dropout's mask), before the output, and the kernel records which inputs
are weights in `psk_kernel.quant` (`[{input = 1 : i64, bits = 8 : i64, over = -2 : i64,
extent = 64 : i64}]`, extent the weight's last). A load gives f32(q)·s rounded to f32, as
`presk.quantize.Quantized` stands for, then widened (f64) or rounded (bf16) to the
kernel's type like any f32 operand: the bits are those of the same kernel reading the
dequantised weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, vector

from presk.errors import RealizationError
from presk.ir.types import Axis, TensorType
from presk.kernel.machine import buffer_tensor


@dataclass(frozen=True)
class Weights:
    bits: int  # 8 or 4
    over: int  # the axis the scales are constant along, from the end (negative)

    @staticmethod
    def read(attr: ir.DictAttr) -> Weights:
        """Weights from a dictionary attribute's integer entries `bits` and `over`."""
        return Weights(_integer(attr, "bits"), _integer(attr, "over"))

    def entries(self) -> dict[str, ir.Attribute]:
        """The integer attributes `read` takes back (in a context)."""
        return {"bits": _i64(self.bits), "over": _i64(self.over)}

    def stored(self, t: TensorType) -> TensorType:
        """The int8 buffer's type: at 4 bits, the last axis halved (rounded up)."""
        if self.bits == 8:
            return t
        last = t.axes[-1]
        return t.with_axes((*t.axes[:-1], Axis(last.name, -(-last.size // 2))))

    def scales(self, t: TensorType) -> TensorType:
        axes = list(t.axes)
        axes[self.over] = Axis(axes[self.over].name, 1)
        return TensorType("real", tuple(axes))


def _i64(n: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)


def _integer(attr: ir.DictAttr, name: str) -> int:
    return ir.IntegerAttr(attr[name]).value


def kernel_buffers(f) -> list[tuple[str | Weights, TensorType]]:
    """A kernel's buffers as its builder was given them: (element, type) of each input,
    then of the output; integer weights as their `Weights` and the weight's type, their
    scale buffers left out."""
    args = [buffer_tensor(a.type) for a in f.regions[0].blocks[0].arguments]
    quant = quant_inputs(f)
    for i, (weights, extent) in quant.items():
        t = args[i][1]
        last = t.axes[-1]
        args[i] = (weights, t.with_axes((*t.axes[:-1], Axis(last.name, extent))))
    return [*args[: len(args) - 1 - len(quant)], args[-1]]


def quant_inputs(f) -> dict[int, tuple[Weights, int]]:
    """A kernel's integer-weight inputs: position -> (weights, the weight's last extent)."""
    if "psk_kernel.quant" not in f.attributes:
        return {}
    entries = [ir.DictAttr(a) for a in ir.ArrayAttr(f.attributes["psk_kernel.quant"])]
    return {_integer(d, "input"): (Weights.read(d), _integer(d, "extent")) for d in entries}


def quant_attr(weights: dict[int, Weights], types: list[TensorType]) -> ir.Attribute:
    """`psk_kernel.quant` of a kernel whose inputs of `types` at `weights`' positions are
    integer weights (in a context)."""
    return ir.ArrayAttr.get(
        [
            ir.DictAttr.get(
                {"input": _i64(i), **w.entries(), "extent": _i64(_last_extent(types[i]))}
            )
            for i, w in sorted(weights.items())
        ]
    )


def _last_extent(t: TensorType) -> int:
    return t.axes[-1].size if t.axes else 1


def dequantized(kb, w: Weights, ints: ir.Value, scales: ir.Value, indices: list, lanes: int):
    """f32(q)·s of the weight at `indices` (with `lanes`, of consecutive elements along the
    last axis, which then start at an even index: lanes divide a tile's columns), in f32."""
    with kb._at():
        i8 = ir.IntegerType.get_signless(8)
        f32 = ir.F32Type.get()

        def vec(t, n):
            return ir.VectorType.get([n], t) if n > 1 else t

        def const(n, width):
            return kb.broadcast(kb.i8(n), width)

        def load(buf, idx, t):
            return ir.Operation.create("psk_kernel.load", results=[t], operands=[buf, *idx]).result

        *lead, last = indices
        if w.bits == 8:
            q = load(ints, indices, vec(i8, lanes))
        else:
            if lanes == 2:
                raise RealizationError(
                    "4-bit weights are read in 4 or more lanes, or in none (here 2)", code="E7002"
                )
            half = arith.divui(last, kb.index_const(2))
            n = max(lanes // 2, 1)
            byte = load(ints, [*lead, half], vec(i8, n))
            low = arith.subi(arith.xori(arith.andi(byte, const(15, n)), const(8, n)), const(8, n))
            high = arith.shrsi(byte, const(4, n))
            if lanes > 1:  # the low and high nibbles of each byte, interleaved
                mask = [k // 2 + (n if k % 2 else 0) for k in range(lanes)]
                q = vector.shuffle(low, high, mask)
            else:
                odd = kb.icmp("ne", arith.remui(last, kb.index_const(2)), kb.index_const(0))
                q = arith.select(odd, high, low)
        x = arith.sitofp(vec(f32, lanes), q)
        at = list(indices)
        at[w.over] = kb.index_const(0)
        across = w.over == -1  # one scale for every lane
        s = load(scales, at, f32 if across else vec(f32, lanes))
        if across and lanes > 1:
            s = vector.broadcast(vec(f32, lanes), s)
        return arith.mulf(x, s)
