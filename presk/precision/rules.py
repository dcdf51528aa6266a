"""The first-order rules of `presk check --precision`, one table by primitive.

A value's error is an `Err`: its ceiling on |executed − exact| split by where each part
was committed (a site, or an argument's rounding), so that the bound can name the sites
that contribute most. Every rule is linear in its inputs' errors, so the parts travel
through it independently. A rule has two halves: `carry`, how the primitive carries its
operands' errors to its result (first-order derivative bounds from the magnitudes), and
`own`, the rounding it commits computing the result before it is stored; `stores` says
whether the result is computed (rounded at its store) or only moved. Two facts spare a
result its store's rounding: `rounds`, an own rounding that ends by rounding the result
to the type it computes in (a sum's last addition, a mean's division), so that storing it
in that type rounds nothing again; and `exact_result`, a result that is one of its
operands as loaded, or its negation, or a sign, exact in the type it is stored in.

Magnitudes and errors are numpy arrays that broadcast to their value's shape, one axis
for each of its axes: of size 1 everywhere from a site's envelope (one number a value),
along the last axis from a `--grain row` envelope (one number a row), along the others
from `--grain channel` (one a channel). The scalar case is the one-element array, so every
rule has one form. A pointwise rule reads its operands aligned to its result; a move and a
sum carry each part through the primitive's own reference (`Step.apply`), so a
contraction's output row gathers the rows it reads; where a primitive's rows do not map
simply (an embedding's gather, max's derivative) a rule takes the largest over them.

A relative rule takes a value's error as proportional to its magnitude: rel(v) = err(v) /
mag(v). That is exact for a value rounded once and the envelope's assumption after that
(docs/precision.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

import numpy as np

from presk.kernel.machine import MACHINES

UNIT = {t: m.unit_roundoff for t, m in MACHINES.items()}  # unit roundoff u_t
MODELS = ("k", "normwise", "cond", "rss")
LIBM = 2  # ulps of a C library function (glibc's exp, log, tanh, erf, … are within 1)

Err = dict[str, np.ndarray]  # where an error was committed -> its share of the ceiling


def plus(*errs: Err) -> Err:
    out: Err = {}
    for e in errs:
        for where, x in e.items():
            out[where] = out[where] + x if where in out else x
    return out


def _times(x: np.ndarray, c) -> np.ndarray:
    """x·c, where a zero error stays zero whatever carries it (0·∞ = 0)."""
    with np.errstate(invalid="ignore"):
        return np.where(x == 0, 0.0, np.multiply(x, c))


def scaled(e: Err, c) -> Err:
    return {where: _times(x, c) for where, x in e.items()}


def widest(*errs: Err) -> Err:
    """Per part the largest: a ceiling on the largest of the totals (max is 1-Lipschitz)."""
    out: Err = {}
    for e in errs:
        for where, x in e.items():
            out[where] = np.maximum(out[where], x) if where in out else x
    return out


def largest(e: Err) -> Err:
    """Per part its largest element: where the elements a result reads cannot be told."""
    return {where: np.max(x) for where, x in e.items()}


def total(e: Err) -> np.ndarray:
    """The ceiling at each element: the parts added."""
    return reduce(np.add, e.values(), np.zeros(()))


def gamma(n: int, u: float) -> float:
    """Higham's γ_n = n·u / (1 − n·u): the relative error of n roundings in series."""
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def additions(order: str | None, k: int) -> int:
    """The additions on any one term's way into a k-term sum in a realization's order:
    k − 1 for sequential or blocked(W) (blocking changes no addition), and for
    interleaved(P) those of its partial of k/P terms, then the P − 1 that join them."""
    kind, _, rest = (order or "sequential").partition("(")
    if kind != "interleaved":
        return max(k - 1, 0)
    partials = min(int(rest.rstrip(")")), k)
    return math.ceil(k / partials) - 1 + partials - 1


@dataclass(frozen=True)
class Operand:
    mag: np.ndarray
    err: Err
    size: int  # elements


@dataclass(frozen=True)
class Step:
    """One op to bound: its real operands as loaded into its type (aligned to its result
    for a pointwise rule), its result's magnitude (the envelope's), the site's sums, the
    model, the unit roundoff of its arithmetic (of its accumulator, for a sum) and its sum
    order."""

    ins: list[Operand]
    mag: np.ndarray
    sums: object  # the envelope's SumStats, or None
    model: str
    u: float
    order: str | None
    row: int  # the length of the row a row-wise primitive (softmax, cross_entropy) reads
    axis: int | None  # the axis of that row
    terms: int  # k: the terms of each output element of a sum, at this call
    # The relative error of the kernel's exp, erf and tanh beyond a correctly rounded
    # result: a C library's ulps, or presk's own functions' (computed in f64, rounded once).
    function: float
    # The primitive itself on non-negative arrays broadcast to its operands' shapes (its
    # exact reference, in float64): how a move or a sum carries a per-row quantity.
    apply: Callable[[list[np.ndarray]], np.ndarray]


def _relative(s: Step, i: int, power=1.0, at_zero=math.inf) -> Err:
    """Operand i's error carried relatively: rel(result) gains |power|·rel(operand);
    where the operand is exactly zero, its error times `at_zero`."""
    x = s.ins[i]
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(x.mag > 0, np.abs(power) * s.mag / x.mag, at_zero)
    return scaled(x.err, factor)


def _moved(s: Step) -> Err:
    return widest(*(x.err for x in s.ins))


def _lipschitz(c: float) -> Callable[[Step], Err]:
    return lambda s: scaled(_moved(s), c)


def _added(s: Step) -> Err:
    return plus(*(x.err for x in s.ins))


def _product(s: Step) -> Err:
    """rel(ab) = rel(a) + rel(b); an operand exactly zero carries its error times the
    other's magnitude."""
    a, b = s.ins
    return plus(_relative(s, 0, at_zero=b.mag), _relative(s, 1, at_zero=a.mag))


def _quotient(s: Step) -> Err:
    """rel(a/b) = rel(a) + rel(b): a normaliser costs nothing beyond its own rounding."""
    return plus(_relative(s, 0), _relative(s, 1))


def _power(s: Step) -> Err:
    """d(a^b) = a^b·(b·da/a + ln a·db)."""
    a, b = s.ins
    with np.errstate(divide="ignore"):
        log_a = np.where(a.mag > 0, np.abs(np.log(a.mag)), math.inf)
    return plus(_relative(s, 0, b.mag), scaled(b.err, s.mag * log_a))


def _exp(s: Step) -> Err:
    return scaled(s.ins[0].err, s.mag)  # d exp(x) = exp(x)·dx


def _log(s: Step) -> Err:
    x = s.ins[0]
    with np.errstate(divide="ignore"):
        return scaled(x.err, np.where(x.mag > 0, 1 / x.mag, math.inf))  # d log x = dx / x


def _sqrt(s: Step) -> Err:
    return _relative(s, 0, 0.5)  # rel(√x) = rel(x) / 2


def _row_max(s: Step, a: np.ndarray, keep: bool = True) -> np.ndarray:
    """The largest of `a` along the row a row-wise primitive reads: every element of a
    row may move every result in it."""
    return np.max(a, axis=s.axis, keepdims=keep)


def _softmax(s: Step) -> Err:
    """The Jacobian of softmax is diag(p) − ppᵀ, whose ∞-norm is max_i 2·p_i·(1 − p_i)
    ≤ 1/2: half the largest of a row's logits' errors reaches its probabilities (the
    mask is exact). Under rss, the logits' errors independent, p_i's is at most
    p_i·√((1 − p_i)² + Σ_{j≠i} p_j²) ≤ √2·p_i·(1 − p_i) ≤ √2/4 times theirs."""
    c = math.sqrt(2) / 4 if s.model == "rss" else 0.5
    return {where: c * _row_max(s, e) for where, e in s.ins[0].err.items()}


def _cross_entropy(s: Step) -> Err:
    """∂/∂x of logsumexp(x) − x_t is softmax(x) − onehot(t), of 1-norm 2·(1 − p_t) ≤ 2;
    under rss, the logits' errors independent, of 2-norm √((1 − p_t)² + Σ_{j≠t} p_j²)
    ≤ √2."""
    c = math.sqrt(2) if s.model == "rss" else 2.0
    return {where: c * _row_max(s, e, keep=False) for where, e in s.ins[0].err.items()}


def _cross_entropy_vjp(s: Step) -> Err:
    """(softmax(x) − onehot(t))·ct: the softmax's rule times |ct|, plus ct's error (the
    factor's magnitude is at most 1), the cotangent repeated along the row."""
    logits, _, ct = s.ins
    along = np.expand_dims(ct.mag, s.axis)
    softmax = {where: _times(0.5 * _row_max(s, e), along) for where, e in logits.err.items()}
    return plus(softmax, {where: np.expand_dims(e, s.axis) for where, e in ct.err.items()})


def _factor(s: Step, i: int, other: float) -> float:
    """What operand i's error is multiplied by on its way through a sum whose other
    operand is at most `other` in magnitude, by --model: k: k·max|w|; normwise: √k·‖w‖₂;
    cond: Σ|wᵢ|; rss (independent errors): √Σwᵢ². Without the envelope's sums (a sum the
    calibration did not record), the plain sum's: w = `other` throughout."""
    k, sums = s.terms, s.sums
    if s.model == "k":
        return k * other
    rss = sums.rss_factors[i] if sums else math.sqrt(k) * other
    if s.model == "normwise":
        return math.sqrt(k) * rss
    return (sums.factors[i] if sums else k * other) if s.model == "cond" else rss


def _carried(s: Step, i: int, other: float, scale: float = 1.0) -> Err:
    """Operand i's error through a sum of terms xᵢ·wᵢ (`other` ≥ |wᵢ|): its largest times
    the model's factor; and under cond and rss also term by term, by the primitive run on
    the error and the other operands' magnitudes, Σ|δxᵢ|·|wᵢ| or √(scale·Σ(δxᵢ·wᵢ)²)
    (`scale` the square of a coefficient the primitive applies, a mean's 1/k), an output
    row gathering the rows it reads; and in relative terms, the operand's relative error
    times what the terms add up to, rel(x)·Σ|xᵢwᵢ| (cond) or, the terms' errors
    independent, rel(x)·√Σ(xᵢwᵢ)² (rss), the envelope's sums. All are ceilings: the
    smallest is kept."""
    factor = _factor(s, i, other)
    mags = [x.mag for x in s.ins]
    out: Err = {}
    for where, e in s.ins[i].err.items():
        out[where] = _times(np.max(e), factor)
        if s.model == "cond":
            out[where] = np.minimum(out[where], s.apply([*mags[:i], e, *mags[i + 1 :]]))
        elif s.model == "rss":
            squares = [m * m for m in mags]
            run = s.apply([*squares[:i], e * e, *squares[i + 1 :]])
            out[where] = np.minimum(out[where], np.sqrt(scale * run))
        rel = _largest_relative(e, mags[i])
        if s.sums is not None and s.model in _TERMS and math.isfinite(rel):
            out[where] = np.minimum(out[where], rel * getattr(s.sums, _TERMS[s.model]))
    return out


# What a sum's terms add up to, by model, for an operand's relative error (SumStats).
_TERMS = {"cond": "abs_sum", "rss": "rss"}


def _largest_relative(e: np.ndarray, mag: np.ndarray) -> float:
    """A value's relative error at its largest, max err / max mag (∞, which says nothing,
    for an error on a value that is exactly zero), as a relative rule takes it."""
    largest, top = float(np.max(e)), float(np.max(mag))
    return largest / top if top > 0 else (math.inf if largest > 0 else 0.0)


def _contracted(s: Step) -> Err:
    """A contraction: each operand's error through its sums."""
    a, b = s.ins
    return plus(_carried(s, 0, float(np.max(b.mag))), _carried(s, 1, float(np.max(a.mag))))


def _summed(s: Step) -> Err:
    """A plain sum: its terms are its operand's elements (w = 1)."""
    return _carried(s, 0, 1.0)


def _mean(s: Step) -> Err:
    """A mean: its terms are xᵢ/k (w = 1/k), as the envelope records them."""
    return _carried(s, 0, 1 / s.terms, scale=1 / s.terms)


def _scatter(s: Step) -> Err:
    """embed_vjp: each table row a sum of up to one cotangent row per token (which rows,
    the tokens say: the largest of the cotangent's)."""
    return scaled(largest(s.ins[0].err), s.ins[1].size)


def _moved_through(s: Step) -> Err:
    """Data moved, not computed: the primitive moves each part of its first operand's
    error as it moves the values (the other operands give a shape, no error)."""
    rest = [x.mag for x in s.ins[1:]]
    return {where: s.apply([e, *rest]) for where, e in s.ins[0].err.items()}


def _moved_anywhere(s: Step) -> Err:
    """Data moved to places its operands' values choose (max's derivative): rows do not
    map, so each part's largest, everywhere."""
    return widest(*(largest(x.err) for x in s.ins))


def _gathered(s: Step) -> Err:
    """embed: each result row is some row of the table (the tokens say which), so it
    carries the largest error of each of the table's columns."""
    table, tokens = s.ins
    lead = (1,) * tokens.mag.ndim
    return {where: np.max(e, axis=0).reshape(lead + e.shape[1:]) for where, e in table.err.items()}


# ---- what a primitive commits itself, before its store ----


def _ulps(n: float) -> Callable[[Step], np.ndarray]:
    """n roundings (or ulps of a C library function) beyond a correctly rounded result."""
    return lambda s: n * s.u * s.mag


def _function(s: Step) -> np.ndarray:
    """exp's, erf's or tanh's error beyond a correctly rounded result, whoever computes it."""
    return s.function * s.mag


def _none(s: Step) -> float:
    return 0.0


def _abs_sum(s: Step) -> np.ndarray:
    """Σ|xᵢwᵢ| at each output element: the primitive run on its operands' magnitudes,
    or the envelope's (its largest), whichever is smaller."""
    termwise = s.apply([x.mag for x in s.ins])
    return termwise if s.sums is None else np.minimum(s.sums.abs_sum, termwise)


def _sum_rounding(s: Step) -> np.ndarray:
    """Higham: a sum's c additions err by at most γ_c·Σ|xᵢ|."""
    return gamma(additions(s.order, s.terms), s.u) * _abs_sum(s)


def _mean_rounding(s: Step) -> np.ndarray:
    """The sum's, then its division by k (the terms are xᵢ/k)."""
    return gamma(additions(s.order, s.terms), s.u) * _abs_sum(s) + s.u * s.mag


def _contraction_rounding(s: Step) -> np.ndarray:
    """γ_{c+1}·Σ|xᵢwᵢ|: each term's product, then its c additions."""
    return gamma(additions(s.order, s.terms) + 1, s.u) * _abs_sum(s)


def _scatter_rounding(s: Step) -> float:
    tokens = s.ins[1].size
    return gamma(tokens - 1, s.u) * tokens * float(np.max(s.ins[0].mag))


def _gelu_rounding(s: Step) -> np.ndarray:
    """x·½·(1 + erf(x/√2)): four roundings of at most |x|, and erf's own error times |x|/2."""
    return (4 * s.u + s.function / 2) * s.ins[0].mag


def _softmax_rounding(s: Step) -> np.ndarray:
    """exp(x − max) over its row's sum: relative 2·|x − max| ≤ 4·mag(x) from the
    subtractions (in the numerator and the sum), exp's 2 ulps twice, the sum's n − 1
    additions, the division's 1."""
    return s.u * s.mag * (4 * _row_max(s, s.ins[0].mag) + s.row + 4)


def _cross_entropy_rounding(s: Step) -> np.ndarray:
    """max + log S − x_t, S = Σ exp(x − max): S relatively within 2·mag(x) (the
    subtractions) + 2 (exp's ulps) + n − 1 (its additions); log's ulps of log S ≤ log n;
    then the addition of max and the subtraction of x_t."""
    m, logn = _row_max(s, s.ins[0].mag, keep=False), math.log(s.row)
    return s.u * (2 * m + 2 + s.row - 1 + LIBM * logn + (m + logn) + s.mag)


def _cross_entropy_vjp_rounding(s: Step) -> np.ndarray:
    """softmax's rounding (of probabilities at most 1) times |ct|, then the product."""
    logits, _, ct = s.ins
    along = np.expand_dims(ct.mag, s.axis)
    return s.u * along * (4 * _row_max(s, logits.mag) + s.row + 4) + s.u * s.mag


@dataclass(frozen=True)
class Rule:
    carry: Callable[[Step], Err]
    own: Callable[[Step], object] = _none
    stores: bool = True  # the result computed, so rounded to its type at its store
    pointwise: bool = False  # its operands aligned to its result (broadcast by name)
    rounds: bool = False  # `own` ends by rounding the result to the type it computes in
    exact_result: bool = False  # the result is exact in the type its operands load in


def _pointwise(carry: Callable[[Step], Err], own: Callable[[Step], object] = _none) -> Rule:
    return Rule(carry, own, pointwise=True)


def _rounding(carry: Callable[[Step], Err], own: Callable[[Step], object]) -> Rule:
    """A sum's, a contraction's or a row's rule: its own rounding ends in its result's."""
    return Rule(carry, own, rounds=True)


MOVED = Rule(_moved_through, stores=False)
EXACT = _pointwise(_moved)  # computed without a rounding of its own: a constant, a cast
# a selection or a negation of its operands as loaded: abs, neg, relu, max, min, where
SELECTS = Rule(_moved, pointwise=True, exact_result=True)

RULES: dict[str, Rule] = {
    # values
    "const": EXACT,
    "to_real": EXACT,
    # elementwise
    "neg": SELECTS,
    "abs": SELECTS,
    "relu": SELECTS,
    "max": SELECTS,
    "min": SELECTS,
    "where": SELECTS,
    # first-order: its derivative is 0 wherever it has one; −1, 0 and 1 are exact anywhere
    "sign": Rule(lambda s: {}, pointwise=True, exact_result=True),
    "dropout": Rule(_moved, stores=False, pointwise=True),  # the identity outside training
    "add": _pointwise(_added),
    "sub": _pointwise(_added),
    "mul": _pointwise(_product),
    "div": _pointwise(_quotient),
    "pow": _pointwise(_power, _ulps(LIBM)),
    "exp": _pointwise(_exp, _function),
    "log": _pointwise(_log, _ulps(LIBM)),
    "sqrt": _pointwise(_sqrt),
    "tanh": _pointwise(_lipschitz(1.0), _function),
    "sin": _pointwise(_lipschitz(1.0), _ulps(LIBM)),
    "cos": _pointwise(_lipschitz(1.0), _ulps(LIBM)),
    "erf": _pointwise(_lipschitz(2 / math.sqrt(math.pi)), _function),
    "gelu": _pointwise(_lipschitz(1.13), _gelu_rounding),  # max |gelu'| = 1.1289…
    # contractions
    "dot": _rounding(_contracted, _contraction_rounding),
    "matmul": _rounding(_contracted, _contraction_rounding),
    "ein": _rounding(_contracted, _contraction_rounding),
    "dot_vjp_l": _rounding(_contracted, _contraction_rounding),
    "dot_vjp_r": _rounding(_contracted, _contraction_rounding),
    # reductions
    "sum": _rounding(_summed, _sum_rounding),
    "sum_to": _rounding(_summed, _sum_rounding),
    "mean": _rounding(_mean, _mean_rounding),
    "reduce_max": MOVED,
    "reduce_max_vjp": Rule(_moved_anywhere, stores=False),
    # rows
    "softmax": _rounding(_softmax, _softmax_rounding),
    "cross_entropy": _rounding(_cross_entropy, _cross_entropy_rounding),
    "cross_entropy_vjp": _rounding(_cross_entropy_vjp, _cross_entropy_vjp_rounding),
    "embed": Rule(_gathered, stores=False),
    "embed_vjp": _rounding(_scatter, _scatter_rounding),
    # axes
    "split_heads": MOVED,
    "merge_heads": MOVED,
    "rename": MOVED,
    "broadcast_like": MOVED,
    "expand": MOVED,
}
