"""presk's own exp and erf for f32 kernels: `"functions": "presk"` in a realization.

The C library's `expf` and `erff` are a call an element, which no loop can put in vector
lanes. These are written once as a sequence of IEEE operations in f64 (the f32 argument
widened exactly, the result rounded once to f32), with no fused multiply-add, so that the
kernel evaluator (numpy, `evaluate`) and native code (the same operations as
`arith` ops, `expand`, in as many lanes as the loop has) give the same bits on every
machine. Their error against the exact function is under 10⁻¹² relative before the final
rounding, so the f32 result is the correctly rounded one but where the exact value lies
within that of a rounding boundary.

exp(x): x clamped to [-104, 89] (beyond, the f32 result is 0 or inf either way), k the
nearest integer to x·log2(e) (by adding and subtracting 1.5·2⁵², which rounds to an
integer), r = x − k·ln 2 (|r| ≤ 0.35), eʳ by its Taylor polynomial of degree 11 (error
under 10⁻¹⁴), times 2ᵏ built from its exponent bits (exact: 2⁻¹⁵⁰ … 2¹²⁹ are normal f64).
A NaN returns itself.

erf(x): x clamped to [-4, 4] (erf(4) rounds to 1 in f32), then x·f(x²), f(s) =
erf(√s)/√s a Chebyshev series of degree 22 on s ∈ [0, 16] summed by Clenshaw's
recurrence (relative error about 10⁻¹²; fitted against mpmath at 40 digits). The sign
and -0 follow x; a NaN propagates.
"""

from __future__ import annotations

import math

import numpy as np
from mlir import ir
from mlir.dialects import arith

from presk.ir.ops import walk_ops

FUNCTIONS = ("exp", "erf")  # the calls "functions": "presk" replaces
IMPL = "psk_kernel.impl"  # the attribute that marks a call as presk's

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_SHIFTER = 6755399441055744.0  # 1.5·2⁵²: x + it − it is x rounded to an integer
_EXP_LO, _EXP_HI = -104.0, 89.0
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(12))
_ERF_BOUND = 4.0
_ERF_CHEBYSHEV = (
    0.4859129569028632,
    -0.34540785500495025,
    0.16182910121364602,
    -0.0764827561055089,
    0.034669936800507416,
    -0.014811864147814777,
    0.0059229379562319925,
    -0.0022118406588101333,
    0.0007714154278401327,
    -0.00025159658780942915,
    7.688658221068913e-05,
    -2.206549593887176e-05,
    5.961274041385759e-06,
    -1.5197750712614826e-06,
    3.664930432299131e-07,
    -8.378998363862916e-08,
    1.820144870230071e-08,
    -3.764477981283625e-09,
    7.427366281447368e-10,
    -1.4005319586893712e-10,
    2.5282739750031254e-11,
    -4.3766406920782284e-12,
    7.274474841660388e-13,
)


class _Numpy:
    """The operations over numpy arrays of f64 (and i64), each rounded as IEEE says."""

    def const(self, c: float):
        return np.float64(c)

    def widen(self, x):
        return np.asarray(x, dtype=np.float32).astype(np.float64)

    def narrow(self, x):
        with np.errstate(over="ignore"):  # beyond f32's range: inf, as truncf rounds
            return np.asarray(x, dtype=np.float64).astype(np.float32)

    def add(self, a, b):
        return np.add(a, b, dtype=np.float64)

    def sub(self, a, b):
        return np.subtract(a, b, dtype=np.float64)

    def mul(self, a, b):
        return np.multiply(a, b, dtype=np.float64)

    def clamp(self, x, lo: float, hi: float):  # a NaN stays a NaN
        x = np.where(x < lo, lo, x)
        return np.where(x > hi, hi, x)

    def is_nan(self, x):
        return np.isnan(x)

    def select(self, c, a, b):
        return np.where(c, a, b)

    def power_of_two(self, k):  # k an integral f64 in [-150, 129]: 2**k exactly
        bits = (k.astype(np.int64) + 1023) << 52
        return np.asarray(bits, dtype=np.int64).view(np.float64)


class _Mlir:
    """The same operations as `arith` ops at the builder's insertion point, on scalars or
    on vectors of `shape`."""

    def __init__(self, shape: list[int] | None):
        self.shape = shape

    def _type(self, element: ir.Type) -> ir.Type:
        return ir.VectorType.get(self.shape, element) if self.shape else element

    def _splat(self, element: ir.Type, attr: ir.Attribute):
        if not self.shape:
            return arith.constant(element, attr)
        t = self._type(element)
        return arith.constant(t, ir.DenseElementsAttr.get_splat(t, attr))

    def const(self, c: float):
        f64 = ir.F64Type.get()
        return self._splat(f64, ir.FloatAttr.get(f64, c))

    def widen(self, x):
        return arith.extf(self._type(ir.F64Type.get()), x)

    def narrow(self, x):
        return arith.truncf(self._type(ir.F32Type.get()), x)

    def add(self, a, b):
        return arith.addf(a, b)

    def sub(self, a, b):
        return arith.subf(a, b)

    def mul(self, a, b):
        return arith.mulf(a, b)

    def clamp(self, x, lo: float, hi: float):
        low, high = self.const(lo), self.const(hi)
        x = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, x, low), low, x)
        return arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, high), high, x)

    def is_nan(self, x):
        return arith.cmpf(arith.CmpFPredicate.UNO, x, x)

    def select(self, c, a, b):
        return arith.select(c, a, b)

    def power_of_two(self, k):
        i64 = ir.IntegerType.get_signless(64)
        n = arith.fptosi(self._type(i64), k)
        n = arith.addi(n, self._splat(i64, ir.IntegerAttr.get(i64, 1023)))
        n = arith.shli(n, self._splat(i64, ir.IntegerAttr.get(i64, 52)))
        return arith.bitcast(self._type(ir.F64Type.get()), n)


def _exp(o, x32):
    x = o.widen(x32)
    nan = o.is_nan(x)
    t = o.clamp(o.select(nan, o.const(0.0), x), _EXP_LO, _EXP_HI)
    k = o.sub(o.add(o.mul(t, o.const(_LOG2E)), o.const(_SHIFTER)), o.const(_SHIFTER))
    r = o.sub(t, o.mul(k, o.const(_LN2)))
    p = o.const(_TAYLOR[-1])
    for c in reversed(_TAYLOR[:-1]):
        p = o.add(o.mul(p, r), o.const(c))
    return o.narrow(o.select(nan, x, o.mul(p, o.power_of_two(k))))


def _erf(o, x32):
    x = o.clamp(o.widen(x32), -_ERF_BOUND, _ERF_BOUND)
    s = o.mul(x, x)
    u2 = o.sub(o.mul(s, o.const(0.25)), o.const(2.0))  # 2u, u = s/8 - 1
    b1, b2 = o.const(0.0), o.const(0.0)
    for c in reversed(_ERF_CHEBYSHEV[1:]):
        b1, b2 = o.add(o.sub(o.mul(u2, b1), b2), o.const(c)), b1
    u = o.mul(u2, o.const(0.5))
    f = o.add(o.sub(o.mul(u, b1), b2), o.const(_ERF_CHEBYSHEV[0]))
    return o.narrow(o.mul(x, f))


_DEFINITIONS = {"exp": _exp, "erf": _erf}


def calls(f: ir.Operation) -> list[ir.Operation]:
    """Kernel `f`'s calls of exp and erf, the ones presk's own may compute."""
    return [
        c
        for c in walk_ops(f, "psk_kernel.call")
        if ir.StringAttr(c.attributes["fn"]).value in FUNCTIONS
    ]


def marked(f: ir.Operation) -> bool:
    """Whether kernel `f` computes presk's own exp and erf."""
    return any(IMPL in c.attributes for c in calls(f))


def mark(f: ir.Operation, ours: bool) -> None:
    """Make every exp and erf of kernel `f` presk's own (`ours`) or the C library's."""
    for c in calls(f):
        if ours:
            c.attributes[IMPL] = ir.StringAttr.get("presk", f.context)
        elif IMPL in c.attributes:
            del c.attributes[IMPL]


def evaluate(fn: str, x) -> np.ndarray:
    """presk's `fn` of an f32 array, as the kernel evaluator computes it."""
    return _DEFINITIONS[fn](_Numpy(), x)


def expand(fn: str, x: ir.Value) -> ir.Value:
    """presk's `fn` of an f32 (or vector of f32) value as arith ops at the insertion point."""
    t = x.type
    shape = list(t.shape) if isinstance(t, ir.VectorType) else None
    return _DEFINITIONS[fn](_Mlir(shape), x)
