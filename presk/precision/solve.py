"""`presk solve`: an error budget in, the cheapest realization out, verified by measurement.

The solver chooses a rung of the ladder f64 → f32 → bf16 for each value offered
(presk/precision/offers.py) to minimise the menu's objective under the budget (traffic,
or with a profile predicted time: `offers.Objective`), a multiple-choice knapsack; with
integer rungs in the menu a matrix's ladder goes on to int8 and int4 (each value's own
ladder, `Priced.ladder`), and every move below walks it. It starts from the record's
default: f64, unless the objective has uniform bases (`Objective.bases`: time, since a
record that mixes types pays for it in conversions), and then the first base whose
uniform realization measures inside the budget, all-f32 (`baseline`): every ladder starts
there and the values not offered follow it (`Menu.based`), charged there by the estimate.
It proposes greedily, one rung at a time, in order of the objective saved per unit of
estimate added, refusing a narrowing that takes the estimate past its target. Then it
measures: the
candidate runs on the envelope's samples against the exact reference, and while the gap
exceeds the budget it widens the culprit one rung: the narrowed value whose own measured
gap its type explains most (presk bisect's own gap, `Row.typed_own`, on the sample the
candidate misses most; a parameter's, its rounding), and measures again. The estimate only
ranks (it is first-order, and blind to what a type's range or an accumulation does inside
a kernel), so it does not choose what to widen: it misjudges exactly the value the
measurement caught, and ranks it last. Only where no narrowed value's own gap is its
type's doing does the widening fall back to the largest term, and nothing widens past the
top of its ladder. Every move is recorded.

Two options spend what the estimate left of the budget (docs/precision.md, section 7).
`--narrow measured` narrows each decision one more rung, the largest saving first, and
keeps a step while the measured gap stays inside budget/margin, in up to three passes.
`--narrow heldout` then undoes the kept steps, the last first, until the samples after
the envelope's in its data file (the held-out samples) are inside budget/margin too: a
narrowing decided by measurement needs a check on data it was not measured on.

The solver asks the objective what a step saves and never which objective it is. With a
profile (`--profile`, offers.Time) a step is ranked by the seconds it saves. The proposal
prices each step at its own kernel alone: narrowing one value of a chain costs
conversions at its edges that narrowing its neighbours removes, so pricing them step by
step would never start a chain. A step that saves nothing (in time, a compute-bound
kernel in bf16, which computes in f32) is not taken. Then the proposal settles: while
widening a value one rung lowers the whole cost, conversions at every edge included, it
widens the one that saves most: a value narrowed alone between two f64 kernels pays a
conversion each side. In traffic no widening saves, so settling moves nothing.

Under a base, the record is timed beside the uniform realizations at the end
(presk/precision/versus.py), and if the fastest of them inside the budget runs faster
than the record, the record becomes it (`uniform`): a prediction ranks, the machine
decides.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property

import numpy as np

from presk import backends
from presk.api import Core
from presk.errors import BindingError, UsageError
from presk.ir.types import leaves
from presk.kernel.machine import to_storage
from presk.precision.bisect import Reference, against, reference_run
from presk.precision.bound import ExactOutput, exact_output, radius, sample_gaps
from presk.precision.calibrate import Job, on_processes
from presk.precision.cluster import on_cluster
from presk.precision.envelope import Envelope, Meta, json_number
from presk.precision.integers import INTEGER_RUNGS, is_integer, move, quant_of
from presk.precision.offers import RUNGS, Menu
from presk.precision.samples import sample_arguments, sample_seed
from presk.realize import Realization
from presk.runtime.inputs import param_type


def measured_on(measure: str) -> str:
    """The backend a --measure choice runs on: the first registered machine backend that
    compiles to native code (`native`), or that does not (`kernel`)."""
    return backends.names(exact=False, native=measure == "native")[0]


MAX_ASSIGNMENTS = 3**12  # --exhaustive enumerates every assignment: 12 values at most
MEASURES = ("kernel", "native")  # --measure's choices: the kernel evaluator, or native code
NARROWINGS = ("measured", "heldout")  # --narrow's choices
NARROW_PASSES = 3  # --narrow measured stops after three passes, or a pass that keeps nothing


@dataclass(frozen=True)
class Options:
    budget: float  # ε, relative to the output's largest magnitude unless `absolute`
    absolute: bool = False
    estimate: str = "sum"  # or "rss"
    margin: float = 2.5  # rss and --narrow aim at budget / margin
    exhaustive: bool = False
    narrow: str | None = None  # in NARROWINGS


@dataclass(frozen=True)
class Move:
    move: str  # "narrow" or "widen"
    key: str
    kind: str  # "value" or "parameter"
    rung: str  # from
    to: str
    # a narrowing "taken" or "refused" by the estimate, "slower" by the objective (it
    # saves nothing: in time, its kernel saves no time), or "kept" or "rejected" by the
    # measurement (--narrow); a widening after a gap past the budget of the "culprit" (the
    # largest own gap its type explains) or, where no narrowed value's is, of the largest
    # term ("measured"), "held out" (a kept narrowing undone by --narrow heldout), or
    # "slower" (the settling's, by prediction; or with a gap, back to a uniform realization
    # that ran faster by measurement)
    outcome: str
    estimate: float  # the estimate had the move been made
    gap: float | None = None  # the measurement that decided the move

    def record(self) -> dict:
        out = {
            "move": self.move,
            "key": self.key,
            "kind": self.kind,
            "from": self.rung,
            "to": self.to,
            "outcome": self.outcome,
            "estimate": json_number(self.estimate),
        }
        if self.gap is not None:
            out["gap"] = json_number(self.gap)
        return out


@dataclass(frozen=True)
class Exhaustive:
    assignments: int  # how many were enumerated
    optimum: int  # the least traffic whose estimate is inside the target


@dataclass(frozen=True)
class Kept:
    """A narrowing --narrow kept: the value, its rung before, the in-sample gap after."""

    key: str
    rung: str
    gap: float


@dataclass(frozen=True)
class Narrowing:
    """What --narrow did: its steps measured and kept, and those the held-out samples
    undid."""

    how: str  # in NARROWINGS
    threshold: float  # budget / margin, what a step's measured gap must stay inside
    passes: int
    tried: int
    kept: int
    undone: int = 0


@dataclass(frozen=True)
class HeldOut:
    """The final assignment's measured gap on the held-out samples."""

    meta: Meta  # the envelope's, moved to the held-out samples
    gap: float
    radius: float = 0.0  # the reference's over these samples (bound.radius)


@dataclass(frozen=True)
class Base:
    """The uniform realization a solve starts from, under an objective with bases: the
    record's default, which the values not offered follow."""

    rung: str
    gaps: dict[str, float]  # the measured gap of each base tried, in order
    uncharged: int = 0  # values the sweep did not reach (no term), rounded by the base


@dataclass
class Solution:
    menu: Menu
    scale: float  # what a relative budget is relative to (1 for an absolute one)
    budget: float  # the absolute budget
    target: float  # what the estimate aims at
    proposed: dict[str, str]  # the greedy proposal, before any widening
    assignment: dict[str, str]  # after the measurements
    estimate: float  # of `assignment`
    gap: float  # its measured gap
    rounds: int  # widening rounds
    measurements: int  # on the envelope's samples and the held-out ones
    moves: list[Move] = field(default_factory=list)
    exhaustive: Exhaustive | None = None
    narrowing: Narrowing | None = None
    held_out: HeldOut | None = None
    quant_pass: object | None = None  # with --quant, presk.precision.quant_pass.QuantPass
    # the most an exact output may lie from its midpoint: a ball reference's radius, which
    # every measured gap includes (0 on the MPFR reference)
    radius: float = 0.0
    base: Base | None = None  # None: an objective without bases, whose default is f64

    @property
    def inside(self) -> bool:
        return self.gap <= self.budget

    @property
    def realization(self) -> Realization:
        return realization_of(self.menu, self.assignment)

    def record(self) -> dict:
        """The realization record `--realize @R.json` reads."""
        r = self.realization
        out = {"default": r.default, "storage": r.storage, "params": r.params}
        if r.quant:
            out["quant"] = {
                p: {"bits": q.bits, "over": q.over, "scheme": q.scheme} for p, q in r.quant.items()
            }
        return out


def realization_of(menu: Menu, assignment: dict[str, str]) -> Realization:
    """The record of `assignment`: the menu's default, and every key of another rung."""
    narrowed = {k: t for k, t in assignment.items() if t != menu.default}
    integers = {k: t for k, t in narrowed.items() if is_integer(t)}
    return Realization(
        menu.default,
        storage={k: t for k, t in narrowed.items() if k in menu.values},
        params={k: t for k, t in narrowed.items() if k in menu.params and k not in integers},
        quant={k: quant_of(t, menu.over[k]) for k, t in integers.items()},
        spelling="presk solve",
    )


def solve(menu: Menu, options: Options, gauge: Gauge, held: Gauge | None = None) -> Solution:
    """The cheapest assignment the greedy proposal and the widening find from the record's
    default (`baseline`), measured by `gauge` inside the budget (or all-f64, if even that is
    not), narrowed further by `options.narrow`; its gap on the held-out samples measured by
    `held`, if given. The gauges measure the menu the solve based."""
    if options.exhaustive:
        check_exhaustive(menu)
    scale = 1.0 if options.absolute else _largest(gauge.exact)
    if scale == 0:
        raise UsageError(
            "the exact output is 0 on every sample: a relative budget bounds nothing; "
            "give --budget-abs"
        )
    budget = options.budget * scale
    target = budget / options.margin if options.estimate == "rss" else budget
    runs_before = measured_runs(gauge, held)  # a gauge may have served other solves
    base = baseline(menu, gauge, budget)
    menu = menu.based(base.rung) if base is not None else menu
    for g in (gauge, held) if held is not None else (gauge,):
        g.menu = menu  # its candidates' records take the base as their default
    moves: list[Move] = []
    proposed = propose(menu, target, options.estimate, moves)
    settle(menu, proposed, options.estimate, moves)
    assignment = dict(proposed)
    gap, rounds = gauge.gap(assignment), 0
    while gap > budget and any(t != menu.item(k).ladder[0] for k, t in assignment.items()):
        moves.append(widen(menu, assignment, options.estimate, gap, gauge.owns(assignment)))
        rounds += 1
        gap = gauge.gap(assignment)
    narrowing, kept = None, []
    if options.narrow is not None and gap <= budget:
        threshold = budget / options.margin
        narrowing, kept = narrow(menu, assignment, gauge, threshold, options, moves)
    held_out = None
    if held is not None:
        held_gap = held.gap(assignment)
        if options.narrow == "heldout" and narrowing is not None:
            threshold = narrowing.threshold
            held_gap = undo(menu, assignment, kept, held, held_gap, threshold, options, moves)
            narrowing = replace(narrowing, undone=narrowing.kept - len(kept))
        held_out = HeldOut(held.envelope.meta, held_gap)
    gap = kept[-1].gap if kept else gap  # the in-sample gap of the last step still kept
    return Solution(
        menu,
        scale,
        budget,
        target,
        proposed,
        assignment,
        menu.estimate(assignment, options.estimate),
        gap,
        rounds,
        measured_runs(gauge, held) - runs_before,
        moves,
        search(menu, target, options.estimate) if options.exhaustive else None,
        narrowing,
        held_out,
        base=base,
    )


def baseline(menu: Menu, gauge: Gauge, budget: float) -> Base | None:
    """The record's default under an objective with bases (None without: f64): the first
    base whose uniform realization `gauge` measures inside `budget`, else f64. The values
    the menu does not offer follow it, and the estimate charges each its term there; a
    value the sweep did not reach has none, and is charged 0 only where it is exact: the
    others are counted (`Base.uncharged`), their roundings in the base's measured gap."""
    rungs = menu.objective.bases(menu)
    if not rungs:
        return None
    items = (*menu.values.values(), *menu.params.values())
    gaps = {}
    for rung in rungs:
        gaps[rung] = gauge.realized_gap(Realization(rung, spelling=rung))
        if gaps[rung] <= budget:
            return Base(rung, gaps, sum(p.terms is None and rung not in p.exact for p in items))
    return Base("f64", gaps)


def uniform(s: Solution, rung: str, gap: float, how: str, held_gap: float | None) -> Solution:
    """`s` become the uniform realization `rung`: what the record is when that ran faster on
    this machine inside the budget, its gap `gap` measured on the envelope's samples (and
    `held_gap` on the held-out ones, if `s` measured them). Each offered value moves to
    `rung` ("slower", with the gap that admitted it), its estimate by `how`."""
    menu = replace(s.menu, default=rung)
    assignment = dict(s.assignment)
    moves = list(s.moves)
    for key, was in s.assignment.items():
        if was != rung:
            assignment[key] = rung
            after = menu.estimate(assignment, how)
            moves.append(Move("widen", key, menu.item(key).kind, was, rung, "slower", after, gap))
    held_out = s.held_out
    if held_out is not None and held_gap is not None:
        held_out = replace(held_out, gap=held_gap)
    return replace(
        s,
        menu=menu,
        assignment=assignment,
        estimate=menu.estimate(assignment, how),
        gap=gap,
        moves=moves,
        held_out=held_out,
    )


def measured_runs(gauge: Gauge, held: Gauge | None) -> int:
    return gauge.runs + (held.runs if held is not None else 0)


def realization_key(r: Realization) -> str:
    """What two realizations that compile to the same kernels share: every field but how
    the user spelled it."""
    return json.dumps(asdict(replace(r, spelling="")), sort_keys=True)


class Gauge:
    """Candidates measured on `measure`'s backend against the exact outputs of an envelope's
    samples, computed once (on `workers` processes) when first needed: one gauge serves
    any number of solves. A candidate is an assignment of `menu`, which a solve sets to the
    menu it based (its default, the record's)."""

    def __init__(
        self,
        core: Core,
        envelope: Envelope,
        job: Job,
        menu: Menu,
        measure: str = "kernel",
        workers: int = 1,
        scheduler: str | None = None,
    ):
        self.core, self.envelope, self.job, self.menu = core, envelope, job, menu
        self.measure, self.workers, self.scheduler = measure, workers, scheduler
        self.runs = 0
        self._references: dict[int, Reference] = {}  # a sample's, by its index
        self._worst: dict[tuple, int] = {}  # the sample each assignment measured missed most
        self._realized: dict[str, tuple[float, int]] = {}  # _measured's, by realization_key

    @cached_property
    def exact(self) -> list[ExactOutput]:
        return exact_outputs(self.core, self.job, self.workers, self.scheduler)

    @property
    def radius(self) -> float:
        """The reference's radius over the samples' exact outputs."""
        return radius(self.exact)

    def moved_to(self, meta: Meta) -> Gauge:
        """A gauge on other samples of the same data (`meta`: the envelope's, moved)."""
        envelope, job = replace(self.envelope, meta=meta), replace(self.job, meta=meta)
        return Gauge(
            self.core, envelope, job, self.menu, self.measure, self.workers, self.scheduler
        )

    def gap(self, assignment: dict[str, str]) -> float:
        """The largest measured gap of `assignment` over the envelope's samples."""
        gap, worst = self._measured(realization_of(self.menu, assignment))
        self._worst[_key(assignment)] = worst
        return gap

    def realized_gap(self, r: Realization) -> float:
        """The largest measured gap of any realization (all-f32, say): a solve's base, then
        the same beside the record (presk/precision/versus.py)."""
        return self._measured(r)[0]

    def _measured(self, r: Realization) -> tuple[float, int]:
        """`r`'s largest gap over the samples and the sample it was on, measured once (a
        realization's gap is the same every time: the base's is the proposal's when
        nothing narrows below it)."""
        key = realization_key(r)
        if key not in self._realized:
            self.runs += 1
            gaps = sample_gaps(self.exact, self.core, self.envelope, r, measured_on(self.measure))
            self._realized[key] = max(gaps), gaps.index(max(gaps))
        return self._realized[key]

    def owns(self, assignment: dict[str, str]) -> dict[str, float]:
        """Each narrowed value's own gap under `assignment` (measured by `gap` first), as
        far as its type explains it, on the sample it missed most: a stored value's
        `typed_own` (presk bisect, against the reference's values of that sample, computed
        once), a parameter's its rounding in its rung relative to its largest weight."""
        meta = self.envelope.meta
        index = meta.first + self._worst[_key(assignment)]
        args, seed = sample_arguments(self.core, meta, index), sample_seed(meta, index)
        if index not in self._references:
            self._references[index] = reference_run(
                self.core, args, seed, meta.bits, meta.reference
            )
        r = realization_of(self.menu, assignment)
        found = against(
            self.core, r, args, seed, measured_on(self.measure), self._references[index]
        )
        sites = self.envelope.sites
        owns = {
            row.site: row.typed_own(sites[row.site].work) for row in found.rows if row.site in sites
        }
        for key, rung in assignment.items():
            if key in self.menu.params and rung != "f64":
                owns[key] = self._parameter_gap(key, rung)
        return owns

    def _parameter_gap(self, key: str, rung: str) -> float:
        """max|ŵ − w| / max|w| of parameter `key` stored in `rung`."""
        w = self._weights[key]
        top = float(np.max(np.abs(w))) if w.size else 0.0
        if is_integer(rung):
            moved = move(w, self._types[key], rung, self.menu.over[key])
        else:
            moved = to_storage(w, rung).astype(np.float64) - w
        return float(np.max(np.abs(moved))) / top if top > 0 else 0.0

    @cached_property
    def _weights(self) -> dict[str, np.ndarray]:
        meta = self.envelope.meta
        values = self.core.params(meta.seed, meta.weights) or {}
        return {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}

    @cached_property
    def _types(self) -> dict:
        return dict(leaves(param_type(self.core.view)))


def _key(assignment: dict[str, str]) -> tuple:
    return tuple(sorted(assignment.items()))


def held_out_samples(core: Core, meta: Meta, count: int, flag: str) -> Meta:
    """The envelope's meta moved to the `count` samples after its own in its data file,
    refused (E3011) before anything runs when there are none: drawn inputs, or a file
    too short."""
    if meta.data is None:
        raise BindingError(
            f"{flag}: the held-out samples are the data file's windows after the envelope's, "
            "and this envelope's inputs were drawn (calibrate it with --data)",
            code="E3011",
        )
    held = replace(meta, first=meta.first + meta.samples, samples=count)
    try:  # the last one reads the most windows
        sample_arguments(core, held, held.first + count - 1)
    except BindingError as e:
        raise BindingError(f"{flag}: held-out {e.message}", code="E3011") from None
    return held


def _largest(exact_outs: list[ExactOutput]) -> float:
    """The output's largest magnitude over the samples: |L| for a scalar entry."""
    return max((float(np.max(np.abs(x))) for xs in exact_outs for x in xs.values), default=0.0)


def exact_outputs(
    core: Core, job: Job, workers: int, scheduler: str | None = None
) -> list[ExactOutput]:
    """The exact outputs of the envelope's samples, on `workers` local processes or on
    the Dask scheduler at `scheduler`: each sample's is the same wherever it runs."""
    indices = list(range(job.meta.first, job.meta.first + job.meta.samples))
    if scheduler is None and (workers == 1 or len(indices) == 1):
        return [exact_output(core, job.meta, i) for i in indices]
    if scheduler is not None:
        spread = on_cluster(scheduler, exact_sample)
    else:
        spread = on_processes(workers, exact_sample)
    by_index = dict(spread(job, indices))
    return [by_index[i] for i in indices]


def exact_sample(job: Job, index: int) -> ExactOutput:
    """One sample's exact output: a task a worker process runs."""
    return exact_output(job.core(), job.meta, index)


# ---- the proposal ---------------------------------------------------------------------------


def propose(menu: Menu, target: float, how: str, moves: list[Move]) -> dict[str, str]:
    """The greedy proposal: from the top of every ladder (f64, or the menu's base), each
    step narrows by one rung the offered value that saves the most of the objective per
    unit of estimate added; a narrowing that would take the estimate past `target`, or
    that saves nothing, is refused, and that value narrows no further."""
    assignment = {k: menu.item(k).ladder[0] for k in menu.offered}
    now = menu.estimate(assignment, how)
    open_keys = sorted(menu.offered)  # max keeps the first of equals: ties go to key order
    while open_keys:
        key, to, after, (_, saved) = max(
            (_trial(menu, assignment, key, how, now, target) for key in open_keys),
            key=lambda trial: trial[3],
        )
        item = menu.item(key)
        taken = after <= target and saved > 0
        outcome = "taken" if taken else "refused" if saved > 0 else "slower"
        moves.append(Move("narrow", key, item.kind, assignment[key], to, outcome, after))
        if taken:
            assignment[key], now = to, after
        if not taken or menu.narrower(key, to) is None:
            open_keys.remove(key)
    return assignment


def _trial(menu: Menu, assignment: dict, key: str, how: str, now: float, target: float):
    """Narrowing `key` one rung: (key, its new rung, the estimate after, its rank). The
    rank is the objective saved at its own kernel per unit of estimate added, a free
    narrowing first, ties to the larger saving. A float rung past `target` is passed over
    for the first integer rung below it inside it: the floats and the integers are aimed
    at the target apart (`Menu.estimate`), so a matrix the floats' sum has no room to
    narrow may still have room in integers."""
    ladder = menu.item(key).ladder
    below = ladder[ladder.index(assignment[key]) + 1 :]
    to = below[0]
    after = menu.estimate({**assignment, key: to}, how)
    if after > target:
        for rung in below[1:]:
            if is_integer(rung) and menu.estimate({**assignment, key: rung}, how) <= target:
                to, after = rung, menu.estimate({**assignment, key: rung}, how)
                break
    saved = menu.saving(assignment, key, to, edges=False)
    added = after - now
    per_unit = math.inf if added <= 0 else saved / added
    if saved <= 0:  # a step that saves nothing ranks below every step that saves
        per_unit = -math.inf
    return key, to, after, (per_unit, saved)


def settle(menu: Menu, assignment: dict[str, str], how: str, moves: list[Move]) -> None:
    """While widening a narrowed value to a wider rung lowers the cost (in time,
    conversions at every kernel's edge included), make the widening that lowers it most:
    a lone bf16 value pays the same conversions in f32, so f64 is tried too. Widening adds
    no rounding, so the estimate stays inside its target; in traffic no widening saves,
    and nothing moves."""
    while True:
        trials = [
            (menu.saving(assignment, k, wider), k, wider)
            for k, t in sorted(assignment.items())
            for wider in menu.item(k).ladder[: menu.item(k).ladder.index(t)]
        ]
        saved, key, wider = max(trials, default=(0.0, None, None), key=lambda x: x[0])
        if saved <= 0:
            return
        rung, assignment[key] = assignment[key], wider
        after = menu.estimate(assignment, how)
        kind = menu.item(key).kind
        moves.append(Move("widen", key, kind, rung, wider, "slower", after))


def widen(
    menu: Menu, assignment: dict[str, str], how: str, gap: float, owns: dict[str, float]
) -> Move:
    """Widen by one rung, after a measurement of `gap` past the budget, the culprit: the
    narrowed value (below the top of its ladder) whose own gap its type explains most
    (`owns`, Gauge.owns); where none has any, the one whose term is largest. Ties go to the
    larger value."""
    narrowed = [k for k, t in assignment.items() if t != menu.item(k).ladder[0]]
    outcome, scores = "culprit", {k: owns.get(k, 0.0) for k in narrowed}
    if not any(scores.values()):
        outcome, scores = "measured", menu.terms(assignment)
    key = max(narrowed, key=lambda k: (scores.get(k, 0.0), menu.item(k).elements, k))
    rung = assignment[key]
    assignment[key] = menu.wider(key, rung)
    after = menu.estimate(assignment, how)
    return Move("widen", key, menu.item(key).kind, rung, assignment[key], outcome, after, gap)


# ---- narrowing by measurement (--narrow) ---------------------------------------------------


def narrow(
    menu: Menu,
    assignment: dict[str, str],
    gauge: Gauge,
    threshold: float,
    options: Options,
    moves: list[Move],
) -> tuple[Narrowing, list[Kept]]:
    """Narrow each decision one rung, the largest saving first, keeping a step while the
    measured gap stays inside `threshold`; up to NARROW_PASSES passes, ending early after
    one that keeps nothing. Returns what it did and the steps kept, in order."""
    kept: list[Kept] = []
    passes = tried = 0
    while passes < NARROW_PASSES:
        passes += 1
        before = len(kept)
        for key in by_next_saving(menu, assignment):
            rung = assignment[key]
            assignment[key] = menu.narrower(key, rung)
            gap = gauge.gap(assignment)
            tried += 1
            outcome = "kept" if gap <= threshold else "rejected"
            after = menu.estimate(assignment, options.estimate)
            item = menu.item(key)
            moves.append(Move("narrow", key, item.kind, rung, assignment[key], outcome, after, gap))
            if outcome == "kept":
                kept.append(Kept(key, rung, gap))
            else:
                assignment[key] = rung
        if len(kept) == before:
            break
    return Narrowing(options.narrow, threshold, passes, tried, len(kept)), kept


def by_next_saving(menu: Menu, assignment: dict[str, str]) -> list[str]:
    """The decisions whose next rung saves something, the largest saving first (of the
    objective, at its own kernel, as the proposal ranks a step): in time, a step to bf16,
    which computes in f32, saves nothing and is not tried."""
    open_keys = [k for k in menu.offered if menu.narrower(k, assignment[k]) is not None]
    saves = {
        k: menu.saving(assignment, k, menu.narrower(k, assignment[k]), edges=False)
        for k in open_keys
    }
    return sorted((k for k in open_keys if saves[k] > 0), key=lambda k: (-saves[k], k))


def undo(
    menu: Menu,
    assignment: dict[str, str],
    kept: list[Kept],
    held: Gauge,
    held_gap: float,
    threshold: float,
    options: Options,
    moves: list[Move],
) -> float:
    """Undo the kept steps (popping them from `kept`), the last first, until the held-out
    gap is inside budget/margin too (early stopping: the held-out samples judge the
    sequence of steps, not each step). Returns the held-out gap after."""
    while held_gap > threshold and kept:
        step = kept.pop()
        narrower = assignment[step.key]
        assignment[step.key] = step.rung
        after = menu.estimate(assignment, options.estimate)
        kind = menu.item(step.key).kind
        move = Move("widen", step.key, kind, narrower, step.rung, "held out", after, held_gap)
        moves.append(move)
        held_gap = held.gap(assignment)
    return held_gap


# ---- the exhaustive search -----------------------------------------------------------------


def check_exhaustive(menu: Menu) -> None:
    """Refuse (E0001) a search over more than MAX_ASSIGNMENTS assignments."""
    lengths = [len(menu.item(k).ladder) for k in menu.offered]
    count = math.prod(lengths)
    if count > MAX_ASSIGNMENTS:
        powers = " × ".join(f"{n}^{lengths.count(n)}" for n in sorted(set(lengths)))
        raise UsageError(
            f"--exhaustive: {len(menu.offered)} values offered make {powers} = {count} "
            f"assignments; the search takes at most {MAX_ASSIGNMENTS} (12 values)"
        )


def search(menu: Menu, target: float, how: str) -> Exhaustive:
    """The least traffic over every assignment of the offered values whose estimate is
    inside `target` (the rest at the record's default): the optimum of the same estimate
    the greedy proposal uses."""
    keys = menu.offered
    ladders = [menu.item(k).ladder for k in keys]
    picks = np.array(list(itertools.product(*(range(len(x)) for x in ladders))), dtype=np.int8)
    picks = picks.reshape(-1, len(keys)).astype(np.intp)
    column = {  # each value's rung in ORDER's numbering
        k: np.array([ORDER.index(t) for t in ladder])[picks[:, i]]
        for i, (k, ladder) in enumerate(zip(keys, ladders, strict=True))
    }
    f64 = np.zeros(len(picks), dtype=np.intp)
    default = np.full(len(picks), ORDER.index(menu.default), dtype=np.intp)
    terms, integers = [], []  # each term, and whether its value is at an integer rung
    for key, p in (*menu.values.items(), *menu.params.items()):
        if p.terms is not None:
            own = column.get(key, default)
            reader = np.maximum.reduce([f64] + [column.get(k, default) for k in p.readers])
            terms.append(_priced(p.terms, own, reader))
            integers.append(own >= len(RUNGS))
    stacked = np.array(terms) if terms else np.zeros((1, len(picks)))
    ints = np.array(integers) if integers else np.zeros((1, len(picks)), dtype=bool)
    with np.errstate(invalid="ignore"):  # Menu.estimate: the larger of the two kinds
        integers = np.sqrt(np.sum(np.where(ints, stacked**2, 0.0), axis=0))
        floats = np.where(ints, 0.0, stacked)
        if how == "rss":
            floats = np.sqrt(np.sum(floats**2, axis=0))
        else:
            floats = np.sum(floats, axis=0)
        total = np.maximum(floats, integers)
    saved = np.zeros(len(picks), dtype=np.int64)
    for i, (k, ladder) in enumerate(zip(keys, ladders, strict=True)):
        saved += np.array([menu.item(k).saving(t) for t in ladder])[picks[:, i]]
    inside = total <= target
    every_f64 = menu.traffic(dict.fromkeys(keys, "f64"))  # the rest at the default
    return Exhaustive(len(picks), int(every_f64 - saved[inside].max()))


ORDER = (*RUNGS, *INTEGER_RUNGS)  # every rung, a float's position its width's


def _priced(terms: dict[str, float], own: np.ndarray, reader: np.ndarray) -> np.ndarray:
    """`Priced.term` over arrays of rungs (ORDER's positions)."""
    table = np.array([terms.get(t, np.nan) for t in ORDER])
    floats = table[np.maximum(own, reader)]
    again = np.where(reader > RUNGS.index("f32"), table[reader], 0.0)
    return np.where(own >= len(RUNGS), np.maximum(table[own], again), floats)
