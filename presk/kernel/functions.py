"""presk's own exp, erf and tanh for f32 kernels: `"functions": "presk"` in a realization.

The C library's `expf`, `erff` and `tanhf` are a call an element, which no loop can put
in vector lanes. These are written once as a sequence of IEEE operations in f64 (the f32
argument widened exactly, the result rounded once to f32), with no fused multiply-add, so
that the kernel evaluator (numpy, `evaluate`) and native code (the same operations as
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
erf(√s)/√s a polynomial of degree 22 in u = s/8 − 1 by Horner's rule: the Chebyshev
series fitted on s ∈ [0, 16] against mpmath at 40 digits (relative error about 10⁻¹²),
written in powers of u at 300 bits and each coefficient rounded once (which moves it by
under 10⁻¹⁶ relative; Σ|a_k| is f(0) = 2/√π, so Horner's rule loses little), two
operations a degree where Clenshaw's recurrence on the series took three. The sign and
-0 follow x; a NaN propagates.

tanh(x): m = eᵗ − 1 at t = 2x clamped to [-20, 20] (tanh(10) rounds to 1 in f32), then
m / (m + 2). m takes exp's reduction and polynomial without its final `+ 1`: eʳ − 1 =
r·Σ rⁿ/(n+1)! (n ≤ 10), which keeps its relative accuracy near 0, where eʳ − 1 from eʳ
would cancel; then m = 2ᵏ·(eʳ − 1) + (2ᵏ − 1), terms that cancel little (|m| > 0.29
once k ≠ 0). Relative error under 2.5·10⁻¹⁴ before the final rounding for |x| < 9. A
zero or NaN returns itself: m / (m + 2) would make -0 +0, and a NaN must not reach k's
conversion to an integer.
"""

from __future__ import annotations

import math

import numpy as np
from mlir import ir
from mlir.dialects import arith

from presk.ir.ops import walk_ops

FUNCTIONS = ("exp", "erf", "tanh")  # the calls "functions": "presk" replaces
RELATIVE_ERROR = 1e-12  # any one's error before its final rounding, relative to the value
IMPL = "psk_kernel.impl"  # the attribute that marks a call as presk's

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_SHIFTER = 6755399441055744.0  # 1.5·2⁵²: x + it − it is x rounded to an integer
_EXP_LO, _EXP_HI = -104.0, 89.0
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(12))
_ERF_BOUND = 4.0
_TANH_BOUND = 20.0  # on 2x: tanh(10) = 1 − 4·10⁻⁹ rounds to 1 in f32
# f(s) = erf(√s)/√s ≈ Σ a_k u^k, u = s/8 − 1: the degree-22 Chebyshev series fitted on
# [0, 16] (40 digits, mpmath) in monomial form, converted at 300 bits and rounded once
_ERF_POLY = (
    0.3535309956433875,
    -0.17657623330397998,
    0.13167511689970976,
    -0.10771044230001019,
    0.0902089938743177,
    -0.07472787165546416,
    0.05988690940127489,
    -0.04576503996993129,
    0.03306059029326429,
    -0.022474034205149908,
    0.014349838322823568,
    -0.00860434428599445,
    0.004852696546749119,
    -0.002583061073250973,
    0.0012946126486191895,
    -0.0006048216152478107,
    0.00027243508780126915,
    -0.00012652723244738838,
    5.100252133258872e-05,
    -1.2620592928599395e-05,
    4.864813353338615e-06,
    -4.5892403903366204e-06,
    1.5255679463137766e-06,
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

    def div(self, a, b):
        return np.divide(a, b, dtype=np.float64)

    def clamp(self, x, lo: float, hi: float):  # a NaN stays a NaN
        x = np.where(x < lo, lo, x)
        return np.where(x > hi, hi, x)

    def is_nan(self, x):
        return np.isnan(x)

    def is_zero_or_nan(self, x):
        return np.isnan(x) | (x == 0)

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

    def div(self, a, b):
        return arith.divf(a, b)

    def clamp(self, x, lo: float, hi: float):
        low, high = self.const(lo), self.const(hi)
        x = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, x, low), low, x)
        return arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, high), high, x)

    def is_nan(self, x):
        return arith.cmpf(arith.CmpFPredicate.UNO, x, x)

    def is_zero_or_nan(self, x):  # unordered or equal: one comparison
        return arith.cmpf(arith.CmpFPredicate.UEQ, x, self.const(0.0))

    def select(self, c, a, b):
        return arith.select(c, a, b)

    def power_of_two(self, k):
        i64 = ir.IntegerType.get_signless(64)
        n = arith.fptosi(self._type(i64), k)
        n = arith.addi(n, self._splat(i64, ir.IntegerAttr.get(i64, 1023)))
        n = arith.shli(n, self._splat(i64, ir.IntegerAttr.get(i64, 52)))
        return arith.bitcast(self._type(ir.F64Type.get()), n)


def _reduced(o, t):
    """k, r and q with t = k·ln 2 + r and eʳ = 1 + r·q: q the Taylor polynomial's terms
    from the first, by Horner's rule (t must not be a NaN)."""
    k = o.sub(o.add(o.mul(t, o.const(_LOG2E)), o.const(_SHIFTER)), o.const(_SHIFTER))
    r = o.sub(t, o.mul(k, o.const(_LN2)))
    q = o.const(_TAYLOR[-1])
    for c in reversed(_TAYLOR[1:-1]):
        q = o.add(o.mul(q, r), o.const(c))
    return k, r, q


def _exp(o, x32):
    x = o.widen(x32)
    nan = o.is_nan(x)
    k, r, q = _reduced(o, o.clamp(o.select(nan, o.const(0.0), x), _EXP_LO, _EXP_HI))
    p = o.add(o.mul(q, r), o.const(_TAYLOR[0]))
    return o.narrow(o.select(nan, x, o.mul(p, o.power_of_two(k))))


def _erf(o, x32):
    x = o.clamp(o.widen(x32), -_ERF_BOUND, _ERF_BOUND)
    u = o.sub(o.mul(o.mul(x, x), o.const(0.125)), o.const(1.0))  # in [-1, 1]
    f = o.const(_ERF_POLY[-1])
    for c in reversed(_ERF_POLY[:-1]):
        f = o.add(o.mul(f, u), o.const(c))
    return o.narrow(o.mul(x, f))


def _tanh(o, x32):
    x = o.widen(x32)
    kept = o.is_zero_or_nan(x)
    t = o.clamp(o.select(kept, o.const(0.0), o.mul(x, o.const(2.0))), -_TANH_BOUND, _TANH_BOUND)
    k, r, q = _reduced(o, t)
    scale = o.power_of_two(k)
    m = o.add(o.mul(scale, o.mul(q, r)), o.sub(scale, o.const(1.0)))  # eᵗ − 1
    return o.narrow(o.select(kept, x, o.div(m, o.add(m, o.const(2.0)))))


_DEFINITIONS = {"exp": _exp, "erf": _erf, "tanh": _tanh}


def calls(f: ir.Operation) -> list[ir.Operation]:
    """Kernel `f`'s calls of the functions presk's own may compute (FUNCTIONS)."""
    return [
        c
        for c in walk_ops(f, "psk_kernel.call")
        if ir.StringAttr(c.attributes["fn"]).value in FUNCTIONS
    ]


def marked(f: ir.Operation) -> bool:
    """Whether kernel `f` computes presk's own functions."""
    return any(IMPL in c.attributes for c in calls(f))


def mark(f: ir.Operation, ours: bool) -> None:
    """Make every call in FUNCTIONS of kernel `f` presk's own (`ours`) or the C library's."""
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
