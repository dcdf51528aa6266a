"""The first-order rules of `presk check --precision`, one table by primitive.

A value's error is an `Err`: its ceiling on |executed − exact| split by where each part
was committed (a site, or an argument's rounding), so that the bound can name the sites
that contribute most. Every rule is linear in its inputs' errors, so the parts travel
through it independently. A rule has two halves: `carry`, how the primitive carries its
operands' errors to its result (first-order derivative bounds from the magnitudes), and
`own`, the rounding it commits computing the result before it is stored; `stores` says
whether the result is computed (rounded at its store) or only moved.

Magnitudes are per site (the envelope's max |v|), so a relative rule takes a value's
error as proportional to its magnitude: rel(v) = err(v) / mag(v). That is exact for a
value rounded once and the envelope's assumption after that (docs/precision.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

UNIT = {"f64": 2.0**-53, "f32": 2.0**-24, "bf16": 2.0**-8}  # unit roundoff u_t
MODELS = ("k", "normwise", "cond", "rss")
LIBM = 2  # ulps of a C library function (glibc's exp, log, tanh, erf, … are within 1)

Err = dict[str, float]  # where an error was committed -> its share of the ceiling


def plus(*errs: Err) -> Err:
    out: Err = {}
    for e in errs:
        for where, x in e.items():
            out[where] = out.get(where, 0.0) + x
    return out


def scaled(e: Err, c: float) -> Err:
    return {where: x * c for where, x in e.items()} if c else {}


def widest(*errs: Err) -> Err:
    """Per part the largest: a ceiling on the largest of the totals (max is 1-Lipschitz)."""
    out: Err = {}
    for e in errs:
        for where, x in e.items():
            out[where] = max(out.get(where, 0.0), x)
    return out


def total(e: Err) -> float:
    return math.fsum(e.values())


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
    mag: float
    err: Err
    size: int  # elements


@dataclass(frozen=True)
class Step:
    """One op to bound: its real operands as loaded into its type, its result's magnitude
    (the envelope's), the site's sums, the model, the unit roundoff of its arithmetic
    (of its accumulator, for a sum) and its sum order."""

    ins: list[Operand]
    mag: float
    sums: object  # the envelope's SumStats, or None
    model: str
    u: float
    order: str | None
    row: int  # the length of the row a row-wise primitive (softmax, cross_entropy) reads
    terms: int  # k: the terms of each output element of a sum, at this call


def _relative(s: Step, i: int, power: float = 1.0) -> Err:
    """Operand i's error carried relatively: rel(result) gains |power|·rel(operand)."""
    x = s.ins[i]
    if not x.err:
        return {}
    return scaled(x.err, abs(power) * s.mag / x.mag if x.mag > 0 else math.inf)


def _moved(s: Step) -> Err:
    return widest(*(x.err for x in s.ins))


def _lipschitz(c: float) -> Callable[[Step], Err]:
    return lambda s: scaled(_moved(s), c)


def _added(s: Step) -> Err:
    return plus(*(x.err for x in s.ins))


def _product(s: Step) -> Err:
    """rel(ab) = rel(a) + rel(b); an operand exactly zero everywhere carries its error
    times the other's magnitude."""
    a, b = s.ins
    left = _relative(s, 0) if a.mag > 0 else scaled(a.err, b.mag)
    right = _relative(s, 1) if b.mag > 0 else scaled(b.err, a.mag)
    return plus(left, right)


def _quotient(s: Step) -> Err:
    """rel(a/b) = rel(a) + rel(b): a normaliser costs nothing beyond its own rounding."""
    return plus(_relative(s, 0), _relative(s, 1))


def _power(s: Step) -> Err:
    """d(a^b) = a^b·(b·da/a + ln a·db)."""
    a, b = s.ins
    log_a = abs(math.log(a.mag)) if a.mag > 0 else math.inf
    return plus(_relative(s, 0, b.mag), scaled(b.err, s.mag * log_a if b.err else 0))


def _exp(s: Step) -> Err:
    return scaled(s.ins[0].err, s.mag)  # d exp(x) = exp(x)·dx


def _log(s: Step) -> Err:
    x = s.ins[0]
    return scaled(x.err, 1 / x.mag if x.mag > 0 else math.inf)  # d log x = dx / x


def _sqrt(s: Step) -> Err:
    return _relative(s, 0, 0.5)  # rel(√x) = rel(x) / 2


def _softmax(s: Step) -> Err:
    """The Jacobian of softmax is diag(p) − ppᵀ, whose ∞-norm is max_i 2·p_i·(1 − p_i)
    ≤ 1/2: half the logits' error reaches the probabilities (the mask is exact)."""
    return scaled(s.ins[0].err, 0.5)


def _cross_entropy(s: Step) -> Err:
    """∂/∂x of logsumexp(x) − x_t is softmax(x) − onehot(t), of 1-norm 2·(1 − p_t) ≤ 2."""
    return scaled(s.ins[0].err, 2.0)


def _cross_entropy_vjp(s: Step) -> Err:
    """(softmax(x) − onehot(t))·ct: the softmax's rule times |ct|, plus ct's error (the
    factor's magnitude is at most 1)."""
    logits, _, ct = s.ins
    return plus(scaled(logits.err, 0.5 * ct.mag), ct.err)


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


def _contracted(s: Step) -> Err:
    """A contraction: each operand's error times its factor."""
    a, b = s.ins
    return plus(scaled(a.err, _factor(s, 0, b.mag)), scaled(b.err, _factor(s, 1, a.mag)))


def _summed(s: Step) -> Err:
    """A plain sum: its terms are its operand's elements (w = 1)."""
    return scaled(s.ins[0].err, _factor(s, 0, 1.0))


def _mean(s: Step) -> Err:
    """A mean: its terms are xᵢ/k (w = 1/k), as the envelope records them."""
    return scaled(s.ins[0].err, _factor(s, 0, 1 / s.terms))


def _scatter(s: Step) -> Err:
    """embed_vjp: each table row a sum of up to one cotangent row per token."""
    return scaled(s.ins[0].err, s.ins[1].size)


# ---- what a primitive commits itself, before its store ----


def _ulps(n: float) -> Callable[[Step], float]:
    """n roundings (or ulps of a C library function) beyond a correctly rounded result."""
    return lambda s: n * s.u * s.mag


def _none(s: Step) -> float:
    return 0.0


def _sum_rounding(s: Step) -> float:
    """Higham: a sum's c additions err by at most γ_c·Σ|xᵢ| (without the envelope's
    sums, Σ|xᵢ| ≤ k·max|x|)."""
    abs_sum = s.sums.abs_sum if s.sums else s.terms * s.ins[0].mag
    return gamma(additions(s.order, s.terms), s.u) * abs_sum


def _mean_rounding(s: Step) -> float:
    """The sum's, then its division by k (the envelope's terms are xᵢ/k already)."""
    terms = s.terms
    abs_sum = s.sums.abs_sum if s.sums else s.ins[0].mag
    return gamma(additions(s.order, terms), s.u) * abs_sum + s.u * s.mag


def _contraction_rounding(s: Step) -> float:
    """γ_{c+1}·Σ|xᵢwᵢ|: each term's product, then its c additions."""
    return gamma(additions(s.order, s.terms) + 1, s.u) * s.sums.abs_sum


def _scatter_rounding(s: Step) -> float:
    tokens = s.ins[1].size
    return gamma(tokens - 1, s.u) * tokens * s.ins[0].mag


def _gelu_rounding(s: Step) -> float:
    """x·½·(1 + erf(x/√2)): four roundings of at most |x|, and erf's ulps times |x|/2."""
    return 5 * s.u * s.ins[0].mag


def _softmax_rounding(s: Step) -> float:
    """exp(x − max) over its row's sum: relative 2·|x − max| ≤ 4·mag(x) from the
    subtractions (in the numerator and the sum), exp's 2 ulps twice, the sum's n − 1
    additions, the division's 1."""
    return s.u * s.mag * (4 * s.ins[0].mag + s.row + 4)


def _cross_entropy_rounding(s: Step) -> float:
    """max + log S − x_t, S = Σ exp(x − max): S relatively within 2·mag(x) (the
    subtractions) + 2 (exp's ulps) + n − 1 (its additions); log's ulps of log S ≤ log n;
    then the addition of max and the subtraction of x_t."""
    m, logn = s.ins[0].mag, math.log(s.row)
    return s.u * (2 * m + 2 + s.row - 1 + LIBM * logn + (m + logn) + s.mag)


def _cross_entropy_vjp_rounding(s: Step) -> float:
    """softmax's rounding (of probabilities at most 1) times |ct|, then the product."""
    return s.u * s.ins[2].mag * (4 * s.ins[0].mag + s.row + 4) + s.u * s.mag


@dataclass(frozen=True)
class Rule:
    carry: Callable[[Step], Err]
    own: Callable[[Step], float] = _none
    stores: bool = True  # the result computed, so rounded to its type at its store


MOVED = Rule(_moved, stores=False)
EXACT = Rule(_moved)  # computed without a rounding of its own: abs, neg, relu, max, …

RULES: dict[str, Rule] = {
    # values
    "const": Rule(_moved),
    "to_real": Rule(_moved),
    # elementwise
    "neg": EXACT,
    "abs": EXACT,
    "relu": EXACT,
    "max": EXACT,
    "min": EXACT,
    "where": EXACT,
    "sign": Rule(lambda s: {}),  # first-order: its derivative is 0 wherever it has one
    "dropout": MOVED,  # the identity outside training
    "add": Rule(_added),
    "sub": Rule(_added),
    "mul": Rule(_product),
    "div": Rule(_quotient),
    "pow": Rule(_power, _ulps(LIBM)),
    "exp": Rule(_exp, _ulps(LIBM)),
    "log": Rule(_log, _ulps(LIBM)),
    "sqrt": Rule(_sqrt),
    "tanh": Rule(_lipschitz(1.0), _ulps(LIBM)),
    "sin": Rule(_lipschitz(1.0), _ulps(LIBM)),
    "cos": Rule(_lipschitz(1.0), _ulps(LIBM)),
    "erf": Rule(_lipschitz(2 / math.sqrt(math.pi)), _ulps(LIBM)),
    "gelu": Rule(_lipschitz(1.13), _gelu_rounding),  # max |gelu'| = 1.1289…
    # contractions
    "dot": Rule(_contracted, _contraction_rounding),
    "matmul": Rule(_contracted, _contraction_rounding),
    "ein": Rule(_contracted, _contraction_rounding),
    "dot_vjp_l": Rule(_contracted, _contraction_rounding),
    "dot_vjp_r": Rule(_contracted, _contraction_rounding),
    # reductions
    "sum": Rule(_summed, _sum_rounding),
    "sum_to": Rule(_summed, _sum_rounding),
    "mean": Rule(_mean, _mean_rounding),
    "reduce_max": MOVED,
    "reduce_max_vjp": MOVED,
    # rows
    "softmax": Rule(_softmax, _softmax_rounding),
    "cross_entropy": Rule(_cross_entropy, _cross_entropy_rounding),
    "cross_entropy_vjp": Rule(_cross_entropy_vjp, _cross_entropy_vjp_rounding),
    "embed": MOVED,
    "embed_vjp": Rule(_scatter, _scatter_rounding),
    # axes
    "split_heads": MOVED,
    "merge_heads": MOVED,
    "rename": MOVED,
    "broadcast_like": MOVED,
    "expand": MOVED,
}
