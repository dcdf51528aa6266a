"""Calibration: the exact reference run over samples, recording every site's envelope.

A `Recorder` wraps the reference's `apply` (presk/backends/host.py): each primitive runs
as it always does, then the recorder reads its operands and result. A site's magnitude
and rounding errors are read off the exact value; at a sum or a contraction it runs the
primitive's own `reference` again on |operands|, on squared operands and with an operand
replaced by ones, which gives Σ|xᵢwᵢ|, Σ(xᵢwᵢ)² and the factors exactly, a contraction
being linear in each operand. These runs round upward (every term is non-negative), and
every maximum is rounded up to float64, so each number is an upper bound.

A sample is one task: `sample_sites(job, index)` in this process, in a pool of local
processes or on a Dask worker (presk/precision/cluster.py), each loading the program
again from its source text (MLIR objects do not pickle). Samples merge by max.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import zip_longest
from multiprocessing import get_context

import gmpy2
import numpy as np

from presk import api
from presk.backends.host import CallContext
from presk.kernel.machine import MACHINES
from presk.precision.envelope import (
    TYPES,
    Envelope,
    Grain,
    Meta,
    SiteEnvelope,
    SumStats,
    exact_types,
    site_order,
)
from presk.precision.samples import sample_arguments, sample_seed
from presk.prims import balls, exact
from presk.prims.base import Apply, Prim
from presk.runtime.values import Tensor

# ---- what each primitive does per output element --------------------------------------


def _terms(prim: Prim, ap: Apply) -> int:
    """A contraction's k, as its record reads it off the application."""
    return prim.terms(ap)


def _reads(prim: Prim, ap: Apply) -> int:
    """The elements of the first operand each output element reads (a reduction's count)."""
    read = ap.in_types[0].size if ap.in_types else 1
    return max(1, -(-read // ap.out_type.size))


def _one(prim: Prim, ap: Apply) -> int:
    return 1


# Each kind of work a primitive's record names (`Prim.work`), per output element.
WORK: dict[str, Callable[[Prim, Apply], int]] = {"one": _one, "terms": _terms, "reads": _reads}


def work(prim: Prim, ap: Apply) -> int:
    """The primitive's work per output element: k for a k-term contraction, the terms of a
    reduction, 1 for an elementwise primitive, a move of data or a gather."""
    return WORK[prim.work](prim, ap)


# ---- exact statistics, rounded up -----------------------------------------------------

_UP = gmpy2.ieee(64)
_UP.round = gmpy2.RoundUp
# A narrower type's rounding: nearest-even, with its subnormals and its overflow to ∞.
_ROUND = {
    "f32": gmpy2.ieee(32),
    "bf16": gmpy2.context(precision=8, emax=128, emin=-132, subnormalize=True),
}


def _round_up(x) -> float:
    """An MPFR number rounded up to float64 (+∞ past the largest)."""
    return float(_UP.plus(x))


_up = np.frompyfunc(_round_up, 1, 1)


def _upward():
    """The run's context rounding upward: sums and squares of non-negative terms stay
    above their exact values."""
    return gmpy2.context(gmpy2.get_context(), round=gmpy2.RoundUp)


def _rounding_error(t: str) -> Callable[[np.ndarray], np.ndarray]:
    """|fl_t(x) − x| element by element: of MPFR numbers at the run's precision, of float64
    numbers in float64, exactly (a double's distance to its rounding to fewer bits is a
    double)."""
    to_t = _ROUND[t]
    exact_error = np.frompyfunc(lambda v: abs(to_t.plus(v) - v), 1, 1)

    def error(data: np.ndarray) -> np.ndarray:
        if np.asarray(data).dtype == object:
            return exact_error(data)
        x = np.asarray(data, dtype=np.float64)
        return np.abs(_rounded(x, to_t) - x)

    return error


def _rounded(x: np.ndarray, to: gmpy2.context) -> np.ndarray:
    """Doubles rounded as the context `to` rounds them (nearest-even at its precision,
    its subnormals, overflow to ∞), in one step: numpy's casts to bf16 pass through f32,
    which rounds twice. Scaling by a power of two is exact, and rint ties to even."""
    _, e = np.frexp(x)  # |x| in [2^(e-1), 2^e)
    lowest = to.emin + to.precision - 1  # the smallest normal's e: below it, one spacing
    spacing = np.ldexp(1.0, np.maximum(e, lowest) - to.precision)
    y = np.rint(x / spacing) * spacing
    return np.where(np.abs(y) < 2.0**to.emax, y, np.copysign(np.inf, x))


ROUNDING_ERRORS = {t: _rounding_error(t) for t in TYPES}
_F64 = gmpy2.ieee(64)


def _exact_in_f64(data: np.ndarray) -> bool:
    """Whether every element is a double: float64 data is; MPFR numbers are checked one by
    one, stopping at the first that is not (most values fail at once)."""
    if np.asarray(data).dtype != object:
        return True
    return all(_F64.plus(v) == v for v in np.asarray(data).flat)


def _exact(data: np.ndarray, errors: dict[str, np.ndarray], on_balls: bool) -> tuple[str, ...]:
    """The machine types every element of an exact value is exact in (of balls, those
    whose rounding's upper bound is 0, and f64 only with a narrower one: not exact is
    always safe to say)."""
    narrow = [t for t, e in errors.items() if not np.any(e)]
    f64 = bool(narrow) or (not on_balls and _exact_in_f64(data))  # f64 holds f32 and bf16
    return exact_types(narrow + ["f64"] * f64)


def _ball_rounding(t: str) -> Callable[[np.ndarray], np.ndarray]:
    """|fl_t(x) − x| bounded over each ball: its midpoint's rounding to t is a t-number,
    no nearer to x than x's own rounding, and Arb bounds its distance to every point of
    the ball (float64, rounded up)."""
    to_t = _ROUND[t]

    def error(data: np.ndarray) -> np.ndarray:
        near = _rounded(balls.to_float64(data), to_t)
        return balls.upper(balls.exact(near) - data)

    return error


BALL_ROUNDING_ERRORS = {t: _ball_rounding(t) for t in TYPES}


def _ball_stats(data: np.ndarray) -> tuple[np.ndarray, dict]:
    """A ball value's magnitude and rounding errors by type, element by element: upper
    bounds over each ball, as float64 (which _value_stats then rounds up exactly)."""
    return balls.upper(data), {t: BALL_ROUNDING_ERRORS[t](data) for t in TYPES}


def _groups(a: np.ndarray, grain: str) -> np.ndarray:
    """`a` as a 2-D array, one row a group: a row of the value (along its last axis) for
    "row", a channel (an index of its last axis) for "channel"; a scalar is one of each."""
    rows = a.reshape(-1, a.shape[-1] if a.ndim else 1)
    return rows.T if grain == "channel" else rows


def _value_stats(
    data: np.ndarray, grain: str, on_balls: bool = False
) -> tuple[float, dict, Grain | None, tuple]:
    """(magnitude, rounding by type, the grain's, the types it is exact in) of an exact
    value: of MPFR numbers, or bounded over balls (`on_balls`)."""
    if on_balls:
        magnitude, errors = _ball_stats(np.asarray(data, dtype=object))
        magnitude = np.asarray(magnitude, dtype=object)
        errors = {t: np.asarray(e, dtype=object) for t, e in errors.items()}
    else:
        magnitude = np.asarray(np.abs(data), dtype=object)  # a scalar's stays an array
        errors = {t: np.asarray(ROUNDING_ERRORS[t](data), dtype=object) for t in TYPES}
    exact_in = _exact(data, errors, on_balls)
    if grain == "site":
        return (
            _round_up(np.max(magnitude)),
            {t: _round_up(np.max(e)) for t, e in errors.items()},
            None,
            exact_in,
        )

    def per_group(a: np.ndarray) -> tuple[float, ...]:
        return tuple(_up(_groups(a, grain).max(axis=1)).tolist())

    g = Grain(grain, per_group(magnitude), {t: per_group(e) for t, e in errors.items()})
    return max(g.magnitude), {t: max(e) for t, e in g.rounding.items()}, g, exact_in


def _sum_stats(
    prim: Prim, ap: Apply, xs: list, summed: int, terms: int, on_balls: bool = False
) -> SumStats:
    """Σ|xᵢwᵢ|, √Σ(xᵢwᵢ)² and the factors, from the primitive's reference run again (its
    ball rule on balls, each result's largest upper bound, within a float64 step of the
    exact one; on a large sum over balls, in float64 over the balls' bounds,
    `_float64_sums`, within a relative 4(k + 2)·2⁻⁵³)."""
    if on_balls and summed == len(xs) and terms * ap.out_type.size >= FLOAT64_STATS_WORK:
        ones, absolute, squares = _float64_sums(xs)
    else:
        numbers = balls if on_balls else exact
        ones = [numbers.exact(np.ones(x.shape)) for x in xs[:summed]]
        absolute = [np.asarray(np.abs(x), dtype=object) for x in xs[:summed]]
        squares = [np.asarray(x * x, dtype=object) for x in xs[:summed]]

    def largest(operands: list) -> object:
        if operands[0].dtype == np.float64:
            if any(not op.any() for op in operands):  # every term has a factor 0
                return balls.arb(0)
            out = np.asarray(prim.reference(ap, operands), dtype=np.float64)
            return balls.arb(_float64_sum_bound(float(np.max(out)), terms))
        if on_balls:
            out = np.asarray(prim.ball(ap, operands + xs[summed:]), dtype=object)
            return balls.arb(float(np.max(balls.upper(out))))
        return np.max(prim.reference(ap, operands + xs[summed:]))

    def but(operands: list, i: int) -> list:
        return operands[:i] + [ones[i]] + operands[i + 1 :]

    # a term's coefficient: 1, but a mean's 1/k (its reference on ones is 1, not k)
    scale = largest(ones) / terms

    def up(x) -> float:  # a ball's bound is a float64 already
        return float(x) if on_balls else _round_up(x)

    def root(x) -> float:
        if on_balls:
            return float(balls.upper(balls.objects([(scale * x).sqrt()], (1,)))[0])
        return _round_up(gmpy2.sqrt(scale * x))

    return SumStats(
        terms,
        up(largest(absolute)),
        root(largest(squares)),
        tuple(up(largest(but(absolute, i))) for i in range(summed)),
        tuple(root(largest(but(squares, i))) for i in range(summed)),
    )


# The terms (a sum's terms times its results) from which a sum's statistics over balls are
# bounded in float64 (`_float64_sums`): past them FLINT's products cost seconds.
FLOAT64_STATS_WORK = 1 << 20
_SMALLEST_F64 = float(np.finfo(np.float64).smallest_subnormal)


def _float64_sums(xs: list) -> tuple[list, list, list]:
    """(ones, |x|, x²) for a sum's statistics over balls, as float64 upper bounds: each
    ball's largest |x| (a machine number's own, a parameter in its stored form), its
    square rounded and then stepped up past the exact one (a zero's stays 0). Every term
    the primitive's reference then sums is at least the exact term's magnitude, and
    `_float64_sum_bound` covers its roundings: the statistics stay upper bounds, in
    numpy's float64 at a fraction of the cost of FLINT's products over the run's balls
    (seven runs of each contraction, at hundreds of bits on a deep model)."""
    bounds = [
        balls.upper(x) if x.dtype == object else np.abs(x.astype(np.float64))
        for x in map(np.asarray, xs)
    ]
    with np.errstate(over="ignore"):
        squares = [np.where(u > 0, np.nextafter(u * u, np.inf), 0.0) for u in bounds]
    return [np.ones(u.shape) for u in bounds], bounds, squares


def _float64_sum_bound(computed: float, terms: int) -> float:
    """An upper bound of a sum of `terms` nonnegative terms, each a product of at most two
    factors, and perhaps divided once (a mean), that float64 arithmetic computed as
    `computed`, rounding to nearest in any order: at most terms + 2 roundings stand
    between them, each within a relative u = 2⁻⁵³ (or, in the subnormals, an absolute
    half of the smallest)."""
    n, u = terms + 2, MACHINES["f64"].unit_roundoff
    with np.errstate(over="ignore"):
        scaled = computed * (1 + 4 * n * u) + n * _SMALLEST_F64
    return float(np.nextafter(scaled, np.inf))


# ---- merging ----------------------------------------------------------------------------


def _maxes(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
    """Position by position, the longer's tail kept (a site's calls may differ in shape)."""
    return tuple(map(max, zip_longest(a, b, fillvalue=0.0)))


def merged(a: SiteEnvelope, b: SiteEnvelope) -> SiteEnvelope:
    """The envelope of a site over the values of both: every bound the larger."""
    return replace(
        a,
        magnitude=max(a.magnitude, b.magnitude),
        rounding={t: max(a.rounding[t], b.rounding[t]) for t in TYPES},
        count=max(a.count, b.count),
        work=max(a.work, b.work),
        sum=None if a.sum is None else _merged_sums(a.sum, b.sum),
        grain=None if a.grain is None else _merged_grains(a.grain, b.grain),
        exact=tuple(t for t in a.exact if t in b.exact),
    )


def _merged_sums(a: SumStats, b: SumStats) -> SumStats:
    return replace(
        a,
        terms=max(a.terms, b.terms),
        abs_sum=max(a.abs_sum, b.abs_sum),
        rss=max(a.rss, b.rss),
        factors=_maxes(a.factors, b.factors),
        rss_factors=_maxes(a.rss_factors, b.rss_factors),
    )


def _merged_grains(a: Grain, b: Grain) -> Grain:
    return replace(
        a,
        magnitude=_maxes(a.magnitude, b.magnitude),
        rounding={t: _maxes(a.rounding[t], b.rounding[t]) for t in TYPES},
    )


def merge_samples(samples: Iterable[dict[str, SiteEnvelope]]) -> dict[str, SiteEnvelope]:
    out: dict[str, SiteEnvelope] = {}
    for sites in samples:
        for site, s in sites.items():
            out[site] = merged(out[site], s) if site in out else s
    return dict(sorted(out.items(), key=lambda kv: site_order(kv[0])))


# ---- the recording run -------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """What a worker needs to run samples: the program's text, not its MLIR."""

    source: str
    file: str  # the program's path, which locates its errors
    remat: str
    meta: Meta

    def core(self) -> api.Core:
        m = self.meta
        return api.load_text(self.source, self.file).elaborate(
            m.entry, m.dims, m.consts, self.remat
        )


class Recorder:
    """The exact reference of a job's entry, recording each site's envelope as it runs."""

    def __init__(self, job: Job):
        self.job = job
        self.core = job.core()
        self.compiled = self.core.reference(job.meta.bits, job.meta.reference)
        self.numbers = self.compiled.backend.numbers  # MPFR numbers, or balls
        backend = self.compiled.backend
        self._apply, backend.host.apply = backend.host.apply, self._record
        # a ball reference runs a call again at more bits where it certified too few: each
        # run records the sample afresh, not on top of the run it abandoned
        self._run, backend.run = backend.run, self._fresh_run
        self._static: dict[tuple, tuple[int, int]] = {}  # (work, summed operands) by shapes
        self._sites: dict[str, SiteEnvelope] = {}  # this sample's
        self._counts: dict[str, int] = {}

    def sample(self, index: int) -> dict[str, SiteEnvelope]:
        """Every site's envelope over sample `index`."""
        self._sites, self._counts = {}, {}
        meta = self.job.meta
        self.compiled(*sample_arguments(self.core, meta, index), seed=sample_seed(meta, index))
        return {s: replace(e, count=self._counts[s]) for s, e in self._sites.items()}

    def _fresh_run(self, *args, **kwargs):
        self._sites, self._counts = {}, {}
        return self._run(*args, **kwargs)

    def _record(self, op, ins: list, ctx: CallContext, draw) -> Tensor:
        out = self._apply(op, ins, ctx, draw)
        if op.site and op.prim is not None and out.type.kind == "real":
            ap = Apply(op.attrs, [t.type for t in ins], op.type, op.site, ctx.training, draw)
            with _upward():
                seen = self._observe(op.prim, ap, [t.data for t in ins], out.data)
            old = self._sites.get(op.site)
            self._sites[op.site] = seen if old is None else merged(old, seen)
            self._counts[op.site] = self._counts.get(op.site, 0) + out.data.size
        return out

    def _observe(self, prim: Prim, ap: Apply, xs: list, value: np.ndarray) -> SiteEnvelope:
        # a site's calls may differ in shape (Dense{3, 16}.apply and Dense{16, 16}.apply)
        key = (ap.site, tuple(t.shape for t in ap.in_types))
        if key not in self._static:
            self._static[key] = (work(prim, ap), prim.sums)
        k, summed = self._static[key]
        on_balls = self.numbers is balls
        magnitude, rounding, grain, exact_in = _value_stats(value, self.job.meta.grain, on_balls)
        sums = _sum_stats(prim, ap, xs, summed, k, on_balls) if summed else None
        return SiteEnvelope(prim.name, magnitude, rounding, value.size, k, sums, grain, exact_in)


_local = threading.local()  # each thread's recorder (a Dask worker runs tasks in threads)


def sample_sites(job: Job, index: int) -> dict[str, SiteEnvelope]:
    """Sample `index` of `job`: one task, wherever it runs."""
    recorder = getattr(_local, "recorder", None)
    if recorder is None or recorder.job != job:
        recorder = _local.recorder = Recorder(job)
    return recorder.sample(index)


# ---- spreading samples --------------------------------------------------------------------

Spread = Callable[[Job, list[int]], Iterator[tuple[int, dict]]]


def serially(job: Job, indices: list[int]) -> Iterator[tuple[int, dict]]:
    for i in indices:
        yield i, sample_sites(job, i)


def on_processes(workers: int, task=sample_sites) -> Spread:
    """Samples spread over `workers` local processes (started afresh: MLIR is not forked),
    `task(job, index)` run for each: a sample's sites, or another run of it (presk solve's
    exact outputs)."""

    def spread(job: Job, indices: list[int]) -> Iterator[tuple[int, object]]:
        pool = ProcessPoolExecutor(min(workers, len(indices)), mp_context=get_context("spawn"))
        with pool:
            yield from zip(indices, pool.map(task, [job] * len(indices), indices), strict=True)

    return spread


def calibrate(job: Job, spread: Spread = serially, progress=None) -> Envelope:
    """The envelope of `job.meta.samples` samples from `job.meta.first`, `progress(done)`
    told after each."""
    meta = job.meta
    indices = list(range(meta.first, meta.first + meta.samples))
    by_index = {}
    for i, sites in spread(job, indices):
        by_index[i] = sites
        if progress is not None:
            progress(len(by_index))
    return Envelope(meta, merge_samples(by_index[i] for i in indices))
