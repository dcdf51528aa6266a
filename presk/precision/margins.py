"""`presk margins`: a budget on the logits from an accuracy target (docs/precision.md,
section 10).

A decision is the argmax of an entry's logits at a position, and its margin the top
logit minus the second. A realization within g of every logit can change a decision
only where the exact margin is at most 2g, so the exact model's margins on held-out
positions bound the decisions any realization changes. ε*(δ) is half the margin below
which, with the chosen confidence, at most a δ fraction of positions lie: the k-th
smallest of n sampled margins, k the largest rank for which a Binomial(n, δ) count
reaches k with that confidence (the one-sided Clopper–Pearson bound on a quantile).

The exact logits come from the reference at the job's bits on the data file's held-out
windows, a batch a sample, spread over local processes as calibration spreads its
samples (presk/precision/calibrate.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from presk.api import Compiled, Core, Program
from presk.core.program import HostProgram
from presk.errors import BindingError
from presk.ir.types import TensorType
from presk.precision.calibrate import Job, on_processes
from presk.precision.envelope import Meta, program_digest
from presk.train.data import Windows, next_token_pair
from presk.train.loop import token_argument


@dataclass(frozen=True)
class Bound:
    """ε*(δ) at a confidence: the rank k of the margin it halves (None when the sample is
    too small for any), and ε* itself (0 then)."""

    delta: float
    confidence: float
    positions: int
    rank: int | None
    epsilon: float


@dataclass(frozen=True)
class Check:
    """A realization run on the same positions: its largest gap to the exact logits, the
    decisions it changed and those the margins allow it to change (margin ≤ 2·gap)."""

    gap: float
    changed: int
    allowed: int


# ---- the entry and its held-out inputs -----------------------------------------------------


def check_logits_entry(view: HostProgram, data: Windows) -> tuple[TensorType, int]:
    """The type of an entry's tokens and their vocabulary V: the entry must take one
    `nat{V}[B, T]` argument and return logits, a real tensor with a last axis (E3014);
    its T must be the data's window (E3011)."""
    result = view.entry_function.result_type
    if not (isinstance(result, TensorType) and result.kind == "real" and result.rank >= 1):
        raise BindingError(
            f"{view.entry} returns {result.text()}: margins are read from logits, "
            "a real tensor whose last axis is the choices",
            code="E3014",
        )
    tokens, vocab = token_argument(view, "margins feed it, from the held-out windows,")
    window = tokens.shape[1]
    if window != data.window:
        raise BindingError(
            f"{data.path} holds windows of {data.window} tokens, the entry reads {window}",
            code="E3011",
        )
    return tokens, vocab


def held_out_batches(data: Windows, batch: int, samples: int | None) -> int:
    """How many batches of `batch` held-out windows the margins read: `samples`, else
    every full batch; refused (E3011) past the last full batch, or when there is none."""
    full = len(data.val) // batch
    wanted = full if samples is None else samples
    if wanted == 0 or wanted > full:
        raise BindingError(
            f"{data.path} has {len(data.val)} held-out windows, {full} full batch(es) of "
            f"{batch}; the margins need {max(wanted, 1)}",
            code="E3011",
        )
    return wanted


def held_out_job(
    program: Program,
    core: Core,
    weights: str,
    data: str,
    batches: int,
    bits: int,
    reference: str = "interp",
) -> Job:
    """The job of the first `batches` held-out batches of `data` on the reference at `bits`
    (`reference`, ball or interp): a calibration's Job, its Meta describing these samples
    (no envelope is written from it, so it has no date and keeps one magnitude a site)."""
    meta = Meta(
        program=program_digest(program),
        entry=core.entry,
        dims=dict(sorted(core.dims.items())),
        consts=dict(sorted(core.consts.items())),
        weights=weights,
        data=data,
        seed=0,
        samples=batches,
        first=0,
        bits=bits,
        grain="site",
        date="",
        reference=reference,
    )
    return Job(program.ast.text, program.ast.file, core.remat, meta)


def held_out_arguments(core: Core, meta: Meta, index: int) -> list:
    """The arguments of held-out batch `index` as the API's `Compiled` takes them: the
    parameters, then the tokens of B consecutive held-out windows."""
    data = Windows.load(meta.data)
    tokens, vocab = check_logits_entry(core.view, data)
    batch = tokens.shape[0]
    windows = data.val[index * batch : (index + 1) * batch].astype(np.int64)
    params = core.params(meta.seed, meta.weights)
    return ([params] if params is not None else []) + [next_token_pair(windows, vocab)[0]]


# ---- the exact logits ------------------------------------------------------------------------


def exact_logits(core: Core, job: Job, workers: int) -> list[np.ndarray]:
    """The exact logits of the job's held-out batches (rounded to float64), one array a
    batch in order, on `workers` local processes."""
    meta = job.meta
    indices = list(range(meta.first, meta.first + meta.samples))
    if workers == 1 or len(indices) == 1:
        reference = _reference(core, meta)
        return [logits_of(reference, core, meta, i) for i in indices]
    by_index = dict(on_processes(workers, exact_batch)(job, indices))
    return [by_index[i] for i in indices]


def exact_batch(job: Job, index: int) -> np.ndarray:
    """One held-out batch's exact logits: a task a worker process runs."""
    core = job.core()
    return logits_of(_reference(core, job.meta), core, job.meta, index)


def _reference(core: Core, meta: Meta) -> Compiled:
    return core.reference(meta.bits, meta.reference)


def logits_of(compiled: Compiled, core: Core, meta: Meta, index: int) -> np.ndarray:
    """`compiled` run on held-out batch `index`, its logits as float64."""
    out = compiled(*held_out_arguments(core, meta, index), seed=meta.seed)
    return np.asarray(out, dtype=np.float64)


# ---- margins and ε* -------------------------------------------------------------------------


def margins_of(logits: list[np.ndarray]) -> np.ndarray:
    """Top logit minus the second at every position (the last axis the choices), flat."""
    rows = np.concatenate([x.reshape(-1, x.shape[-1]) for x in logits])
    if rows.shape[1] < 2:  # one choice: no decision can change
        return np.full(len(rows), np.inf)
    top_two = np.partition(rows, -2, axis=1)[:, -2:]
    return top_two[:, 1] - top_two[:, 0]


def decisions_of(logits: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.argmax(x, axis=-1).ravel() for x in logits])


def certified_rank(n: int, delta: float, confidence: float) -> int | None:
    """The largest k with P(Binomial(n, δ) ≥ k) ≥ confidence, None if not even k = 1.

    Then, with that confidence, at most a δ fraction of positions have a margin below the
    k-th smallest of n sampled ones: were it more, more than k − 1 of n would fall below
    the δ-quantile, which happens with probability at most 1 − confidence. The lower tail
    is summed term by term in logarithms (no statistics library is installed); past
    about 745 a term's exponent underflows to 0, far below any tail that matters.
    """
    tail = 1.0 - confidence
    below = 0.0  # P(Binomial(n, δ) ≤ j)
    for j in range(n):
        below += math.exp(_log_binomial(n, j, delta))
        if below > tail:
            return j if j > 0 else None  # P(≥ j) ≥ confidence, P(≥ j + 1) not
    return n


def _log_binomial(n: int, j: int, p: float) -> float:
    """log P(Binomial(n, p) = j)."""
    log_choose = math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
    return log_choose + j * math.log(p) + (n - j) * math.log1p(-p)


def needed_positions(delta: float, confidence: float) -> int:
    """The fewest positions for which k = 1 is certified: 1 − (1 − δ)ⁿ ≥ confidence."""
    return math.ceil(math.log1p(-confidence) / math.log1p(-delta))


def epsilon_star(margins: np.ndarray, delta: float, confidence: float) -> Bound:
    """ε*(δ): half the certified rank's margin, one ulp below so that a gap of ε* can
    change only margins strictly below it; 0 with rank None when the sample is too small."""
    n = len(margins)
    rank = certified_rank(n, delta, confidence)
    if rank is None:
        return Bound(delta, confidence, n, None, 0.0)
    kth = float(np.partition(margins, rank - 1)[rank - 1])
    return Bound(delta, confidence, n, rank, float(np.nextafter(kth / 2, 0.0)))


# ---- the check of a realization ---------------------------------------------------------------


def check(
    core: Core,
    meta: Meta,
    exact: list[np.ndarray],
    realize,
    backend: str,
) -> Check:
    """`realize` run on `backend` on the held-out batches `exact` was computed on: its gap,
    the decisions it changed and how many the exact margins allow."""
    native = core.lower(realize).compile(backend)
    ran = [logits_of(native, core, meta, i) for i in range(meta.first, meta.first + meta.samples)]
    return compare(exact, ran)


def compare(exact: list[np.ndarray], ran: list[np.ndarray]) -> Check:
    """Logits `ran` against the exact ones, batch by batch: the largest gap, the decisions
    that differ, and the positions whose exact margin is at most twice the gap (a tie at
    exactly 2·gap may go either way)."""
    gap = max(_gap(x, y) for x, y in zip(exact, ran, strict=True))
    changed = int(np.count_nonzero(decisions_of(ran) != decisions_of(exact)))
    allowed = int(np.count_nonzero(margins_of(exact) <= 2 * gap))
    return Check(gap, changed, allowed)


def _gap(exact: np.ndarray, ran: np.ndarray) -> float:
    """max |ran − exact|; +∞ if a value ran is not finite (every decision may change)."""
    if not np.all(np.isfinite(ran)):
        return math.inf
    return float(np.max(np.abs(ran - exact)))
