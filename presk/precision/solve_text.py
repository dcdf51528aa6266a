"""`presk solve`'s text: the summary of a solve and its decisions (presk/precision/solve.py),
and of a training step's solve (presk/precision/step_solve.py). The objective's own lines
are its words (`offers.Objective`): this module never asks which objective it is."""

from __future__ import annotations

from collections import Counter

from presk.precision.explain import brief
from presk.precision.integers import is_integer
from presk.precision.offers import RUNGS, ratio
from presk.precision.solve import Options, Solution
from presk.precision.step_gap import Setup
from presk.precision.step_solve import StepSolution
from presk.precision.versus import Versus
from presk.train.loop import sci


def summary(
    s: Solution,
    options: Options,
    measure: str,
    entry: str,
    file: str,
    out: str,
    moves: str,
    compared: Versus | None = None,
) -> str:
    """The solve of `entry` of `file` under `options`, its candidates measured on
    `measure`'s backend, its record written to `out` and its moves to `moves`; beside
    all-f32 and all-f64 on this machine, if `compared`."""
    m = s.menu
    values = sum(k in m.values for k in m.offered)
    relative = "" if options.absolute else f" ({options.budget:g} × {brief(s.scale)}, |output|)"
    traffic = m.traffic(s.assignment)
    lines = [
        f"presk solve: `{entry}` of {file}, budget {brief(s.budget)}{relative}",
        f"sites: {len(m.offered)} offered ({values} stored values, "
        f"{len(m.offered) - values} parameters) of {len(m.values)} stored values and "
        f"{len(m.params)} parameters",
        _rules(s),
        *_base(s),
        f"traffic: {traffic} bytes against {m.all_f64} all-f64, "
        f"{ratio(m.all_f64, traffic)} less; {_counts(s.assignment)}",
        *_menu_lines(s),
        *m.objective.report(m, s.assignment),
        f"estimate ({options.estimate}): {brief(s.estimate)} against a target of {brief(s.target)}",
        f"measured gap ({measure}): {brief(s.gap)}{_radius(s.radius)} against a budget of "
        f"{brief(s.budget)}: " + ("inside" if s.inside else "OUTSIDE (even all-f64)"),
        f"widening rounds: {s.rounds}; measurements: {s.measurements}",
    ]
    if s.narrowing is not None:
        lines.append(_narrowing(s))
    if s.held_out is not None:
        lines.append(_held_out(s, measure))
    if compared is not None:
        lines += _versus(compared, s.budget, based=s.base is not None)
    if s.exhaustive is not None:
        greedy = m.traffic(s.proposed)
        lines.append(
            f"exhaustive: optimum {s.exhaustive.optimum} bytes over {s.exhaustive.assignments} "
            f"assignments; greedy proposal {greedy} bytes, "
            f"{ratio(greedy, s.exhaustive.optimum)} the optimum"
        )
    lines.append(f"wrote {out} (moves in {moves})")
    return "\n".join(lines)


def _base(s: Solution) -> list[str]:
    """Under an objective with bases, the record's default and why."""
    b = s.base
    if b is None:
        return []
    rest = f"the {sum(len(keys) for keys in s.menu.left_out.values())} values not offered"
    if b.rung == "f64":
        past = ", ".join(f"all-{t}'s measured gap {brief(g)}" for t, g in b.gaps.items())
        return [
            f"base: all-f64 ({past}, past the budget): the record's default, in which {rest} stay"
        ]
    uncharged = (
        f"; {b.uncharged} the sweep did not reach, rounded with no term to charge: the "
        "measured gap covers them"
        if b.uncharged
        else ""
    )
    return [
        f"base: all-{b.rung}, measured inside the budget ({brief(b.gaps[b.rung])}): the "
        f"record's default, which {rest} follow{uncharged}"
    ]


def _versus(v: Versus, budget: float, based: bool = False) -> list[str]:
    """The solved record against all-f32 and all-f64 in the user's terms: bytes and time on
    this machine. Under a base (`based`), when the record is a uniform realization, that
    said plainly (with the solve's own record, if it ran slower); otherwise, where all-f32
    is inside the budget and faster, that said plainly."""
    runs = (v.solved, v.f32, v.f64)
    lines = [
        f"on this machine ({v.backend}, the median of {v.repeat} calls each, in turns): "
        + ", ".join(f"{r.name} {r.ms:.3f} ms" for r in runs),
        *(
            f"against {r.name}: {ratio(r.bytes, v.solved.bytes)} less traffic, "
            f"{_speed(r.ms, v.solved.ms)}; {r.name}'s measured gap {brief(r.gap)}"
            for r in (v.f64, v.f32)
        ),
    ]
    inside = f"its gap {brief(v.solved.gap)} inside {brief(budget)}"
    if based and v.own is not None:
        lines.append(
            f"the solved record is {v.same_as}, the fastest inside the budget here ({inside}): "
            f"the solve's own record ran in {v.own.ms:.3f} ms to its {v.solved.ms:.3f}"
        )
    elif based and v.same_as is not None:
        lines.append(
            f"the solved record is {v.same_as}, the fastest inside the budget here ({inside})"
        )
    elif v.f32_fastest(budget):
        lines.append(
            f"all-f32 is the fastest inside the budget here: its gap {brief(v.f32.gap)} is "
            f"inside {brief(budget)}, and it runs in {v.f32.ms:.3f} ms to the solved "
            f"record's {v.solved.ms:.3f}; run it (--realize f32)"
        )
    return lines


def _speed(base_ms: float, ms: float) -> str:
    """How much faster `ms` is than `base_ms` (or slower)."""
    if ms <= base_ms:
        return f"{base_ms / ms:.2f}× faster" if ms else "faster"
    return f"{ms / base_ms:.2f}× slower"


def _narrowing(s: Solution) -> str:
    n = s.narrowing
    undone = f", {n.undone} undone by the held-out samples" if n.how == "heldout" else ""
    return (
        f"narrowing by measurement ({n.how}): {n.kept} steps kept of {n.tried} measured in "
        f"{n.passes} passes, each inside {brief(n.threshold)} (budget/margin){undone}"
    )


def _held_out(s: Solution, measure: str) -> str:
    h = s.held_out
    last = h.meta.first + h.meta.samples - 1
    return (
        f"held-out gap ({measure}, samples {h.meta.first} to {last} of {h.meta.data}): "
        f"{brief(h.gap)}{_radius(h.radius)} against a budget of {brief(s.budget)}: "
        + ("inside" if h.gap <= s.budget else "OUTSIDE")
    )


def _radius(radius: float) -> str:
    """The reference's certified radius, which the gap's upper end includes (none on the
    MPFR reference, whose own distance is estimated, not certified)."""
    return f" (the reference's radius {brief(radius)} included)" if radius else ""


def _rules(s: Solution) -> str:
    m = s.menu
    left = m.left_out
    return (
        f"rules: rule 1 (one element) left out {len(left['rule 1'])}{names(left['rule 1'])}; "
        f"rule 2 (first narrowing saves {m.objective.rule_2(m)}) left out "
        f"{len(left['rule 2'])}{names(left['rule 2'])}; "
        f"not reached by the sweep (sensitivity unknown) {len(left['unreached'])}"
        f"{names(left['unreached'])}"
    )


def names(keys: list[str], shown: int = 4) -> str:
    """` (a, b, c, d, … 2 more)`: the first `shown` of `keys`, or nothing for none."""
    if not keys:
        return ""
    more = f", … {len(keys) - shown} more" if len(keys) > shown else ""
    return " (" + ", ".join(keys[:shown]) + more + ")"


def _counts(assignment: dict[str, str]) -> str:
    counts = {t: sum(v == t for v in assignment.values()) for t in ("f32", "bf16")}
    integers = sum(is_integer(v) for v in assignment.values())
    stored = f", {integers} in integers" if integers else ""
    return f"{counts['f32']} values in f32, {counts['bf16']} in bf16{stored}"


def _menu_lines(s: Solution) -> list[str]:
    """With integers (--menu's or --quant's), what was offered them and what took them."""
    m = s.menu
    priced = [k for k, p in m.params.items() if p.ints]
    if not priced:
        return []
    taken = {k: t for k, t in s.assignment.items() if is_integer(t)}
    named = ", ".join(f"{k} {t} over {m.over[k]}" for k, t in sorted(taken.items()))
    lines = [
        f"integers: {len(priced)} parameter(s) priced in integers, {len(taken)} stored in "
        f"integers" + (f" ({named})" if named else "")
    ]
    q = s.quant_pass
    if q is not None:
        lines.append(
            f"quant ({q.scheme}): estimate √Σ(g·δ)² {brief(q.estimate)} against what the "
            f"floats left of the budget, {brief(q.target)}"
        )
    return lines


def decisions(s: Solution, count: int) -> str:
    """The `count` decisions saving the most bytes: key, kind, type, bytes saved, term."""
    m = s.menu
    terms = m.terms(s.assignment)
    chosen = [(k, t) for k, t in s.assignment.items() if t != "f64"]
    chosen.sort(key=lambda kt: (-m.item(kt[0]).saving(kt[1]), kt[0]))
    rows = [("value", "kind", "type", "saves", "term")]
    for k, t in chosen[:count]:
        item = m.item(k)
        rows.append((k, item.kind, t, str(item.saving(t)), brief(terms.get(k, 0.0))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def step_summary(s: StepSolution, setup: Setup, file: str, out: str) -> str:
    """`presk solve --step`'s summary of the step of `setup`, of `file`, written to `out`."""
    counts = Counter(s.rungs())
    rungs = ", ".join(f"{counts[t]} {t}" for t in RUNGS)
    traffic = s.traffic()
    capped = " (the cap: --measurements)" if s.measurements >= s.most else ""
    mean = sum(s.seconds) / len(s.seconds)
    return "\n".join(
        [
            f"presk solve --step: `{setup.core.entry}` of {file}, step {setup.step} after "
            f"{setup.warmup} warm-up steps in f64 (peak lr {setup.lr:g}), against the exact "
            f"step on the {setup.reference} reference at {setup.bits} bits",
            f"decisions ({s.grain}): {len(s.decisions)} over {len(s.elements)} launch sites; "
            f"{rungs}; the record's default {s.realization.default}",
            f"rule 2 (first narrowing saves < θ of all-f64's, "
            f"{s.menu.objective.amount(s.menu.min_gain * s.menu.cost({}))}) left out "
            f"{len(s.left_out)}{names(s.left_out)}",
            f"traffic: {traffic} bytes against {s.all_f64()} all-f64 over the step's stored "
            f"values, {ratio(s.all_f64(), traffic)} less",
            *s.menu.objective.report(s.menu, s.sites()),
            f"measured update gap (native): {sci(s.gap, 2)}{_radius(s.radius)} against a budget of "
            f"{brief(s.budget)}: "
            + ("inside" if s.inside else "OUTSIDE (even all-f64)")
            + f"; all-f64's {sci(s.base, 2)}",
            f"narrowing by measurement: {s.kept} steps kept of {s.tried} measured in "
            f"{s.passes} passes, each inside {brief(s.threshold)} (budget/margin)",
            f"measurements: {s.measurements}{capped}, {mean:.1f} s each (a compilation, a "
            "native step and its gap)",
            f"wrote {out}",
        ]
    )
