"""`presk bisect`: where a realization's error came from, site by site.

The realization runs on a machine backend and the exact reference runs beside it, on the
same inputs. Both runs are watched through their hosts' `apply`: the machine's records
each launch (its site, the buffers it read, the buffer it wrote), the reference's the
value of each of those sites (a launch's site is its fusion group's root, so the values
compared are the stored ones). A site run many times (a shared function's calls, a
fold's layers) is compared run by run, in order.

For each run of a launch, in the site's own terms:

    gap       = max|v̂ − v| / (max|v| + tiny)       v̂ the machine's value, v the exact one
    inherited = the largest gap among the buffers its kernel read
    own       = gap − inherited (0 if negative)     what its inputs' gaps do not explain
    jump      = gap / (inherited + SLACK · 2⁻⁵³)

A buffer another launch wrote has that run's gap; any other buffer (an argument, a
parameter, a constant) was at most rounded to its type once, and counts as that type's
unit roundoff (for integer weights, half a step of the grid at the largest weight). A
site's row is its run of largest `own`. The site jumps when `jump` is above 1: its value
is further from the exact one than anything it read, by more than SLACK roundings in f64
(the slack an f64 kernel needs). Of the sites that jump, those of largest `own` are the
ones that spent the budget. A site's own rounding is its own (a bf16 kernel among f64
ones jumps by about 2⁴⁰), and so is amplification (an exp of inputs near 3 triples
their gap, a mean of values that nearly cancel multiplies theirs): a jump says where
the gap grew, whatever made it grow.

What widening a site can remove is its type's part of that: `typed_own`, its own gap as
far as its own roundings, amplified as its inputs' gaps were, can make it (presk solve
widens by it, presk/precision/solve.py). The reference's values of one sample serve any
number of realizations (`Reference`, `against`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from presk.api import Compiled, Core
from presk.backends.host import CallContext
from presk.backends.schedule import Schedule, materialized
from presk.kernel.machine import ELEMENTS
from presk.precision.rules import UNIT
from presk.precision.samples import sample_arguments
from presk.precision.sensitivity import site_descriptions
from presk.prims import exact
from presk.quantize import Quantized
from presk.runtime.values import leaves
from presk.stages import launch_sites

# The f64 roundings a kernel may add before its site counts as a jump: a fused chain
# rounds once an op, and a sum of n terms up to n times.
SLACK = 16
FLOOR = SLACK * UNIT["f64"]
TINY = float(np.finfo(np.float64).tiny)  # keeps a gap finite where the exact value is 0

TYPE_OF = {dtype: name for name, dtype in ELEMENTS.items()}  # a buffer's dtype -> its type


@dataclass(frozen=True)
class Inputs:
    """What `samples.sample_arguments` reads of an envelope's meta: the parameters'
    file (else initialised at the seed), the data file (else inputs drawn at the seed)."""

    seed: int = 0
    weights: str | None = None
    data: str | None = None


@dataclass
class LaunchRun:
    """One run of a launch on the machine: what it read and wrote."""

    site: str
    reads: list  # the data of each input (arrays, or the mlir schedule's buffers)
    wrote: object  # the data of its output
    value: np.ndarray | None = None  # the output's values once the run is over
    gap: float = 0.0
    inherited: float = 0.0


@dataclass(frozen=True)
class Row:
    """A launch site against the reference: its run of largest own gap."""

    site: str
    what: str  # the op (and its `let` name) of the launch's root
    source: str  # "file:line"
    type: str  # the type its value is stored in
    gap: float
    inherited: float
    runs: int
    peak: float  # the largest gap over its runs

    @property
    def own(self) -> float:
        return own(self.gap, self.inherited)

    @property
    def jump(self) -> float:
        return self.gap / (self.inherited + FLOOR)

    def typed_own(self, work: int) -> float:
        """The part of its own gap its type can have made: its `work` + 1 roundings (a sum
        of k terms rounds k times, then its store) amplified as much as its inputs' gaps
        were (gap / inherited), at most. Past that, its own gap is its inputs' errors
        amplified (a cancellation), which no type of its own removes. A value that is not
        finite where its inputs are is its type's doing (an overflow), whole."""
        amplified = self.gap / self.inherited if self.inherited > 0 else math.inf
        return min(self.own, amplified * (work + 1) * UNIT[self.type])


def own(gap: float, inherited: float) -> float:
    """The part of a value's gap that what it read does not explain."""
    return gap - inherited if gap > inherited else 0.0


@dataclass(frozen=True)
class Reference:
    """The exact reference's run of one sample at `bits`: the values of every launch site,
    by site in run order, and the output."""

    bits: int
    values: dict[str, list]
    output: object


def reference_run(core: Core, args: list, seed: int, bits: int, kind: str = "interp") -> Reference:
    """The reference `kind` run once on `args`, every launch site's values recorded."""
    sites = set(launch_sites(core.lower("f64").module))
    values, out = _reference_run(core.reference(bits, kind), args, seed, sites)
    return Reference(bits, values, out)


@dataclass(frozen=True)
class Bisection:
    entry: str
    backend: str
    bits: int
    rows: list[Row]  # every real-valued launch site, in program order
    output_gap: float  # the output's, relative to its largest magnitude

    def jumps(self, top: int) -> list[Row]:
        """The `top` sites that jump with the largest own gaps, in program order."""
        jumped = sorted((r for r in self.rows if r.jump > 1), key=lambda r: -r.own)[:top]
        return [r for r in self.rows if r in jumped]

    def largest(self) -> Row | None:
        """The site that jumps with the largest own gap: where the budget went."""
        return max((r for r in self.rows if r.jump > 1), key=lambda r: r.own, default=None)

    def passes(self, budget: float) -> Row | None:
        """The first site in program order whose gap, on some run, is past `budget`."""
        return next((r for r in self.rows if r.peak > budget), None)


def bisect(
    core: Core,
    realize,
    inputs: Inputs,
    backend: str = "kernel",
    bits: int = 128,
    kind: str = "interp",
) -> Bisection:
    """The realization `realize` (a spelling or a Realization) on `backend`, against the
    reference `kind` (ball or interp) at `bits`, on `inputs`: every launch site's gap and
    what it inherited (on balls, against their midpoints)."""
    args = sample_arguments(core, inputs, 0)
    ref = reference_run(core, args, inputs.seed, bits, kind)
    return against(core, realize, args, inputs.seed, backend, ref)


def against(core: Core, realize, args: list, seed: int, backend: str, ref: Reference) -> Bisection:
    """`bisect` of `realize` on `args` (drawn at `seed`), against the reference's run of
    them."""
    machine = core.lower(realize).compile(backend, threads=1)
    runs, out = _machine_run(machine, args, seed)
    with exact.context(ref.bits):
        _measure(runs, ref.values)
        output_gap = max(
            (gap(e.data, np.asarray(m.data)) for e, m in _real_pairs(ref.output, out)),
            default=0.0,
        )
    return Bisection(core.entry, backend, ref.bits, _rows(core, runs), output_gap)


# ---- watching the runs ----------------------------------------------------------------------


def _machine_run(compiled: Compiled, args: list, seed: int) -> tuple[list[LaunchRun], object]:
    """The realization run once, every launch recorded in order, with its output."""
    runs: list[LaunchRun] = []
    backend = compiled.backend
    if backend.spec.native:  # a schedule traced once, replayed over one arena
        key = (backend.program.entry, False)
        backend.schedules[key] = _WatchedSchedule(backend, *key, runs=runs)
    else:
        backend.host.apply = _launches(backend.host.apply, runs)
    out = backend.call(compiled.values(args), CallContext(seed=seed))
    for run in runs:
        if run.value is None:
            run.value = np.asarray(run.wrote)
    return runs, out


def _launches(apply: Callable, runs: list[LaunchRun]) -> Callable:
    """A host's `apply` that records each launch it runs in `runs`."""

    def watched(op, ins, ctx, draw):
        out = apply(op, ins, ctx, draw)
        if op.name == "psk_kernel.launch" and op.type.kind == "real":
            runs.append(LaunchRun(op.site, [t.data for t in ins[0]], out.data))
        return out

    return watched


class _WatchedSchedule(Schedule):
    """The mlir backend's schedule, its trace recording each launch's buffers, and each
    replay copying their values out of the arena before it is freed: every buffer keeps
    its own bytes (no sharing), so each still holds its value after the call."""

    def __init__(self, backend, entry: str, training: bool, runs: list[LaunchRun]):
        self.runs = runs
        self._watched = _launches(super()._apply, runs)
        super().__init__(backend, entry, training, share=False)  # traces, through `_apply`

    def _apply(self, op, ins, ctx, draw):
        return self._watched(op, ins, ctx, draw)

    def output(self, arrays):
        for run in self.runs:
            run.value = np.array(materialized(run.wrote, arrays))
        return super().output(arrays)


def _reference_run(compiled: Compiled, args: list, seed: int, sites: set[str]):
    """The reference run once: the values of `sites` by site, in run order, and the output."""
    values: dict[str, list] = defaultdict(list)
    host = compiled.backend.host
    apply = host.apply

    def watched(op, ins, ctx, draw):
        out = apply(op, ins, ctx, draw)
        if op.site in sites:
            values[op.site].append(out.data)
        return out

    host.apply = watched
    out = compiled.backend.call(compiled.values(args), CallContext(seed=seed))
    return values, out


def _real_pairs(exact_out, machine_out) -> list:
    """The output's real leaves, exact beside the machine's."""
    ex = [t for _, t in leaves(exact_out) if t.type.kind == "real"]
    return list(zip(ex, [t for _, t in leaves(machine_out) if t.type.kind == "real"], strict=True))


# ---- measuring ------------------------------------------------------------------------------


def gap(exact_value: np.ndarray, machine: np.ndarray) -> float:
    """max|v̂ − v| / (max|v| + tiny) at the context's precision; +∞ when a machine element
    is not finite."""
    y = np.asarray(machine, dtype=np.float64)  # bf16 and f32 widen exactly
    if not np.all(np.isfinite(y)):
        return math.inf
    if not y.size:
        return 0.0
    v = np.asarray(exact_value, dtype=object)
    err = max(abs(d) for d in np.asarray(exact.exact(y) - v, dtype=object).flat)
    top = max(abs(x) for x in v.flat)
    return float(err) / (float(top) + TINY)


def _measure(runs: list[LaunchRun], values: dict[str, list]) -> None:
    """Each run's gap against the same site's run of the reference, then what it inherited."""
    seen: dict[str, int] = defaultdict(int)
    gaps: dict[int, float] = {}  # id of a buffer a launch wrote -> that run's gap
    for run in runs:
        k = seen[run.site]
        seen[run.site] += 1
        run.gap = gap(values[run.site][k], run.value)
        run.inherited = max((gaps.get(id(d), _rounding(d)) for d in run.reads), default=0.0)
        gaps[id(run.wrote)] = run.gap


def _rounding(data) -> float:
    """The gap of a buffer no launch wrote: its type's rounding."""
    if isinstance(data, Quantized):
        return 1.0 / (2**data.bits - 2)  # half a step, at absmax scale, of the largest weight
    return UNIT.get(TYPE_OF.get(np.dtype(data.dtype)), 0.0)


def _rows(core: Core, runs: list[LaunchRun]) -> list[Row]:
    """A row a site, in the order sites first ran: its run of largest own gap."""
    described = site_descriptions(core)
    by_site: dict[str, list[LaunchRun]] = {}
    for run in runs:
        by_site.setdefault(run.site, []).append(run)
    rows = []
    for site, site_runs in by_site.items():
        dtype = np.dtype(site_runs[0].value.dtype)
        worst = max(site_runs, key=lambda r: own(r.gap, r.inherited))
        what, source = described.get(site, ("", ""))
        rows.append(
            Row(
                site,
                what,
                source,
                TYPE_OF[dtype],
                worst.gap,
                worst.inherited,
                len(site_runs),
                max(r.gap for r in site_runs),
            )
        )
    return rows


# ---- the report ------------------------------------------------------------------------------


def text(found: Bisection, top: int = 5, budget: float | None = None) -> str:
    """The report `presk bisect` prints: the `top` largest jumps in program order, the
    output's gap and, with a budget, whether it is inside and where it was spent."""
    lines = [
        f"-- bisect of {found.entry} on {found.backend} against the reference at {found.bits} bits",
        "-- gap = max|v̂ − v| / max|v| of a stored value, inherited = the largest gap its "
        f"kernel read, own = gap − inherited, jump = gap / (inherited + {SLACK}·2⁻⁵³)",
    ]
    jumped = found.jumps(top)
    largest = found.largest()
    if jumped:
        lines.append(
            f"-- of the sites that jump (above 1), the {len(jumped)} of largest own gap, "
            "in program order:"
        )
        lines += _table(jumped, largest)
    else:
        lines.append("-- no site jumps: every stored value's gap is what its inputs brought")
    lines.append(f"-- output gap {found.output_gap:.3e} (relative to its largest magnitude)")
    if budget is not None:
        lines.append(_budget_line(found, budget))
    return "\n".join(lines) + "\n"


def _table(rows: list[Row], largest: Row | None) -> list[str]:
    head = ("site", "what", "source", "type", "gap", "inherited", "own", "jump", "")
    table = [head] + [
        (
            r.site,
            r.what,
            r.source,
            r.type,
            f"{r.gap:.3e}",
            f"{r.inherited:.3e}",
            f"{r.own:.3e}",
            f"{r.jump:.3g}",
            "<- largest" if r is largest else "",
        )
        for r in rows
    ]
    widths = [max(len(row[k]) for row in table) for k in range(len(head))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    ]


def _budget_line(found: Bisection, budget: float) -> str:
    inside = "inside" if found.output_gap <= budget else "OUTSIDE"
    line = f"-- budget {budget:g}: the output's gap is {inside} it"
    spent = found.passes(budget)
    if spent is None:
        return line + "; no stored value's gap passes it"
    return line + f"; a stored value's gap first passes it at {spent.site} ({spent.source})"
