"""The certified reference's arithmetic: numpy object arrays of Arb balls (python-flint).

Every element is a ball, a midpoint at the run's precision and a radius, which contains
the exact real value of the program on its inputs: each operation is Arb's, whose result
provably contains the exact result over every point of its operands' balls (the
transcendental functions with Arb's rigorous error bounds). A sum may therefore add its
terms in any order, and contractions run as FLINT's block products of `arb_mat`s, which
is where the ball backend gains its speed over MPFR numbers added one at a time.

What Arb cannot decide stays undecided: a comparison of balls that overlap has no
certain answer. Where the result is still a real (max, relu, abs, sign, a row's
maximum) it is the union of both sides; where it is a mask or an index (gt, argmax, a
sample), the run stops with E8005, naming the element (the ball backend runs it again at
more bits). A result that is no longer finite (a divisor or a logarithm's ball that
reaches zero) stops the same way; the exact value itself having none (the log of an exact
0) is E8001, as on the MPFR reference.

The precision is FLINT's context's (`context(bits)`), which the ball backend enters for a
run at its working precision. Where the radii leave fewer bits meaningful, a product's
operands are rounded, and exp, log, erf and the rest evaluated, a few bits past their
accuracy (`trimmed`, `following`): what they cost grows with the bits they carry. The
functions below share their names with presk/prims/exact.py where the primitives' rules
use both.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager

import flint
import gmpy2
import numpy as np
from flint import arb, arb_mat

from presk.constants import MAX_BITS, const_value
from presk.errors import RuntimeDataError

# Below this a ball's midpoint is coarser than its radius, a 30-bit magnitude.
MIN_BITS = 32
BITS = (MIN_BITS, MAX_BITS)
CODE = "E8005"  # a ball too wide for an answer: more bits may narrow it


# What the ball reference costs, for its expected time (as presk/prims/exact.py's): a
# multiply-add inside FLINT's matrix products, and an element of any other primitive.
SECONDS_PER_TERM = 1e-8
SECONDS_PER_ELEMENT = 1.5e-7


def number_bytes(bits: int) -> int:
    """The memory one ball takes in an object array: the pointer, python-flint's object
    (two limbs of midpoint inside it), and past 128 bits its midpoint's limbs apart."""
    limbs = -(-bits // 64)
    return 8 + 72 + (8 * limbs + 16 if limbs > 2 else 0)


@contextmanager
def context(bits: int):
    """FLINT's context at `bits` of precision for the run (restored after)."""
    saved = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = saved


def bits() -> int:
    return flint.ctx.prec


def number(x) -> arb:
    """A constant as a ball: a whole number exactly, decimal text as Arb encloses it."""
    return arb(x if isinstance(x, int) else str(x))


ZERO, ONE = arb(0), arb(1)


def const(text: str) -> arb:
    """A constant's text (presk/constants.py) as a ball that contains its exact value."""
    return const_value(text, BALL_FUNCTIONS)


BALL_FUNCTIONS = {
    "number": number,
    "sqrt": arb.sqrt,
    "exp": arb.exp,
    "log": arb.log,
    "pi": arb.pi,
    "inf": arb.pos_inf,
}


def objects(items, shape) -> np.ndarray:
    """An object array of `shape` from a flat sequence of balls (numpy would try to read
    each ball as a sequence)."""
    out = np.empty(math.prod(shape), dtype=object)
    out[:] = list(items)
    return out.reshape(shape)


_to_ball = np.frompyfunc(arb, 1, 1)


def exact(a: np.ndarray) -> np.ndarray:
    """Machine numbers (float or int) as balls of radius 0, whatever the precision."""
    a = np.asarray(a)
    if a.dtype == object:
        return a
    py = a.astype(np.int64 if a.dtype.kind in "iub" else np.float64)
    return np.asarray(_to_ball(py.astype(object) if a.dtype.kind in "iub" else py), dtype=object)


def ufunc(fn) -> np.ufunc:
    return np.frompyfunc(fn, 1, 1)


# ---- precision that follows accuracy ------------------------------------------------------

TRIM_GUARD = 8  # the bits a midpoint keeps past its ball's accuracy


def _accuracy(x: arb) -> float:
    """The bits of `x` its radius leaves meaningful, relative to |x| or to 1, whichever is
    larger (a function of x near 0, exp(x) or cos(x), can be as accurate as x is near
    0); unbounded where the radius is 0, or below float64's range."""
    radius = float(x.rad())
    return max(x.rel_accuracy_bits(), -math.log2(radius)) if radius else math.inf


def following_bits(a: np.ndarray) -> int | None:
    """The precision a few bits past the accuracy of the most accurate balls among a
    sample of `a`, past which its midpoints' bits mean nothing; None where that is the
    run's precision or more (a sample holding an exact ball, for one)."""
    flat = a.reshape(-1)
    if not flat.size:
        return None
    keep = max(_accuracy(x) for x in flat[:: max(1, flat.size // 64)]) + TRIM_GUARD
    return max(MIN_BITS, math.ceil(keep)) if keep < bits() else None


def trimmed(a: np.ndarray) -> np.ndarray:
    """`a` with its midpoints rounded to `following_bits`, each rounding added to its
    radius: a product's cost grows with its operands' midpoints, past what their radii
    leave meaningful. Machine numbers (calibration's operands) stay as they are."""
    keep = following_bits(a) if a.size and isinstance(a.flat[0], arb) else None
    if keep is None:
        return a
    with context(keep):
        return np.positive(a)


def following(fn) -> Callable[[np.ndarray], np.ndarray]:
    """The function `fn` element by element at `following_bits` of its operand: Arb
    evaluates exp or erf at the precision it is asked for, which costs past what the
    operand's radius leaves meaningful."""
    each = ufunc(fn)

    def apply(x: np.ndarray) -> np.ndarray:
        keep = following_bits(x)
        if keep is None:
            return each(x)
        with context(keep):
            return each(x)

    return apply


exp = following(arb.exp)
log = following(arb.log)
sqrt = ufunc(arb.sqrt)
tanh = following(arb.tanh)
sin = following(arb.sin)
cos = following(arb.cos)
erf = following(arb.erf)
erfc = following(arb.erfc)
fabs = ufunc(abs)
_maximum = np.frompyfunc(arb.max, 2, 1)
_minimum = np.frompyfunc(arb.min, 2, 1)
_finite = np.frompyfunc(arb.is_finite, 1, 1)
_exact = np.frompyfunc(arb.is_exact, 1, 1)
_mid = np.frompyfunc(arb.mid, 1, 1)
_rad = np.frompyfunc(lambda x: float(x.rad()), 1, 1)
_abs_upper = np.frompyfunc(arb.abs_upper, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:
    """x · Φ(x) as (x / 2) · erfc(−x / √2): the same real as the reference's
    x · (1 + erf(x / √2)) / 2, in one operation fewer, and where Φ(x) is small (x well
    below 0) without the cancellation of 1 + erf."""
    return (x * arb(0.5)) * erfc(x * (-1 / arb(2).sqrt()))


def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b; by b's reciprocal where b is broadcast over a (one division a divisor, then
    products, which cost half as much)."""
    if b.size < np.broadcast(a, b).size:
        return a * (ONE / b)
    return a / b


def maximum(a, b) -> np.ndarray:
    """max(a, b) element by element: a ball that contains the larger of any two points,
    the union of both where they overlap."""
    return np.asarray(_maximum(a, b), dtype=object)


def minimum(a, b) -> np.ndarray:
    return np.asarray(_minimum(a, b), dtype=object)


def finite(a: np.ndarray) -> np.ndarray:
    return np.asarray(_finite(a), dtype=bool) if a.size else np.ones(a.shape, bool)


def is_exact(a: np.ndarray) -> np.ndarray:
    """Where a ball is one point (radius 0)."""
    return np.asarray(_exact(a), dtype=bool) if a.size else np.ones(a.shape, bool)


def radius(a: np.ndarray) -> np.ndarray:
    """Each ball's radius as float64, exactly (a 30-bit magnitude; +∞ past float64's)."""
    return np.asarray(_rad(a), dtype=np.float64) if a.size else np.zeros(a.shape)


def upper(a: np.ndarray) -> np.ndarray:
    """max |x| over each ball, rounded up to float64: a certified bound of |x|, at most
    one float64 step above Arb's."""
    a = np.asarray(a, dtype=object)
    if not a.size:
        return np.zeros(a.shape)
    bound = np.asarray(_abs_upper(a), dtype=object)  # points (radius 0)
    near = to_float64(bound)
    below = np.asarray(_to_ball(near) < bound, dtype=bool)
    return np.where(below, np.nextafter(near, np.inf), near)


def to_float64(a: np.ndarray) -> np.ndarray:
    """Each midpoint rounded to the nearest float64."""
    a = np.asarray(a, dtype=object)
    return (
        np.asarray(np.frompyfunc(float, 1, 1)(a), dtype=np.float64) if a.size else np.zeros(a.shape)
    )


def midpoint(x: arb) -> gmpy2.mpfr:
    """A ball's midpoint as an MPFR number, exactly."""
    m, e = x.mid().man_exp()
    m, e = int(m), int(e)
    with gmpy2.context(precision=max(2, m.bit_length())):
        return gmpy2.mul_2exp(gmpy2.mpfr(m), e)


midpoints = np.frompyfunc(midpoint, 1, 1)


def certified_bits(a: np.ndarray) -> int | None:
    """The bits of a tensor's largest |value| that its radii leave certain, ⌊log2(the
    largest |midpoint| / the largest radius)⌋ (0 when a radius reaches the largest value;
    None when every ball is exact). A radius below float64's range counts as its least
    number, which can only lower the count."""
    rad = radius(a)
    widest = float(np.max(rad)) if rad.size else 0.0
    if widest == 0.0:
        if is_exact(a).all():
            return None
        widest = 5e-324
    largest = float(np.max(np.abs(to_float64(a))))
    if not largest > widest:
        return 0
    return math.floor(math.log2(largest) - math.log2(widest))


def correct_bits(a: np.ndarray) -> int | None:
    """The bits of every ball's value its radius leaves certain: the least of Arb's
    relative accuracy over the inexact elements; None when every ball is exact."""
    found = [max(0, x.rel_accuracy_bits()) for x in a.flat if not x.is_exact()]
    return min(found, default=None)


# ---- comparisons: a certain answer, or the union of both sides, or a refusal -----------


def refuse(what: str, at: tuple, detail: str) -> RuntimeDataError:
    index = list(at) if at else ""
    return RuntimeDataError(
        f"{what}{index}: {detail}: no certain answer at {bits()} bits of working precision",
        code=CODE,
    )


def greater(a: np.ndarray, b: np.ndarray, what: str = "gt's operands") -> np.ndarray:
    """a > b as a mask, where every element is certain; E8005 at the first that is not."""
    gt = np.asarray(a > b, dtype=bool)
    le = np.asarray(a <= b, dtype=bool)
    unsure = ~(gt | le)
    if unsure.any():
        at = tuple(int(i) for i in np.argwhere(unsure)[0])
        x, y = np.broadcast_to(a, unsure.shape)[at], np.broadcast_to(b, unsure.shape)[at]
        raise refuse(what, at, f"{x} and {y} overlap")
    return gt


def relu(x: np.ndarray) -> np.ndarray:
    return maximum(x, ZERO)


_NEG_ONE = arb(-1)


def _sign_of(x: arb) -> arb:
    if x > 0:
        return ONE
    if x < 0:
        return _NEG_ONE
    if x.is_zero():
        return ZERO
    # the signs the ball's points have, as one ball
    found = [s for s, can in ((_NEG_ONE, x.lower() < 0), (ZERO, True), (ONE, x.upper() > 0)) if can]
    out = found[0]
    for s in found[1:]:
        out = out.union(s)
    return out


sign = ufunc(_sign_of)


def row_max(y: np.ndarray) -> np.ndarray:
    """The maximum along the last axis: a ball containing the largest of any points."""
    return np.asarray(_maximum.reduce(y, axis=-1), dtype=object)


def shift(y: np.ndarray) -> np.ndarray:
    """A point near each row's maximum along the last axis (the largest midpoint rounded
    to float64, exact): softmax and cross-entropy subtract it to keep exp in range, and
    their exact value does not depend on which number is subtracted."""
    near = to_float64(y).max(axis=-1) if y.size else np.zeros(y.shape[:-1])
    if np.isfinite(near).all():
        return exact(near)
    return row_max(np.asarray(_mid(y), dtype=object))  # past float64's range


def last_maxima(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the index of the last of equal maxima along the last axis where it is certain,
    the rows where it is not, the elements that can be their row's maximum): an element
    can be if its ball reaches the greatest lower end of its row; equal exact points are
    ties, which the last wins."""
    n = y.shape[-1]
    lows = np.asarray(np.frompyfunc(arb.lower, 1, 1)(y), dtype=object)
    floor = row_max(lows)[..., None]
    can = ~np.asarray(y < floor, dtype=bool)  # not certainly below the row's floor
    last = n - 1 - np.argmax(can[..., ::-1], axis=-1)
    chosen = np.take_along_axis(y, last[..., None], axis=-1)
    tie = np.asarray(_exact(y), dtype=bool) & np.asarray(y == chosen, dtype=bool)
    rival = can & ~tie & (np.arange(n) != last[..., None])
    unsure = rival.any(axis=-1)
    return last, unsure, can


def row_argmax(y: np.ndarray, what: str = "argmax") -> np.ndarray:
    """The index of the last of equal maxima along the last axis; E8005 where two
    elements' balls could each be the maximum."""
    last, unsure, _ = last_maxima(y)
    if unsure.any():
        at = tuple(int(i) for i in np.argwhere(unsure)[0])
        raise refuse(what, at, "two elements' balls could each be the row's maximum")
    return last


# ---- sums and products ------------------------------------------------------------------


def sequential_sum(x: np.ndarray, axes) -> np.ndarray:
    """Sum over `axes` (a ball's sum contains the exact one in any order)."""
    axes = tuple(sorted(a % x.ndim for a in axes)) if x.ndim else ()
    return np.asarray(np.add.reduce(x, axis=axes, initial=ZERO), dtype=object)


def contract(a: np.ndarray, la, b: np.ndarray, lb, out) -> np.ndarray:
    """Σ over the labels of both `la` and `lb` that `out` lacks, of a · b, the result's
    axes labelled `out`: one `arb_mat` product for each index of the labels all three
    share (a batch), each operand laid out as a matrix (kept labels × summed labels)."""
    sizes = dict(zip(la, a.shape, strict=True)) | dict(zip(lb, b.shape, strict=True))
    batch = [x for x in out if x in la and x in lb]
    only_a = [x for x in out if x in la and x not in lb]
    only_b = [x for x in out if x in lb and x not in la]
    summed = [x for x in la if x in lb and x not in out]
    nb, na, nn = (math.prod(sizes[x] for x in g) for g in (batch, only_a, only_b))
    k = math.prod(sizes[x] for x in summed)
    am = trimmed(a).transpose([la.index(x) for x in batch + only_a + summed])
    bm = trimmed(b).transpose([lb.index(x) for x in batch + summed + only_b])
    am, bm = am.reshape(nb, na, k), bm.reshape(nb, k, nn)
    y = np.full((nb, na * nn), ZERO, dtype=object)
    for i in range(nb if k else 0):
        product = arb_mat(am[i].tolist()) * arb_mat(bm[i].tolist())
        y[i] = np.fromiter(product.entries(), dtype=object, count=na * nn)
    labels = batch + only_a + only_b
    y = y.reshape([sizes[x] for x in labels])
    return y.transpose([labels.index(x) for x in out])


# ---- results that are no longer finite -------------------------------------------------


def check_finite(what: str, out: np.ndarray, operands: list, elementwise: bool) -> None:
    """A result with no finite value: E8001 when its operands are exact (the exact
    program has no real value there), else E8005 (a ball reached a pole or the edge of a
    function's domain: more bits narrow it). An elementwise result is judged by the
    operands of its element at fault (given broadcast to its shape), any other by all."""
    ok = finite(out)
    if ok.all():
        return
    at = tuple(int(i) for i in np.argwhere(~ok)[0])
    if elementwise:
        exact_operands = all(x[at].is_exact() for x in operands)
    else:
        exact_operands = all(is_exact(x).all() for x in operands)
    if exact_operands:
        raise RuntimeDataError(f"{what} has no real value here", code="E8001")
    raise refuse(
        what,
        at,
        "an operand's ball reaches a point where it has no finite value (a divisor or a "
        "logarithm's ball containing 0)",
    )
