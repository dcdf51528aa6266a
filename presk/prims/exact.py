"""The reference's arithmetic: numpy object arrays of MPFR numbers (gmpy2).

MPFR rounds every operation correctly at the working precision, the transcendental
functions (exp, log, tanh, sin, cos, erf) included; mpmath's own numbers would round them
to within an ulp and run about nine times slower (docs/reference.md). The precision is
that of the gmpy2 context the interpreter enters for a run. Arrays hold one MPFR number
an element, and numpy's object loops apply each operation element by element in C, so
vectorising across elements changes no rounding. Sums run term by term in index order.
"""

from __future__ import annotations

import gmpy2
import numpy as np

mpfr = gmpy2.mpfr
number = mpfr  # a constant from a whole number or decimal text (presk/prims/balls.py's twin)
_to_float = np.frompyfunc(float, 1, 1)


# What the reference costs, for its expected time (the 2-core znver5 machine of
# docs/performance.md at 64 bits: an estimate's scale): a contraction's multiply-add
# (two object operations), and an element another primitive reads or writes.
SECONDS_PER_TERM = 4e-7
SECONDS_PER_ELEMENT = 1.5e-7


def number_bytes(bits: int) -> int:
    """The memory one number takes in an object array: the pointer, gmpy2's object and
    its limbs."""
    return 8 + 64 + 8 * -(-bits // 64)


def context(bits: int):
    """The context of a reference run: `bits` of precision, domain errors trapped."""
    return gmpy2.context(
        precision=bits,
        trap_invalid=True,
        trap_divzero=True,
        trap_overflow=True,
        allow_complex=False,
    )


def exact(a: np.ndarray) -> np.ndarray:
    """Machine numbers (float or int) as MPFR numbers, exactly (at 53 bits or more)."""
    a = np.asarray(a)
    if a.dtype == object:
        return a
    py = a.astype(np.int64 if a.dtype.kind in "iub" else np.float64).astype(object)
    # 0 + x rounds x once to the context's precision, as mpfr(x) does, 15 times faster.
    return np.asarray(mpfr(0) + py, dtype=object)


def to_float64(a: np.ndarray) -> np.ndarray:
    """MPFR numbers rounded to the nearest float64."""
    return np.asarray(_to_float(a), dtype=np.float64) if a.size else np.zeros(a.shape)


def ufunc(fn) -> np.ufunc:
    return np.frompyfunc(fn, 1, 1)


exp = ufunc(gmpy2.exp)
log = ufunc(gmpy2.log)
sqrt = ufunc(gmpy2.sqrt)
tanh = ufunc(gmpy2.tanh)
sin = ufunc(gmpy2.sin)
cos = ufunc(gmpy2.cos)
erf = ufunc(gmpy2.erf)
fabs = ufunc(abs)


def sequential_sum(x: np.ndarray, axes) -> np.ndarray:
    """Sum over `axes`, each result element adding its terms one by one in row-major
    index order of the summed axes."""
    axes = sorted(a % x.ndim for a in axes) if x.ndim else []
    keep = [i for i in range(x.ndim) if i not in axes]
    y = np.transpose(x, keep + axes)
    y = y.reshape(y.shape[: len(keep)] + (-1,))
    n = y.shape[-1]
    acc = y[..., 0].copy() if n else np.full(y.shape[:-1], mpfr(0), dtype=object)
    for r in range(1, n):
        acc = acc + y[..., r]
    return acc


def contract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_k a[..., k] · b[..., k] over the last axis of broadcastable arrays, k increasing."""
    acc = a[..., 0] * b[..., 0]
    for k in range(1, a.shape[-1]):
        acc = acc + a[..., k] * b[..., k]
    return acc


def greater(a: np.ndarray, b: np.ndarray, what: str = "") -> np.ndarray:
    """a > b as a mask (MPFR numbers always compare)."""
    return np.asarray(a > b).astype(bool)


def row_max(y: np.ndarray) -> np.ndarray:
    """The maximum along the last axis, read in increasing index order."""
    acc = y[..., 0].copy()
    for r in range(1, y.shape[-1]):
        acc = np.where((y[..., r] > acc).astype(bool), y[..., r], acc)
    return acc


# What softmax and cross-entropy subtract from a row before exp: its maximum.
shift = row_max
