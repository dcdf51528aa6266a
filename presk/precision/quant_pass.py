"""`presk solve --quant`: integer weights chosen after the float solve (docs/precision.md,
section 7).

After the float assignment, every parameter declared of rank two (a matrix: a stacked
bias is not one) may be stored as int8 or int4 under one scheme (`--scheme`), scaled
along the axis its readers contract (`offers.Menu.over`). Quantising moves each weight
by a known δ = ŵ − w, so to first order the loss moves by Σ g·δ, g the parameter's
gradient, which the sensitivity sweep keeps. A matrix's term is the root-sum-square
√Σ(g·δ)², which lets independent roundings cancel but never makes a set of matrices look
free because their signs do; the integers' estimate is the root-sum-square over every
quantised matrix, aimed at what the float assignment left of the budget (the budget less
its measured gap). The proposal narrows a matrix one rung at a time (its float type, then
int8, then int4), the most bytes saved per unit of estimate added first; then the
measurement decides, and while the gap exceeds the budget the quantised matrix of largest
term widens one rung (int4 → int8 → its float type). The first-order table (every matrix
in int8, then in int4, on top of the float assignment: Σ|g|·|δ|, Σ g·δ, √Σ(g·δ)² and the
measured gap) says how far the linearisation is from the measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from presk.api import Core
from presk.ir.types import leaves
from presk.precision.integers import first_order, integer_bytes, rung_name
from presk.precision.offers import Menu
from presk.precision.solve import Gauge, HeldOut, Move, Solution, measured_runs
from presk.runtime.inputs import param_type


@dataclass(frozen=True)
class FirstOrder:
    """A row of the first-order table: every matrix at `rung`, on the float assignment."""

    rung: str
    bound: float
    signed: float
    rss: float
    measured: float


@dataclass(frozen=True)
class QuantPass:
    scheme: str
    matrices: int  # how many the pass could quantise
    target: float  # what the integers' estimate aims at: the budget less the float gap
    estimate: float  # the integers' root-sum-square under the final assignment
    table: tuple[FirstOrder, ...]


def quantize_after(
    s: Solution,
    core: Core,
    gauge: Gauge,
    gradients: dict[str, np.ndarray],
    scheme: str,
    held: Gauge | None = None,
) -> Solution:
    """The float solution `s` with matrices quantised under `scheme`, accepted by
    `gauge`'s measurement (and its gap on `held`'s samples, if given, measured again),
    what the pass did in its `quant_pass`."""
    rungs = (rung_name(8, scheme), rung_name(4, scheme))
    moved, menu = _priced(s.menu, core, gauge, gradients, rungs)
    # every matrix at its rung: one the float solve did not offer at the record's default
    floats = {**{k: s.menu.rung(s.assignment, k) for k in s.menu.over}, **s.assignment}
    assignment = dict(floats)
    target = max(s.budget - s.gap, 0.0)
    runs = measured_runs(gauge, held)
    moves = _propose(menu, moved, floats, assignment, target, s.estimate)
    gap, rounds = s.gap, 0
    if any(k in moved for k, t in assignment.items() if t != floats.get(k, "f64")):
        gap = gauge.gap(assignment)
    while gap > s.budget and _quantised(moved, floats, assignment):
        moves.append(_widen(menu, moved, floats, assignment, gap, s.estimate))
        rounds += 1
        gap = gauge.gap(assignment) if _quantised(moved, floats, assignment) else s.gap
    table = tuple(_row(moved, floats, gauge, rung) for rung in rungs)
    held_out = s.held_out
    if held is not None and held_out is not None:
        held_out = HeldOut(held_out.meta, held.gap(assignment))
    rss = _rss(moved, assignment)
    return replace(
        s,
        menu=menu,
        assignment=assignment,
        estimate=_estimate(moved, assignment, s.estimate),
        gap=gap,
        rounds=s.rounds + rounds,
        measurements=s.measurements + measured_runs(gauge, held) - runs,
        moves=[*s.moves, *moves],
        held_out=held_out,
        quant_pass=QuantPass(scheme, len(moved), target, rss, table),
    )


def _priced(
    menu: Menu, core: Core, gauge: Gauge, gradients: dict[str, np.ndarray], rungs: tuple
) -> tuple[dict[str, dict], Menu]:
    """Each matrix's first-order moves by rung, and the menu with the matrices priced in
    `rungs` (their bytes, and their root-sum-square as the term)."""
    meta = gauge.envelope.meta
    values = core.params(meta.seed, meta.weights) or {}
    types = dict(leaves(param_type(core.view)))
    by_path: dict[str, dict] = {}
    params = dict(menu.params)
    for path, over in menu.over.items():
        p = params[path]
        if path not in gradients or p.terms is None:
            continue
        w, g = np.asarray(values[path], dtype=np.float64), gradients[path]
        by_path[path] = {r: first_order(g, w, types[path], r, over) for r in rungs}
        terms = {**p.terms, **{r: m.rss for r, m in by_path[path].items()}}
        ints = {r: integer_bytes(w.shape, r, over) for r in rungs}
        params[path] = replace(p, terms=terms, ints=ints, ladder=(*p.ladder, *rungs))
    return by_path, replace(menu, params=params)


def _ladder(menu: Menu, moved: dict, floats: dict[str, str], key: str) -> tuple[str, ...]:
    """A matrix's ladder in the pass: its float decision, then each integer rung that
    saves bytes over the one above it."""
    p = menu.params[key]
    ladder = [floats.get(key, "f64")]
    for rung in moved[key]:
        if p.bytes(rung) < p.bytes(ladder[-1]):
            ladder.append(rung)
    return tuple(ladder)


def _rss(moved: dict, assignment: dict[str, str]) -> float:
    """The integers' estimate: √Σ(g·δ)² over every quantised matrix."""
    return math.sqrt(
        sum(m[assignment[k]].squares for k, m in moved.items() if assignment.get(k) in m)
    )


def _quantised(moved: dict, floats: dict, assignment: dict) -> list[str]:
    return [k for k in moved if assignment.get(k, "f64") != floats.get(k, "f64")]


def _estimate(moved: dict, assignment: dict, before: float) -> float:
    """The float solve's estimate plus the integers' (a quantised matrix's float term kept:
    an overestimate, but each move then adds what it adds to the integers')."""
    return before + _rss(moved, assignment)


def _propose(
    menu: Menu,
    moved: dict,
    floats: dict[str, str],
    assignment: dict[str, str],
    target: float,
    before: float,
) -> list[Move]:
    """Narrow the matrices greedily, one rung a step, the most bytes saved per unit of the
    integers' estimate added first; a step past `target` is refused and its matrix stops."""
    moves = []
    open_keys = sorted(moved)
    while open_keys:
        now = _rss(moved, assignment)
        trials = []
        for key in open_keys:
            ladder = _ladder(menu, moved, floats, key)
            at = ladder.index(assignment.get(key, "f64"))
            if at + 1 == len(ladder):
                continue
            to = ladder[at + 1]
            after = _rss(moved, {**assignment, key: to})
            saved = menu.params[key].bytes(ladder[at]) - menu.params[key].bytes(to)
            rank = math.inf if after <= now else saved / (after - now)
            trials.append(((rank, saved, key), key, to, after))
        if not trials:
            break
        _, key, to, after = max(trials, key=lambda t: t[0])
        rung = assignment.get(key, "f64")
        taken = after <= target
        total = _estimate(moved, {**assignment, key: to}, before)
        outcome = "taken" if taken else "refused"
        moves.append(Move("narrow", key, "parameter", rung, to, outcome, total))
        if taken:
            assignment[key] = to
        else:
            open_keys.remove(key)
    return moves


def _widen(
    menu: Menu, moved: dict, floats: dict, assignment: dict, gap: float, before: float
) -> Move:
    """Widen the quantised matrix of largest term one rung, after a gap past the budget."""
    quantised = _quantised(moved, floats, assignment)
    key = max(quantised, key=lambda k: (moved[k][assignment[k]].squares, k))
    ladder = _ladder(menu, moved, floats, key)
    rung = assignment[key]
    assignment[key] = ladder[ladder.index(rung) - 1]
    after = _estimate(moved, assignment, before)
    return Move("widen", key, "parameter", rung, assignment[key], "measured", after, gap)


def _row(moved: dict, floats: dict[str, str], gauge: Gauge, rung: str) -> FirstOrder:
    """Every matrix at `rung` on top of the float assignment: its first-order figures and
    its measured gap."""
    rows = [m[rung] for m in moved.values()]
    measured = gauge.gap({**floats, **dict.fromkeys(moved, rung)}) if moved else 0.0
    return FirstOrder(
        rung,
        sum(r.bound for r in rows),
        sum(r.signed for r in rows),
        math.sqrt(sum(r.squares for r in rows)),
        measured,
    )


def table_text(q: QuantPass) -> str:
    """The first-order table as the summary prints it."""
    head = ("all matrices", "bound Σ|g|·|δ|", "signed Σ g·δ", "√Σ(g·δ)²", "measured")
    rows = [head] + [
        (r.rung, *(f"{x:.3g}" for x in (r.bound, r.signed, r.rss, r.measured))) for r in q.table
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
