"""presk solve --step: a budget on one training step's update gap in, a realization of the
step out, chosen by measurement (docs/precision.md, section 11).

The budget ε binds ‖θ̂′ − θ′‖₂ / ‖θ′ − θ‖₂, the update gap `presk calibrate --step`
measures (presk/precision/step_gap.py), from the same state: trained parameters and
warm-up steps in f64, the exact step computed once a state. A decision is a function of
the step (`--grain function`: every function with launch sites, the loss's forward and
backward functions and the prelude's adamw.clip, adamw.schedule and adamw.step) or one
stored value (`--grain value`: a launch site, of more than one element, outside
adamw.step, whose values are the master weights and AdamW's moments with what they are
made of, kept in the default type). Each takes a rung of f64 → f32 → bf16, and the
realization stores every launch site of a decision in its rung.

The search is greedy by measurement: from all-f64, each decision is narrowed one rung,
the largest saving of bytes first (a site's elements in one step times its type's
bytes), and the narrowing kept while the measured update gap stays inside budget/margin;
up to three passes, ending early after one that keeps nothing, and after `most`
measurements in all (a native step and its gap are seconds of compilation each, and the
corpus GPT has a hundred values).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

from presk.errors import RealizationError
from presk.kernel.machine import ELEMENTS
from presk.precision.offers import RUNGS
from presk.precision.step_gap import Reference, Setup, origin, trainer_for, update_gap
from presk.realize import Realization
from presk.stages import launch_sites

GRAINS = ("function", "value")
PASSES = 3
STATE = "adamw.step"  # the function whose values are the optimizer's state (kept at grain value)


@dataclass(frozen=True)
class Decision:
    """What one rung is chosen for: a function's launch sites, or one site."""

    key: str
    sites: tuple[str, ...]
    elements: int  # stored by the sites in one step

    def bytes(self, rung: str) -> int:
        return self.elements * ELEMENTS[rung].itemsize


@dataclass
class StepSolution:
    grain: str
    budget: float
    margin: float
    decisions: list[Decision]
    elements: dict[str, int]  # every launch site's, one step
    assignment: dict[str, str]  # a rung by decision key
    gap: float  # the measured update gap of `assignment`
    base: float  # all-f64's, measured first
    most: int  # the cap on measurements
    seconds: list[float]  # each measurement's, all-f64's first
    passes: int = 0
    tried: int = 0
    kept: int = 0

    @property
    def measurements(self) -> int:
        return len(self.seconds)

    @property
    def inside(self) -> bool:
        return self.gap <= self.budget

    @property
    def threshold(self) -> float:
        return self.budget / self.margin

    @property
    def realization(self) -> Realization:
        return realization_of(self.decisions, self.assignment)

    def record(self) -> dict:
        """The realization record `--realize @R.json` reads."""
        r = self.realization
        return {"default": r.default, "storage": r.storage}

    def traffic(self) -> int:
        """Bytes the step's stored values take under the solution."""
        r = self.realization
        return sum(n * ELEMENTS[r.type_at(s)].itemsize for s, n in self.elements.items())

    def all_f64(self) -> int:
        return sum(self.elements.values()) * ELEMENTS["f64"].itemsize


def realization_of(decisions: list[Decision], assignment: dict[str, str]) -> Realization:
    storage = {
        s: assignment[d.key] for d in decisions if assignment[d.key] != "f64" for s in d.sites
    }
    return Realization("f64", storage=dict(sorted(storage.items())), spelling="presk solve")


def decisions_of(grain: str, elements: dict[str, int]) -> list[Decision]:
    """The decisions of `grain` over the step's launch sites and their elements."""
    if grain == "value":
        return [
            Decision(s, (s,), n)
            for s, n in sorted(elements.items())
            if n > 1 and function_of(s) != STATE
        ]
    by_function: dict[str, list[str]] = {}
    for s in sorted(elements):
        by_function.setdefault(function_of(s), []).append(s)
    return [
        Decision(f, tuple(sites), sum(elements[s] for s in sites))
        for f, sites in sorted(by_function.items())
    ]


def function_of(site: str) -> str:
    """`Linear.apply.bwd/%3` -> `Linear.apply.bwd`."""
    return site.rsplit("/", 1)[0]


def site_elements(setup: Setup, state, batch) -> dict[str, int]:
    """Every launch site's real elements stored in one step (a site storing indices or
    booleans has no type to choose): the step run once on the kernel evaluator, each
    function's launches counted as it runs (a layer's as often as the fold runs it)."""
    compiled = setup.core.lower("f64").compile("kernel")
    counts: Counter[str] = Counter()

    def count(fn, slots) -> None:
        for op in fn.ops:
            if op.name == "psk_kernel.launch" and op.type.kind == "real":
                counts[op.site] += math.prod(op.type.shape)

    compiled.backend.host.observe = count
    trainer = trainer_for(setup, compiled)
    args = trainer.call_args(state, setup.step, batch)
    trainer.backend.call(args, trainer.context(setup.step), trainer.symbol)
    return {s: counts[s] for s in launch_sites(compiled.module) if counts[s]}


class StepGauge:
    """Update gaps of native steps from one state, against the exact step from there."""

    def __init__(self, setup: Setup, state, batch):
        grad_core = setup.core.derived(entry=f"{setup.core.entry}.grad", train_step=False)
        self.setup, self.state, self.batch = setup, state, batch
        self.reference = Reference(setup, grad_core, batch)
        self.seconds: list[float] = []

    def gap(self, r: Realization) -> float:
        """`r`'s update gap; +∞ where the native backend cannot honour `r` (E7002: a
        row-wise nest that would sum in bf16), a narrowing not to take."""
        start = time.perf_counter()
        try:
            gap = update_gap(self.setup, r, self.state, self.batch, self.reference)
        except RealizationError as e:
            if e.code != "E7002":
                raise
            gap = math.inf
        self.seconds.append(time.perf_counter() - start)
        return gap


def solve_step(setup: Setup, grain: str, budget: float, margin: float, most: int) -> StepSolution:
    """The step's realization under `budget` by greedy narrowing, measured natively."""
    _, state, batch = origin(setup)
    elements = site_elements(setup, state, batch)
    decisions = decisions_of(grain, elements)
    gauge = StepGauge(setup, state, batch)
    assignment = {d.key: "f64" for d in decisions}
    base = gauge.gap(realization_of(decisions, assignment))
    solution = StepSolution(
        grain, budget, margin, decisions, elements, assignment, base, base, most, gauge.seconds
    )
    narrow(solution, gauge)
    return solution


def narrow(s: StepSolution, gauge: StepGauge) -> None:
    """Narrow each decision one rung, the largest saving first, keeping a step while the
    measured gap stays inside budget/margin; up to PASSES passes and `s.most` measurements
    in all."""
    while s.passes < PASSES and s.measurements < s.most:
        s.passes += 1
        before = s.kept
        for d in by_next_saving(s):
            if s.measurements >= s.most:
                break
            rung = s.assignment[d.key]
            s.assignment[d.key] = RUNGS[RUNGS.index(rung) + 1]
            gap = gauge.gap(s.realization)
            s.tried += 1
            if gap <= s.threshold:
                s.kept += 1
                s.gap = gap
            else:
                s.assignment[d.key] = rung
        if s.kept == before:
            break


def by_next_saving(s: StepSolution) -> list[Decision]:
    """The decisions that can narrow, the largest saving of their next rung first."""
    open_ = [d for d in s.decisions if s.assignment[d.key] != RUNGS[-1]]

    def saving(d: Decision) -> int:
        rung = s.assignment[d.key]
        return d.bytes(rung) - d.bytes(RUNGS[RUNGS.index(rung) + 1])

    return sorted(open_, key=lambda d: (-saving(d), d.key))
