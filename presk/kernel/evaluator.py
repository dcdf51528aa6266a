"""The kernel evaluator: PSK-Kernel run by numpy in the kernel's machine type.

Every operation is one numpy operation in the kernel's arithmetic type (float64 or
float32), so each is rounded as the compiled code rounds it; bf16 buffers widen at loads
and round to nearest even at stores (ml_dtypes). The C library functions are the ones
the compiled code calls (glibc's expf, logf, …, through ctypes; exp, log, … through
Python's math, which calls them), not numpy's own. A realization's fused multiply-add
is glibc's fma or fmaf: correctly rounded, as the FMA instruction the compiled code
issues is, so the two agree bit for bit.

A loop marked `psk_kernel.parallel` runs all its iterations at once: its index becomes a
numpy array along an axis of its own, and loads and stores index with arrays. A loop
without the mark runs its iterations one after another, carrying its values, so every
sum adds its terms in order.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from dataclasses import dataclass, field

import numpy as np
from mlir import ir

from presk.kernel import functions
from presk.kernel.builder import buffer_parts
from presk.kernel.machine import ELEMENTS
from presk.kernel.weights import quant_inputs

_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))


def _libm(name: str, nargs: int, ctype):
    fn = getattr(_LIBM, name)
    fn.argtypes = [ctype] * nargs
    fn.restype = ctype
    return fn


# fn -> (f64 function, f32 function); f64 through Python's math (which calls glibc)
_FUNCTIONS = {
    "exp": (math.exp, _libm("expf", 1, ctypes.c_float)),
    "log": (math.log, _libm("logf", 1, ctypes.c_float)),
    "tanh": (math.tanh, _libm("tanhf", 1, ctypes.c_float)),
    "sin": (math.sin, _libm("sinf", 1, ctypes.c_float)),
    "cos": (math.cos, _libm("cosf", 1, ctypes.c_float)),
    "erf": (math.erf, _libm("erff", 1, ctypes.c_float)),
    "pow": (_libm("pow", 2, ctypes.c_double), _libm("powf", 2, ctypes.c_float)),
    # a·b + c rounded once (IEEE 754's fusedMultiplyAdd), as LLVM's fma intrinsic computes
    "fma": (_libm("fma", 3, ctypes.c_double), _libm("fmaf", 3, ctypes.c_float)),
}


def _apply_libm(fn: str, args: list, dtype: np.dtype):
    f64, f32 = _FUNCTIONS[fn]
    f = f64 if dtype == np.float64 else f32
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=dtype) for a in args])
    flat = [a.ravel().tolist() for a in arrays]
    try:
        out = [f(*xs) for xs in zip(*flat, strict=True)]
    except (ValueError, OverflowError):  # Python's math raises where C gives inf or nan
        out = [_c_double(fn)(*xs) for xs in zip(*flat, strict=True)]
    return np.array(out, dtype=dtype).reshape(arrays[0].shape)


def _c_double(fn: str):
    return _libm(fn, 2 if fn == "pow" else 1, ctypes.c_double)


@dataclass
class KOp:
    name: str
    operands: list[int]
    results: list[int]
    attrs: dict = field(default_factory=dict)
    body: list = field(default_factory=list)  # a loop's ops
    args: list[int] = field(default_factory=list)  # a loop's block arguments (index, iter args)


@dataclass
class Kernel:
    name: str
    kind: str
    arith: np.dtype
    args: list[int]
    elements: list[str]
    body: list[KOp]
    depth: int  # the deepest nesting of parallel loops
    ops: int = 1  # the PSK-Core ops it computes (more than one for a fusion group)
    quant: dict = field(default_factory=dict)  # integer-weight inputs (presk/kernel/weights.py)


_PREDICATES = {1: "eq", 2: "gt", 3: "ge", 4: "lt", 5: "le"}
_IPREDICATES = {0: "eq", 1: "ne", 2: "lt", 3: "le", 4: "gt", 5: "ge"}
_COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "lt": np.less,
    "le": np.less_equal,
}


def read_kernel(f) -> Kernel:
    """A kernel `func.func` as Python, once."""
    ids: dict = {}

    def vid(v) -> int:
        if v not in ids:
            ids[v] = len(ids)
        return ids[v]

    def read_block(block) -> tuple[list[KOp], int, bool]:
        ops, depth, scratch = [], 0, False
        for op in block.operations:
            op = op.operation
            k = KOp(op.name, [vid(v) for v in op.operands], [vid(r) for r in op.results])
            if op.results:  # the element type of a real result: conversions and mulf use it
                t = op.results[0].type
                element = str(t.element_type if isinstance(t, ir.VectorType) else t)
                if element in ELEMENTS:
                    k.attrs["element"] = element
            if op.name == "arith.constant":
                attr = op.attributes["value"]
                k.attrs["value"] = attr.value if hasattr(attr, "value") else float(attr)
                k.attrs["type"] = str(op.results[0].type)
            elif op.name in ("arith.cmpf", "arith.cmpi"):
                k.attrs["predicate"] = ir.IntegerAttr(op.attributes["predicate"]).value
            elif op.name == "psk_kernel.call":
                k.attrs["fn"] = ir.StringAttr(op.attributes["fn"]).value
                k.attrs["presk"] = functions.IMPL in op.attributes
            elif op.name in ("psk_kernel.load", "arith.sitofp", "arith.extui", "arith.index_cast"):
                k.attrs["type"] = str(op.results[0].type)
                k.attrs["lanes"] = _lanes(op.results[0].type)
            elif op.name == "psk_kernel.store":
                k.attrs["lanes"] = _lanes(op.operands[0].type)
            elif op.name == "vector.shuffle":
                k.attrs["mask"] = list(ir.DenseI64ArrayAttr(op.attributes["mask"]))
            elif op.name == "psk_kernel.scratch":
                k.attrs["shape"] = buffer_parts(op.results[0].type)[1]
                scratch = True
            elif op.name == "scf.for":
                body = op.regions[0].blocks[0]
                k.args = [vid(a) for a in body.arguments]
                k.body, inner, has_scratch = read_block(body)
                # a loop holding a scratch buffer runs one iteration at a time: each has its own
                parallel = "psk_kernel.parallel" in op.attributes and not has_scratch
                k.attrs["parallel"] = parallel
                depth = max(depth, inner + (1 if parallel else 0))
                scratch |= has_scratch
            ops.append(k)
        return ops, depth, scratch

    block = f.regions[0].blocks[0]
    args = [vid(a) for a in block.arguments]
    body, depth, _ = read_block(block)
    elements = []
    for a in block.arguments:
        elements.append(str(a.type).split("<", 1)[1].split(",", 1)[0].strip())
    kind = ir.StringAttr(f.attributes["psk_kernel.kernel"]).value
    machine = ir.StringAttr(f.attributes["psk_kernel.type"]).value
    arith = np.dtype(np.float64) if machine == "f64" else np.dtype(np.float32)
    name = ir.StringAttr(f.attributes["sym_name"]).value
    ops = f.attributes["psk_kernel.ops"].value if "psk_kernel.ops" in f.attributes else 1
    return Kernel(name, kind, arith, args, elements, body, depth, ops, quant_inputs(f))


class _Run:
    def __init__(self, kernel: Kernel, buffers: list[np.ndarray]):
        self.k = kernel
        self.buffers = buffers
        self.env: dict[int, object] = {}
        for i, (a, b) in enumerate(zip(kernel.args, buffers, strict=True)):
            self.env[a] = ("buffer", i)
            del b

    def block(self, ops: list[KOp], depth: int):
        env, arith = self.env, self.k.arith
        for op in ops:
            name = op.name
            if name == "scf.for":
                self.loop(op, depth)
                continue
            if name in ("scf.yield", "func.return"):
                return [env[v] for v in op.operands]
            a = [env[v] for v in op.operands]
            r = op.results[0] if op.results else None
            if name == "psk_kernel.load":
                buf = self.buffers[a[0][1]]
                value = buf[_lane_index(a[1:], op.attrs["lanes"])]
                if buf.dtype.kind == "f" and buf.dtype.itemsize < arith.itemsize:  # widened
                    value = np.asarray(value).astype(arith)
                env[r] = value
            elif name == "psk_kernel.store":
                buf = self.buffers[a[1][1]]
                value = np.asarray(a[0])
                if buf.dtype != value.dtype:
                    value = value.astype(buf.dtype)
                idx = _lane_index(a[2:], op.attrs["lanes"])
                if idx:
                    shape = np.broadcast_shapes(*[np.shape(i) for i in idx], value.shape)
                    idx = tuple(np.broadcast_to(i, shape) for i in idx)
                    buf[idx] = np.broadcast_to(value, shape)
                else:
                    buf[...] = value
            elif name == "arith.constant":
                t = op.attrs["type"]
                env[r] = (
                    arith.type(op.attrs["value"]) if t in ("f32", "f64") else int(op.attrs["value"])
                )
            elif name == "arith.addf":
                env[r] = np.add(a[0], a[1], dtype=arith)
            elif name == "arith.subf":
                env[r] = np.subtract(a[0], a[1], dtype=arith)
            elif name == "arith.mulf":  # in f32 in an f64 kernel, dequantising a weight
                env[r] = np.multiply(a[0], a[1], dtype=ELEMENTS[op.attrs["element"]])
            elif name == "arith.divf":
                env[r] = np.divide(a[0], a[1], dtype=arith)
            elif name == "arith.negf":
                env[r] = np.negative(a[0], dtype=arith)
            elif name == "math.sqrt":
                env[r] = np.sqrt(a[0], dtype=arith)
            elif name == "math.absf":
                env[r] = np.abs(a[0]).astype(arith)
            elif name == "psk_kernel.call" and op.attrs["presk"]:
                env[r] = functions.evaluate(op.attrs["fn"], a[0])
            elif name == "psk_kernel.call":
                env[r] = _apply_libm(op.attrs["fn"], a, arith)
            elif name == "math.fma":
                env[r] = _apply_libm("fma", a, arith)
            elif name == "arith.cmpf":
                env[r] = _COMPARE[_PREDICATES[op.attrs["predicate"]]](a[0], a[1])
            elif name == "arith.cmpi":
                env[r] = _COMPARE[_IPREDICATES[op.attrs["predicate"]]](a[0], a[1])
            elif name == "arith.select":
                env[r] = np.where(a[0], a[1], a[2])
            elif name == "arith.andi":
                env[r] = np.bitwise_and(a[0], a[1])
            elif name == "arith.xori":
                env[r] = np.bitwise_xor(a[0], a[1])
            elif name == "arith.subi":
                env[r] = np.subtract(a[0], a[1])
            elif name == "arith.shrsi":
                env[r] = np.right_shift(a[0], a[1])
            elif name == "vector.shuffle":  # lanes of the two operands, picked by the mask
                both = np.concatenate(np.broadcast_arrays(a[0], a[1]), axis=-1)
                env[r] = both[..., op.attrs["mask"]]
            elif name == "psk_kernel.scratch":
                self.buffers.append(np.full(op.attrs["shape"], np.nan, dtype=arith))
                env[r] = ("buffer", len(self.buffers) - 1)
            elif name == "vector.broadcast":
                env[r] = np.expand_dims(np.asarray(a[0]), -1)
            elif name in ("arith.truncf", "arith.extf"):
                env[r] = np.asarray(a[0]).astype(ELEMENTS[op.attrs["element"]])
            elif name == "arith.divui":
                env[r] = a[0] // a[1]
            elif name == "arith.remui":
                env[r] = a[0] % a[1]
            elif name == "arith.addi":
                env[r] = a[0] + a[1]
            elif name == "arith.muli":
                env[r] = a[0] * a[1]
            elif name == "arith.sitofp":
                env[r] = np.asarray(a[0]).astype(ELEMENTS[op.attrs["element"]])
            elif name == "arith.index_cast":
                env[r] = np.asarray(a[0]).astype(np.int64) if np.ndim(a[0]) else int(a[0])
            elif name == "arith.extui":
                env[r] = np.asarray(a[0]).astype(np.int8)
            else:
                raise AssertionError(f"the kernel evaluator cannot run {name}")
        return []

    def loop(self, op: KOp, depth: int) -> None:
        lo, hi, step = (self.env[v] for v in op.operands[:3])
        carried = [self.env[v] for v in op.operands[3:]]
        iv, *iter_args = op.args
        if op.attrs["parallel"] and not carried:
            shape = [1] * self.k.depth
            shape[depth] = len(range(lo, hi, step))
            self.env[iv] = np.arange(lo, hi, step).reshape(shape)
            self.block(op.body, depth + 1)
            return
        for i in range(lo, hi, step):
            self.env[iv] = i
            for a, c in zip(iter_args, carried, strict=True):
                self.env[a] = c
            carried = self.block(op.body, depth)
        for res, c in zip(op.results, carried, strict=True):
            self.env[res] = c


def _lanes(t: ir.Type) -> int:
    return t.shape[0] if isinstance(t, ir.VectorType) else 1


def _lane_index(indices: list, lanes: int) -> tuple:
    """The indices of a load or store; for n lanes, a trailing lane axis over n consecutive
    elements along the buffer's last axis."""
    if lanes == 1:
        return tuple(indices)
    *lead, last = (np.asarray(i) for i in indices)
    return (*(i[..., None] for i in lead), last[..., None] + np.arange(lanes))


def run_kernel(kernel: Kernel, buffers: list[np.ndarray]) -> None:
    """Run `kernel` on its buffers (the inputs, then the output, written in place)."""
    for b, e in zip(buffers, kernel.elements, strict=True):
        assert b.dtype == ELEMENTS[e], (kernel.name, b.dtype, e)
    # IEEE arithmetic: an overflow to inf or a NaN is a value, as in native code, not a
    # warning for numpy to print
    with np.errstate(all="ignore"):
        _Run(kernel, list(buffers)).block(kernel.body, 0)
