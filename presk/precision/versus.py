"""A solved realization in its user's terms: against all-f64 and all-f32, the realizations
they would otherwise run, in bytes, in measured gap and in measured time on this machine
(docs/precision.md, section 7, "In the user's terms").

The time is measured, not predicted: the three realizations compiled natively and timed
in turns (`timing.timed_in_turns`: blocks of calls of each in turn, so that a machine
slowing down during the run slows all three alike), each one's median; a record that is
all-f32 or all-f64 is the same kernels, compiled and timed once. The inputs are those
`presk bench` times with the envelope's seed and weights.

Under an objective with uniform bases (time: presk/precision/offers.py), the record must
run at least as fast as the fastest uniform realization inside the budget, or be it
(`answered`): the prediction that chose the record ranks candidates, the machine decides.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from presk import backends
from presk.api import Core
from presk.precision.offers import Menu
from presk.precision.solve import Gauge, Solution, realization_key, realization_of, uniform
from presk.realize import Realization
from presk.timing import TURNS, timed_in_turns

REPEAT = 20  # timed calls of each
SOLVED = "the solved record"
UNIFORM = {"all-f32": "f32", "all-f64": "f64"}  # the uniform runs, by name: their type


@dataclass(frozen=True)
class Run:
    """One realization: its traffic, its measured gap over the envelope's samples and its
    median call on this machine."""

    name: str
    bytes: int
    gap: float
    ms: float


@dataclass(frozen=True)
class Versus:
    solved: Run
    f32: Run
    f64: Run
    backend: str  # the native backend that ran them
    repeat: int
    same_as: str | None = None  # the uniform run's name the solved record is, if it is one
    own: Run | None = None  # the solve's own record, when the record became a faster uniform

    def f32_fastest(self, budget: float) -> bool:
        """Whether all-f32 is inside the budget and runs faster than the solved record."""
        return self.f32.gap <= budget and self.f32.ms < self.solved.ms

    def fastest_inside(self, budget: float) -> Run | None:
        """The faster of all-f32 and all-f64 among those inside the budget."""
        inside = [r for r in (self.f32, self.f64) if r.gap <= budget]
        return min(inside, key=lambda r: r.ms, default=None)


def versus(
    core: Core,
    menu: Menu,
    assignment: dict[str, str],
    gauge: Gauge,
    repeat: int = REPEAT,
    threads: int | None = None,
) -> Versus:
    """The solved `assignment` of `menu` beside all-f32 and all-f64: their gaps measured by
    `gauge` (the solved one's again), their calls timed natively on `threads`."""
    native = backends.names(exact=False, native=True)[0]
    realizations = {
        SOLVED: realization_of(menu, assignment),
        "all-f32": Realization("f32", spelling="f32"),
        "all-f64": Realization("f64", spelling="f64"),
    }
    timed_as: dict[str, str] = {}  # by name, the name whose calls time it
    for name, r in realizations.items():
        twin = (
            n for n in timed_as.values() if realization_key(realizations[n]) == realization_key(r)
        )
        timed_as[name] = next(twin, name)
    meta = gauge.envelope.meta
    calls = {
        name: core.lower(realizations[name]).compile(native, threads).drawn(meta.seed, meta.weights)
        for name in dict.fromkeys(timed_as.values())
    }
    timed = timed_in_turns(calls, repeat, min(TURNS, repeat))
    ms = {name: statistics.median(timed[timed_as[name]]) for name in realizations}
    items = (*menu.values.values(), *menu.params.values())
    traffic = {
        SOLVED: menu.traffic(assignment),
        "all-f32": sum(p.bytes("f32") for p in items),
        "all-f64": menu.all_f64,
    }
    runs = {
        name: Run(name, traffic[name], gauge.realized_gap(r), ms[name])
        for name, r in realizations.items()
    }
    same_as = next((n for n in UNIFORM if timed_as[n] == SOLVED), None)
    return Versus(runs[SOLVED], runs["all-f32"], runs["all-f64"], native, repeat, same_as)


def answered(s: Solution, v: Versus, how: str, gauge: Gauge) -> tuple[Solution, Versus]:
    """Under a base (`s.base`; none under traffic): `s` and `v` as they are if the record ran
    at least as fast as the fastest uniform realization inside the budget, else that
    realization as the record (`solve.uniform`, its gap on any held-out samples measured
    by `gauge` moved there, its estimate by `how`), `v` keeping the solve's own run."""
    fastest = v.fastest_inside(s.budget)
    if s.base is None or fastest is None or v.solved.ms <= fastest.ms:
        return s, v
    rung = UNIFORM[fastest.name]
    held_gap = None
    if s.held_out is not None:
        held = gauge.moved_to(s.held_out.meta)
        held_gap = held.realized_gap(Realization(rung, spelling=rung))
    s = uniform(s, rung, fastest.gap, how, held_gap)
    solved = replace(fastest, name=SOLVED)
    return s, replace(v, solved=solved, same_as=fastest.name, own=v.solved)
