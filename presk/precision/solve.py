"""`presk solve`: an error budget in, the cheapest realization out, verified by measurement.

The solver chooses a rung of the ladder f64 → f32 → bf16 for each value offered
(presk/precision/offers.py) to minimise traffic under the budget, a multiple-choice
knapsack. It proposes greedily, one rung at a time, in order of bytes saved per unit of
estimate added, refusing a narrowing that takes the estimate past its target. Then it
measures: the candidate runs on the envelope's samples against the exact reference, and
while the gap exceeds the budget it widens the value with the largest term one rung. The
estimate only ranks (it is first-order, and blind to what a type's range or an
accumulation does inside a kernel); the measurement decides. Every move is recorded.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from presk.api import Core
from presk.errors import UsageError
from presk.precision.bound import exact_output, gap_to
from presk.precision.calibrate import Job, on_processes
from presk.precision.envelope import Envelope
from presk.precision.offers import BYTES, RUNGS, Menu, estimate
from presk.realize import Realization

MAX_ASSIGNMENTS = 3**12  # --exhaustive enumerates every assignment: 12 values at most
BACKENDS = {"kernel": "kernel", "native": "mlir"}  # --measure's choices, the backends they run


@dataclass(frozen=True)
class Options:
    budget: float  # ε, relative to the output's largest magnitude unless `absolute`
    absolute: bool = False
    estimate: str = "sum"  # or "rss"
    margin: float = 2.5  # rss aims at budget / margin
    measure: str = "kernel"  # or "native"
    exhaustive: bool = False
    workers: int = 1


@dataclass(frozen=True)
class Move:
    move: str  # "narrow" or "widen"
    key: str
    kind: str  # "value" or "parameter"
    rung: str  # from
    to: str
    outcome: str  # a narrowing "taken" or "refused" by the estimate; a widening "measured"
    estimate: float  # the estimate had the move been made
    gap: float | None = None  # the measurement a widening follows

    def record(self) -> dict:
        out = {
            "move": self.move,
            "key": self.key,
            "kind": self.kind,
            "from": self.rung,
            "to": self.to,
            "outcome": self.outcome,
            "estimate": _json(self.estimate),
        }
        if self.gap is not None:
            out["gap"] = _json(self.gap)
        return out


@dataclass(frozen=True)
class Exhaustive:
    assignments: int  # how many were enumerated
    optimum: int  # the least traffic whose estimate is inside the target


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
    measurements: int
    moves: list[Move] = field(default_factory=list)
    exhaustive: Exhaustive | None = None

    @property
    def inside(self) -> bool:
        return self.gap <= self.budget

    @property
    def realization(self) -> Realization:
        return realization_of(self.menu, self.assignment)

    def record(self) -> dict:
        """The realization record `--realize @R.json` reads."""
        r = self.realization
        return {"default": r.default, "storage": r.storage, "params": r.params}


def realization_of(menu: Menu, assignment: dict[str, str]) -> Realization:
    narrowed = {k: t for k, t in assignment.items() if t != "f64"}
    return Realization(
        "f64",
        storage={k: t for k, t in narrowed.items() if k in menu.values},
        params={k: t for k, t in narrowed.items() if k in menu.params},
        spelling="presk solve",
    )


def solve(core: Core, envelope: Envelope, job: Job, menu: Menu, options: Options) -> Solution:
    """The cheapest assignment the greedy proposal and the widening find, measured inside
    the budget (or all-f64, if even that is not)."""
    if options.exhaustive:
        check_exhaustive(menu)
    exact_outs = exact_outputs(core, job, options.workers)
    scale = 1.0 if options.absolute else _largest(exact_outs)
    if scale == 0:
        raise UsageError(
            "the exact output is 0 on every sample: a relative budget bounds nothing; "
            "give --budget-abs"
        )
    budget = options.budget * scale
    target = budget / options.margin if options.estimate == "rss" else budget
    moves: list[Move] = []
    proposed = propose(menu, target, options.estimate, moves)
    assignment = dict(proposed)

    def measure() -> float:
        r = realization_of(menu, assignment)
        return gap_to(exact_outs, core, envelope, r, BACKENDS[options.measure])

    gap, measurements, rounds = measure(), 1, 0
    while gap > budget and any(t != "f64" for t in assignment.values()):
        moves.append(widen(menu, assignment, options.estimate, gap))
        rounds += 1
        gap, measurements = measure(), measurements + 1
    return Solution(
        menu,
        scale,
        budget,
        target,
        proposed,
        assignment,
        estimate(menu.terms(assignment).values(), options.estimate),
        gap,
        rounds,
        measurements,
        moves,
        search(menu, target, options.estimate) if options.exhaustive else None,
    )


def _largest(exact_outs: list[list[np.ndarray]]) -> float:
    """The output's largest magnitude over the samples: |L| for a scalar entry."""
    return max((float(np.max(np.abs(x))) for xs in exact_outs for x in xs), default=0.0)


def exact_outputs(core: Core, job: Job, workers: int) -> list[list[np.ndarray]]:
    """The exact outputs of the envelope's samples, on `workers` local processes: each
    sample's is the same wherever it runs."""
    indices = list(range(job.meta.first, job.meta.first + job.meta.samples))
    if workers == 1 or len(indices) == 1:
        return [exact_output(core, job.meta, i) for i in indices]
    spread = on_processes(workers, exact_sample)
    by_index = dict(spread(job, indices))
    return [by_index[i] for i in indices]


def exact_sample(job: Job, index: int) -> list[np.ndarray]:
    """One sample's exact output: a task a worker process runs."""
    return exact_output(job.core(), job.meta, index)


# ---- the proposal ---------------------------------------------------------------------------


def propose(menu: Menu, target: float, how: str, moves: list[Move]) -> dict[str, str]:
    """The greedy proposal: from all-f64, each step narrows by one rung the offered value
    that saves the most bytes per unit of estimate added; a narrowing that would take the
    estimate past `target` is refused, and that value narrows no further."""
    assignment = dict.fromkeys(menu.offered, "f64")
    now = 0.0
    open_keys = sorted(menu.offered)  # max keeps the first of equals: ties go to key order
    while open_keys:
        key, to, after = max(
            (_trial(menu, assignment, key, how, now) for key in open_keys),
            key=lambda trial: trial[3],
        )[:3]
        item = menu.item(key)
        taken = after <= target
        outcome = "taken" if taken else "refused"
        moves.append(Move("narrow", key, item.kind, assignment[key], to, outcome, after))
        if taken:
            assignment[key], now = to, after
        if not taken or to == RUNGS[-1]:
            open_keys.remove(key)
    return assignment


def _trial(menu: Menu, assignment: dict, key: str, how: str, now: float):
    """Narrowing `key` one rung: (key, its new rung, the estimate after, its rank). The
    rank is bytes saved per unit of estimate added, a free narrowing first, ties to the
    larger saving."""
    rung = assignment[key]
    to = RUNGS[RUNGS.index(rung) + 1]
    after = estimate(menu.terms({**assignment, key: to}).values(), how)
    saved = menu.item(key).elements * (BYTES[rung] - BYTES[to])
    added = after - now
    per_unit = math.inf if added <= 0 else saved / added
    return key, to, after, (per_unit, saved)


def widen(menu: Menu, assignment: dict[str, str], how: str, gap: float) -> Move:
    """Widen by one rung the narrowed value whose term is largest (ties to the larger
    value), after a measurement of `gap` past the budget."""
    terms = menu.terms(assignment)
    narrowed = [k for k, t in assignment.items() if t != "f64"]
    key = max(narrowed, key=lambda k: (terms.get(k, 0.0), menu.item(k).elements, k))
    rung = assignment[key]
    assignment[key] = RUNGS[RUNGS.index(rung) - 1]
    after = estimate(menu.terms(assignment).values(), how)
    return Move("widen", key, menu.item(key).kind, rung, assignment[key], "measured", after, gap)


# ---- the exhaustive search -----------------------------------------------------------------


def check_exhaustive(menu: Menu) -> None:
    """Refuse (E0001) a search over more than MAX_ASSIGNMENTS assignments."""
    count = len(RUNGS) ** len(menu.offered)
    if count > MAX_ASSIGNMENTS:
        raise UsageError(
            f"--exhaustive: {len(menu.offered)} values offered make {len(RUNGS)}^"
            f"{len(menu.offered)} = {count} assignments; the search takes at most "
            f"{MAX_ASSIGNMENTS} (12 values)"
        )


def search(menu: Menu, target: float, how: str) -> Exhaustive:
    """The least traffic over every assignment of the offered values whose estimate is
    inside `target`: the optimum of the same estimate the greedy proposal uses."""
    keys = menu.offered
    rungs = np.array(list(itertools.product(range(len(RUNGS)), repeat=len(keys))), dtype=np.int8)
    rungs = rungs.reshape(-1, len(keys))
    column = {k: rungs[:, i] for i, k in enumerate(keys)}
    f64 = np.zeros(len(rungs), dtype=np.int8)
    terms = []
    for key, v in menu.values.items():
        if v.terms is not None:
            terms.append(_priced(v.terms, column.get(key, f64)))
    for key, p in menu.params.items():
        if p.terms is not None:
            read = np.maximum.reduce([column.get(k, f64) for k in (key, *p.readers)])
            terms.append(_priced(p.terms, read))
    stacked = np.array(terms) if terms else np.zeros((1, len(rungs)))
    with np.errstate(invalid="ignore"):
        total = np.sqrt(np.sum(stacked**2, axis=0)) if how == "rss" else np.sum(stacked, axis=0)
    saved_per_rung = np.array([[menu.item(k).saving(t) for t in RUNGS] for k in keys])
    saved = (
        np.take_along_axis(saved_per_rung.T, rungs.astype(np.intp), axis=0).sum(axis=1)
        if keys
        else np.zeros(1)
    )
    inside = total <= target
    return Exhaustive(len(rungs), int(menu.all_f64 - saved[inside].max()))


def _priced(terms: dict[str, float], rungs: np.ndarray) -> np.ndarray:
    return np.array([terms[t] for t in RUNGS])[rungs]


def _json(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"
