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
the largest saving first, and the narrowing kept while the measured update gap stays
inside budget/margin; up to three passes, ending early after one that keeps nothing, and
after `most` measurements in all (a native step and its gap are seconds of compilation
each, and the corpus GPT has a hundred values). What a narrowing saves is the objective's
(offers.Objective) at its sites' own kernels, over the step's stored values as a menu
(`step_menu`): bytes (a site's elements in one step times its type's bytes), or with a
profile the step's predicted time (each launch site's kernel at its roofline). A
narrowing that saves nothing is not tried: in time, bf16, which presk computes in f32 and
prices no faster than f32 (offers.Time), is not taken for speed.
Rule 2 counts the objective too: a decision whose first narrowing saves less than θ of
the all-f64 cost is not offered.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

from presk.errors import RealizationError
from presk.kernel.machine import ELEMENTS
from presk.precision.calibrate import work
from presk.precision.offers import RUNGS, TRAFFIC, Menu, Priced, Time
from presk.precision.profile import Profile
from presk.precision.step_gap import Reference, Setup, origin, trainer_for, update_gap
from presk.prims.base import Apply
from presk.reach import value_readers
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
    menu: Menu  # the step's stored values, priced by the objective
    left_out: list[str]  # the decisions rule 2 did not offer
    passes: int = 0
    tried: int = 0
    kept: int = 0
    radius: float = 0.0  # the reference's, relative to the exact update (0 on MPFR)

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

    def sites(self, assignment: dict[str, str] | None = None) -> dict[str, str]:
        """`assignment` (the solution's by default) as a rung by launch site."""
        chosen = self.assignment if assignment is None else assignment
        return {site: rung_of(d, chosen) for d in self.decisions for site in d.sites}

    def rungs(self) -> list[str]:
        """Each decision's rung, those rule 2 left out at the record's default."""
        return [rung_of(d, self.assignment) for d in self.decisions]

    def saving(self, d: Decision) -> float:
        """What narrowing `d` one rung saves of the objective at its own kernels, as the
        envelope's proposal prices a step (a function narrowed alone pays conversions at
        its edges that narrowing its neighbours removes)."""
        sites = self.sites()
        to = RUNGS[RUNGS.index(self.assignment[d.key]) + 1]
        return sum(self.menu.saving(sites, site, to, edges=False) for site in d.sites)

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
    """The record of `assignment` (by decision key; a decision it leaves out takes the
    default): its default the optimizer's rung where that is a decision (the step's
    arguments are the state `adamw.step` stores, so that they are read in the type they are
    stored in, with no conversion a step), f64 otherwise; every site of another rung
    named."""
    default = assignment.get(STATE, "f64")
    storage = {
        s: rung_of(d, assignment)
        for d in decisions
        if rung_of(d, assignment) != default
        for s in d.sites
    }
    return Realization(default, storage=dict(sorted(storage.items())), spelling="presk solve")


def rung_of(d: Decision, assignment: dict[str, str]) -> str:
    """`d`'s rung in `assignment`, or the record's default if it leaves `d` out."""
    return assignment.get(d.key, assignment.get(STATE, "f64"))


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


def site_elements(setup: Setup, state, batch) -> tuple[dict[str, int], dict[str, int]]:
    """Every launch site's real elements stored in one step (a site storing indices or
    booleans has no type to choose), and its launches: the step run once on the kernel
    evaluator, each function's launches counted as it runs (a layer's as often as the fold
    runs it)."""
    compiled = setup.core.lower("f64").compile("kernel")
    counts: Counter[str] = Counter()
    launches: Counter[str] = Counter()

    def count(fn, slots) -> None:
        for op in fn.ops:
            if op.name == "psk_kernel.launch" and op.type.kind == "real":
                counts[op.site] += math.prod(op.type.shape)
                launches[op.site] += 1

    compiled.backend.host.observe = count
    trainer = trainer_for(setup, compiled)
    args = trainer.call_args(state, setup.step, batch)
    trainer.backend.call(args, trainer.context(setup.step), trainer.symbol)
    sites = [s for s in launch_sites(compiled.module) if counts[s]]
    return {s: counts[s] for s in sites}, {s: launches[s] for s in sites}


def step_menu(
    setup: Setup,
    elements: dict[str, int],
    launches: dict[str, int],
    profile: Profile | None,
    min_gain: float,
) -> Menu:
    """The step's stored values as a menu the objective prices (nothing is offered: the
    decisions are the step's own): bytes, or with `profile` predicted time, each site's
    kernel at W = its primitive's work per element × its elements."""
    module = setup.core.lower("f64").module
    read_by = value_readers(module.operation)
    values = {
        site: Priced(site, "value", n, None, tuple(sorted(read_by.get(site, ()))))
        for site, n in elements.items()
    }
    all_f64 = sum(v.bytes("f64") for v in values.values())
    objective = TRAFFIC
    if profile is not None:
        per_element = site_work(setup)
        total = {site: per_element.get(site, 1) * n for site, n in elements.items()}
        objective = Time(profile, total, launches)
    return Menu(values, {}, (), {}, all_f64, min_gain, objective)


def site_work(setup: Setup) -> dict[str, int]:
    """By launch site, its primitive's work per element (calibrate.work), read from the
    step's PSK-Core with the types its operands have there; the largest call's."""
    out: dict[str, int] = {}
    for fn in setup.core.view.functions.values():
        types = dict(enumerate(fn.arg_types))
        for op in fn.ops:
            types[op.out] = op.type
        for op in fn.ops:
            if op.site is None or op.prim is None or op.type.kind != "real":
                continue
            ap = Apply(op.attrs, [types[i] for i in op.ins], op.type, op.site, True, None)
            out[op.site] = max(out.get(op.site, 1), work(op.prim, ap))
    return out


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


def solve_step(
    setup: Setup,
    grain: str,
    budget: float,
    margin: float,
    most: int,
    profile: Profile | None = None,
    min_gain: float = 0.0,
) -> StepSolution:
    """The step's realization under `budget` by greedy narrowing, measured natively, the
    objective bytes or, with `profile`, predicted time; rule 2 at θ = `min_gain`."""
    _, state, batch = origin(setup)
    elements, launches = site_elements(setup, state, batch)
    menu = step_menu(setup, elements, launches, profile, min_gain)
    every = decisions_of(grain, elements)
    gauge = StepGauge(setup, state, batch)
    assignment = {d.key: "f64" for d in every}
    base = gauge.gap(realization_of(every, assignment))
    solution = StepSolution(
        grain, budget, margin, every, elements, assignment, base, base, most, gauge.seconds,
        menu, [],
    )  # fmt: skip
    least = min_gain * menu.cost({})
    saves = {d.key: solution.saving(d) for d in every}
    solution.left_out = [k for k, saved in saves.items() if saved <= 0 or saved < least]
    for key in solution.left_out:  # not decided: it takes whatever the record's default is
        del assignment[key]
    narrow(solution, gauge)
    solution.radius = gauge.reference.radius
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
    """The decisions whose next rung saves something, the largest saving first."""
    offered = [d for d in s.decisions if d.key in s.assignment]
    saves = {d.key: s.saving(d) for d in offered if s.assignment[d.key] != RUNGS[-1]}
    open_ = [d for d in offered if saves.get(d.key, 0) > 0]
    return sorted(open_, key=lambda d: (-saves[d.key], d.key))
