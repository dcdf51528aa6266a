"""What `presk solve` offers: the values whose type it may choose, each priced.

Two kinds of value are offered (docs/precision.md, section 7):

- a stored value: a kernel's result, named by its launch site (a fusion group's root).
  Its members are computed in the arithmetic of the root's type and never stored, so their
  roundings are charged there: a value's term in type t is ‖∂L/∂v‖₁ × v's rounding in t
  for the root, plus Σ over the other sites of the group of their rounding in t's
  arithmetic (f32 for a bf16 kernel, which keeps a fused chain's values in f32). It
  costs one sample's elements (every call and fold layer) times t's bytes. With
  `--rounding weighted` a site's term is instead the sweep's Σᵢ |∂L/∂vᵢ|·|fl_t(vᵢ) − vᵢ|,
  each element's rounding weighted by its own sensitivity (exact to first order), and
  sensitivity × measured rounding where the sweep paired no value;
- a parameter, by its path, written to the realization's `params`. It costs its bytes at
  rest, once, and its term is its rounding at the narrowest of its own type and the types
  of the kernels that read it, since a kernel rounds what it reads to its own type.
  With integer rungs in the menu (`--menu …,int8,int4`), a parameter declared of rank two
  or more is also offered int8 and int4 (presk/precision/integers.py), written to `quant`:
  of absmax and pow2 scales the one whose term is smaller, and only a rung that saves
  bytes over the one above it. Its term there is `--quant`'s, the first-order move
  √Σ(g·δ)², g its gradient and δ = ŵ − w (or its rounding by a reader narrower than f32
  if larger), and the integers' terms add up as `--quant` adds them, by their
  root-sum-square. Each kind is aimed at the whole target, as the two passes aim them:
  the estimate is the larger of the floats' sum (or root-sum-square) and the integers'
  root-sum-square (`Menu.estimate`), and the measurement checks what they make together.
  The floats' first-order sum adds every element's rounding as if none cancelled (41
  times the gap on the corpus GPT), the integers' root-sum-square is within twice theirs:
  added, the floats' pessimism took the budget from the integers, as the worst case of
  each matrix's moves, s·max|ŵ − w|, had before (about the whole budget alone).

A value the sensitivity sweep did not reach has no known sensitivity and is not offered:
an absence is not a zero. Two rules leave out values that can only add error: (1) a value
of one element; (2) a value whose first narrowing, f64 to f32, saves less than θ·B bytes,
B the all-f64 traffic (the objective's measure: in time, and less than θ of the all-f64
predicted time at its own kernel). A value not offered takes the record's default
(`Menu.default`): f64, or under an objective that prices mixing types the uniform type the
solve measured inside the budget (`Objective.bases`, presk/precision/solve.py), and its
term is charged there; a parameter's term is also charged wherever a narrower kernel reads
it.

What the solver minimises is the menu's `Objective`, which prices a candidate (`cost`), a
move (`saving`), rule 2's measure and the words for them, so that the solver, explain and
the CLI never ask which it is. `Traffic` is bytes; `Time`, with a profile
(presk/precision/profile.py), predicted seconds: each stored value's kernel at its
roofline in its type, T̂ = λ + max(W/π, Q/β), W its work (the type does not change it)
and Q its bytes in the type; each parameter's bytes at rest read once; and a conversion
at every kernel's edge where a value (or parameter) stored in one type is read by a
kernel of another, its elements at the profile's cost. A cost is a candidate's own, not a
difference from all-f64, so any two candidates compare. Time has uniform bases and
traffic none (`Objective.bases`): a record that mixes f64 and f32 costs the native code
more than its bytes say, so under time a solve starts from all-f32 where all-f32 measures
inside the budget, and the values it does not offer follow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from presk import stages
from presk.api import Core
from presk.core.fusion import group_roots
from presk.ir.ops import module_functions, module_launches, psk_type, string_attr
from presk.ir.types import leaves
from presk.kernel.machine import MACHINES, to_storage
from presk.precision.envelope import Envelope, SiteEnvelope
from presk.precision.integers import (
    FLOATS,
    declared_ranks,
    first_order,
    integer_bytes,
    is_integer,
    scale_axes,
)
from presk.precision.profile import Profile
from presk.precision.samples import sample_arguments, sample_seed
from presk.precision.sensitivity import Sensitivities, sensitivities
from presk.reach import parameter_readers, value_readers
from presk.runtime.inputs import param_type

RUNGS = FLOATS  # the ladder, widest first
ROUNDINGS = ("measured", "unit", "weighted")
RULES = ("rule 1", "rule 2", "unreached")  # why a value is not offered


@dataclass(frozen=True)
class Priced:
    """A value with its price in each rung: a stored value's or a parameter's."""

    key: str  # a launch site, or a parameter's path
    kind: str  # "value" or "parameter"
    elements: int  # what its bytes count: one sample's elements, or the parameter's
    terms: dict[str, float] | None  # its term in each rung; None when the sweep missed it
    readers: tuple[str, ...] = ()  # the launch sites of the kernels reading it
    ladder: tuple[str, ...] = RUNGS  # the rungs it is offered, widest first
    ints: dict[str, int] = field(default_factory=dict)  # bytes by integer rung
    # the rungs every value of it is exact in (the envelope's `exact`, a parameter's own
    # weights): stored in one it rounds nothing, whatever its sensitivity
    exact: tuple[str, ...] = ()

    def bytes(self, rung: str) -> int:
        return rung_bytes(rung, self.elements, self.ints)

    def saving(self, rung: str) -> int:
        """The bytes saved against f64 in `rung`."""
        return self.bytes("f64") - self.bytes(rung)

    def term(self, rung: str, reader: str) -> float:
        """Its term in `rung` read by kernels of the narrowest type `reader`: a float
        rounded at the narrower of the two; integers, dequantised to f32, rounded again
        only by a reader narrower than f32."""
        if not is_integer(rung):
            return self.terms[max(rung, reader, key=RUNGS.index)]
        again = self.terms[reader] if RUNGS.index(reader) > RUNGS.index("f32") else 0.0
        return max(self.terms[rung], again)


def rung_bytes(rung: str, elements: int, ints: dict[str, int]) -> int:
    """A value's bytes in `rung`: its elements in a machine type's bytes, or an integer
    rung's own count, its scales included (`ints`, by rung)."""
    return ints[rung] if rung in ints else elements * MACHINES[rung].bytes


def ratio(a: float, b: float) -> str:
    """a/b as the summaries say it: `2.069×`."""
    return f"{a / b:.3f}×" if b else "inf×"


class Objective(Protocol):
    """What the solver minimises over a menu's assignments (keys to rungs, every other key
    f64), and the words for it."""

    def cost(self, menu: Menu, assignment: dict[str, str]) -> float:
        """The candidate's own cost, not a difference: any two candidates compare."""
        ...

    def saving(
        self, menu: Menu, assignment: dict[str, str], key: str, to: str, edges: bool = True
    ) -> float:
        """What moving `key` from its rung in `assignment` to `to` saves of the cost
        (negative: it costs): at `key`'s own kernel alone unless `edges`, where what its
        readers' and its inputs' kernels pay counts too."""
        ...

    def offers(self, menu: Menu, p: Priced) -> bool:
        """Rule 2's measure: whether `p`'s first narrowing, f64 to f32, saves enough for
        `p` to be offered."""
        ...

    def rule_2(self, menu: Menu) -> str:
        """Rule 2's measure as the summary says it, after "first narrowing saves"."""
        ...

    def amount(self, cost: float) -> str:
        """A cost in its units, as a summary says it."""
        ...

    def report(self, menu: Menu, assignment: dict[str, str]) -> list[str]:
        """The summary's lines on the candidate's cost, besides its traffic, which every
        solve prints."""
        ...

    def bases(self, menu: Menu) -> tuple[str, ...]:
        """The uniform types a solve may start from, in the order it tries them: the first
        whose all-t realization measures inside the budget is the record's default, which
        every value not offered follows; none (a record's default f64, the values not
        offered kept there) where mixing types costs nothing."""
        ...


@dataclass(frozen=True)
class Traffic:
    """Bytes: one sample's stored values and the parameters once, each in its rung."""

    def cost(self, menu: Menu, assignment: dict[str, str]) -> float:
        return menu.traffic(assignment)

    def saving(
        self, menu: Menu, assignment: dict[str, str], key: str, to: str, edges: bool = True
    ) -> float:
        item = menu.item(key)  # its bytes are its own: no edge changes them
        return item.bytes(menu.rung(assignment, key)) - item.bytes(to)

    def offers(self, menu: Menu, p: Priced) -> bool:
        return p.saving("f32") >= menu.min_gain * menu.all_f64

    def rule_2(self, menu: Menu) -> str:
        return f"< θ·B = {self.amount(menu.min_gain * menu.all_f64)}"

    def amount(self, cost: float) -> str:
        return f"{cost:.4g} bytes"

    def report(self, menu: Menu, assignment: dict[str, str]) -> list[str]:
        return []  # the traffic line says it

    def bases(self, menu: Menu) -> tuple[str, ...]:
        return ()  # a byte costs the same beside any type: the values left out stay f64


TRAFFIC = Traffic()


@dataclass(frozen=True)
class Time:
    """Predicted seconds of one sample on the profile's machine: each stored value's kernel
    at its roofline, each parameter's bytes read once, every conversion at a kernel's
    edge."""

    profile: Profile
    work: dict[str, int]  # W by stored value (launch site): the envelope's work × count
    launches: dict[str, int]  # its kernel's launches in one sample

    def cost(self, menu: Menu, assignment: dict[str, str]) -> float:
        def rung(key: str) -> str:
            return menu.rung(assignment, key)

        total = 0.0
        for key, v in menu.values.items():
            t = rung(key)
            total += self.own(menu, key, t)
            for reader in v.readers:
                total += self.profile.load(t, rung(reader), v.elements)
        for key, p in menu.params.items():
            t = rung(key)
            total += self.own(menu, key, t)
            for reader in p.readers if not is_integer(t) else ():  # dequantised at the load
                total += self.profile.load(t, rung(reader), p.elements)
        return total

    def own(self, menu: Menu, key: str, t: str) -> float:
        """A stored value's kernel at its roofline in `t`, or a parameter's bytes in `t`
        read once; in a type computed in another's arithmetic, no faster than in that
        one. presk has no bf16 arithmetic: a bf16 kernel computes in f32 and converts at
        every load and store, so bf16 is never priced faster than f32, whatever the fit
        of its streaming says (on a shared machine it swings from half f32's rate to
        twice), and is not chosen for speed; the traffic objective chooses it."""
        arith = t if is_integer(t) else MACHINES[t].arith_name
        alone = self._own(menu, key, t)
        return alone if arith == t else max(alone, self._own(menu, key, arith))

    def _own(self, menu: Menu, key: str, t: str) -> float:
        if key in menu.params:  # integers stream like the f32 they are read as
            rate = self.profile.roofline("f32" if is_integer(t) else t).byte_rate
            return menu.params[key].bytes(t) / rate
        stored = menu.values[key].elements * MACHINES[t].bytes
        return self.profile.roofline(t).seconds(self.work[key], stored, self.launches[key])

    def saving(
        self, menu: Menu, assignment: dict[str, str], key: str, to: str, edges: bool = True
    ) -> float:
        if not edges:
            rung = menu.rung(assignment, key)
            return self.own(menu, key, rung) - self.own(menu, key, to)
        return self.cost(menu, assignment) - self.cost(menu, {**assignment, key: to})

    def offers(self, menu: Menu, p: Priced) -> bool:
        """Traffic's measure, or θ of the all-f64 predicted time saved at its own kernel:
        a value of few bytes whose kernel computes much (a cross-entropy's, reading every
        logit) is offered for its time."""
        f64 = menu.every("f64")
        least = menu.min_gain * self.cost(menu, f64)
        return TRAFFIC.offers(menu, p) or self.saving(menu, f64, p.key, "f32", False) >= least

    def rule_2(self, menu: Menu) -> str:
        least = menu.min_gain * self.cost(menu, menu.every("f64"))
        return f"{TRAFFIC.rule_2(menu)} and < θ·T̂ = {self.amount(least)} at its own kernel"

    def amount(self, cost: float) -> str:
        return f"{cost * 1e6:.3g} µs"

    def report(self, menu: Menu, assignment: dict[str, str]) -> list[str]:
        now, f64 = self.cost(menu, assignment), self.cost(menu, menu.every("f64"))
        return [
            f"predicted time ({self.profile.cpu}, {self.profile.date}): "
            f"{now * 1e3:.3f} ms against {f64 * 1e3:.3f} ms all-f64, {ratio(f64, now)} faster"
        ]

    def bases(self, menu: Menu) -> tuple[str, ...]:
        """The types narrower than f64 that compute in their own arithmetic, narrowest
        first: f32 (bf16 computes in f32 and converts at every load and store). A uniform
        record pays no conversion and each of its kernels computes in its own type, so the
        narrower is the faster: the profile, whose rates a loaded machine can fit in the
        wrong order, is not asked."""
        return tuple(t for t in reversed(RUNGS) if t != "f64" and MACHINES[t].arith_name == t)


@dataclass(frozen=True)
class Menu:
    values: dict[str, Priced]  # every stored value the envelope prices, by launch site
    params: dict[str, Priced]  # every parameter, by path
    offered: tuple[str, ...]  # the keys offered, values then parameters
    left_out: dict[str, list[str]]  # by RULES, the keys not offered
    all_f64: int  # B: one sample's stored values and the parameters once, all in f64
    min_gain: float  # θ
    objective: Objective = TRAFFIC  # what the solver minimises: with a profile, Time
    over: dict[str, int] = field(default_factory=dict)  # integer weights' scale axes, by path
    # the record's default: the rung of every key an assignment leaves out (the values not
    # offered, the kernels not priced), f64 unless a solve based the menu on a uniform type
    default: str = "f64"

    def item(self, key: str) -> Priced:
        return self.values.get(key) or self.params[key]

    def rung(self, assignment: dict[str, str], key: str) -> str:
        """`key`'s rung under `assignment`: its own there, else the record's default."""
        return assignment.get(key, self.default)

    def every(self, rung: str) -> dict[str, str]:
        """The assignment of `rung` to every priced value and parameter."""
        return dict.fromkeys((*self.values, *self.params), rung)

    def rungs(self, assignment: dict[str, str]) -> dict[str, str]:
        """Every priced value's and parameter's rung under `assignment`."""
        return {k: self.rung(assignment, k) for k in (*self.values, *self.params)}

    def based(self, rung: str) -> Menu:
        """The menu based on the uniform type `rung`: the record's default, and the top of
        every ladder. All-`rung` measured inside the budget, so no widening goes past it
        (and a record's `params` takes no type wider than its default)."""

        def trimmed(p: Priced) -> Priced:
            return replace(p, ladder=p.ladder[p.ladder.index(rung) :])

        return replace(
            self,
            values={k: trimmed(v) for k, v in self.values.items()},
            params={k: trimmed(p) for k, p in self.params.items()},
            default=rung,
        )

    def narrower(self, key: str, rung: str) -> str | None:
        """The rung after `rung` on `key`'s ladder, None at its end."""
        ladder = self.item(key).ladder
        at = ladder.index(rung) + 1
        return ladder[at] if at < len(ladder) else None

    def wider(self, key: str, rung: str) -> str:
        ladder = self.item(key).ladder
        return ladder[ladder.index(rung) - 1]

    def traffic(self, assignment: dict[str, str]) -> int:
        """The bytes, whatever the objective: every solve reports them."""
        return sum(self.item(k).bytes(t) for k, t in self.rungs(assignment).items())

    def cost(self, assignment: dict[str, str]) -> float:
        return self.objective.cost(self, assignment)

    def saving(self, assignment: dict[str, str], key: str, to: str, edges: bool = True) -> float:
        return self.objective.saving(self, assignment, key, to, edges)

    def estimate(self, assignment: dict[str, str], how: str) -> float:
        """The estimate of `assignment`: its floats' terms by `how`, or the root-sum-square
        of its integer weights' terms, whichever is larger (`estimate`)."""
        terms = self.terms(assignment)
        ints = [t for k, t in terms.items() if is_integer(self.rung(assignment, k))]
        floats = [t for k, t in terms.items() if not is_integer(self.rung(assignment, k))]
        return estimate(floats, how, ints)

    def terms(self, assignment: dict[str, str]) -> dict[str, float]:
        """Each priced value's term under `assignment` (keys to rungs; the rest the
        record's default), at the narrowest of its own rung and its readers': a kernel
        rounds what it reads to its own type, so a value read by a narrower kernel is
        rounded again there. A value the sweep did not reach has no term, but one exact in
        the narrower of those rungs is charged 0: it rounds nothing there."""
        out = {}
        for key, p in (*self.values.items(), *self.params.items()):
            own = self.rung(assignment, key)
            read = (self.rung(assignment, k) for k in p.readers)
            reader = max(read, key=RUNGS.index, default="f64")
            if p.terms is not None:
                out[key] = p.term(own, reader)
            elif own in p.exact:  # a float rung, then
                narrowest = max(own, reader, key=RUNGS.index)
                if narrowest != "f64" and narrowest in p.exact:
                    out[key] = 0.0
        return out


def estimate(terms, how: str, integers=()) -> float:
    """The estimate from the terms: their sum, or their root-sum-square (`rss`); with
    `integers` (integer weights' first-order moves), the larger of that and their
    root-sum-square."""
    terms, integers = list(terms), list(integers)
    if any(math.isinf(t) for t in (*terms, *integers)):
        return math.inf
    floats = math.sqrt(sum(t * t for t in terms)) if how == "rss" else sum(terms)
    return max(floats, math.sqrt(sum(t * t for t in integers)))


def envelope_menu(
    core: Core,
    envelope: Envelope,
    rounding: str = "weighted",
    min_gain: float = 1e-3,
    profile: Profile | None = None,
    sweep: str = "reference",
) -> Menu:
    """`menu` from `envelope_sweep`."""
    found = envelope_sweep(core, envelope, sweep)
    return menu(core, envelope, found, rounding, min_gain, profile)


def envelope_sweep(
    core: Core, envelope: Envelope, sweep: str = "reference", keep_gradients: bool = False
) -> Sensitivities:
    """A sensitivity sweep (`sweep`: on the reference, or `f64`) on the envelope's first
    sample (its data, if it was calibrated on a data file), at its weights and bits: the
    terms' weights come from the inputs the envelope measured, not from drawn ones. With
    `keep_gradients` (`--quant`'s pass) it keeps the parameters' gradients."""
    meta = envelope.meta
    first = sample_arguments(core, meta, meta.first)
    seed = sample_seed(meta, meta.first)
    return sensitivities(core, seed, meta.weights, meta.bits, first, sweep, keep_gradients)


def menu(
    core: Core,
    envelope: Envelope,
    found: Sensitivities,
    rounding: str = "weighted",
    min_gain: float = 1e-3,
    profile: Profile | None = None,
    rungs: tuple[str, ...] = RUNGS,
    quant: bool = False,
) -> Menu:
    """Every stored value and parameter of `core`'s entry priced, and those offered;
    with `profile`, priced in predicted time. `rungs` is the menu (floats and integers,
    widest first); with integers in it, or with `quant`, every parameter declared of
    rank two or more gets its scale axis."""
    kernels = core.lower("f64").module
    l1 = {r.key: r.l1 for r in found.rows if r.what != "parameter"}
    paired = _paired(found, rounding)
    members = _members(core)
    read_by = value_readers(kernels.operation)
    values = {
        site: _value(site, envelope, members.get(site, {site}), l1, paired, rounding, read_by)
        for site in stages.launch_sites(kernels)
        if site in envelope.sites
    }
    readers = parameter_readers(kernels.operation)
    params = _params(core, envelope, found, paired, rounding, readers)
    floats = tuple(t for t in RUNGS if t in rungs)
    if floats != RUNGS:
        values = {k: replace(v, ladder=floats) for k, v in values.items()}
        params = {k: replace(p, ladder=floats) for k, p in params.items()}
    integers = tuple(t for t in rungs if is_integer(t))
    over = _scale_axes(core, params, matrices=not integers) if integers or quant else {}
    if integers:
        params = _with_integers(core, envelope, found.gradients, params, over, integers)
    all_f64 = sum(p.bytes("f64") for p in (*values.values(), *params.values()))
    objective = TRAFFIC if profile is None else _time(profile, kernels, envelope, values)
    priced = Menu(values, params, (), {}, all_f64, min_gain, objective, over)
    left_out: dict[str, list[str]] = {rule: [] for rule in RULES}
    offered = []
    for p in (*values.values(), *params.values()):
        rule = _rule(priced, p)
        (left_out[rule] if rule else offered).append(p.key)
    return replace(priced, offered=tuple(offered), left_out=left_out)


def _scale_axes(core: Core, params: dict[str, Priced], matrices: bool) -> dict[str, int]:
    """The scale axis of each parameter declared of rank two (`matrices`, what `--quant`
    quantises), or of rank two or more (what the menu's integers are offered to)."""
    ranks = declared_ranks(core)
    paths = [p for p in params if (ranks.get(p) == 2 if matrices else ranks.get(p, 0) >= 2)]
    return scale_axes(core, paths)


def _with_integers(
    core: Core,
    envelope: Envelope,
    gradients: dict[str, np.ndarray],
    params: dict[str, Priced],
    over: dict[str, int],
    integers: tuple[str, ...],
) -> dict[str, Priced]:
    """The parameters with a scale axis and a known gradient (the sweep's, kept) offered
    `integers` too: at each width the scheme whose term √Σ(g·δ)² is smaller (ties to
    absmax), kept on the ladder only if it saves bytes over the rung above it."""
    values = core.params(envelope.meta.seed, envelope.meta.weights) or {}
    types = dict(leaves(param_type(core.view)))
    out = dict(params)
    for path, axis in over.items():
        p = params[path]
        if p.terms is None or path not in gradients:
            continue
        w, g = np.asarray(values[path], dtype=np.float64), gradients[path]
        terms, ints, ladder = dict(p.terms), {}, list(p.ladder)
        for width in integers:
            priced = {
                rung: first_order(g, w, types[path], rung, axis).rss
                for rung in (width, width + "/pow2")
            }
            rung = min(priced, key=priced.get)
            size = integer_bytes(w.shape, rung, axis)
            if size < replace(p, ints=ints).bytes(ladder[-1]):
                terms[rung], ints[rung] = priced[rung], size
                ladder.append(rung)
        out[path] = replace(p, terms=terms, ints=ints, ladder=tuple(ladder))
    return out


def _time(profile: Profile, kernels, envelope: Envelope, values: dict[str, Priced]) -> Time:
    """The time objective on `profile`: the work and launches of each stored value of the
    f64 `kernels`."""
    per_launch: dict[str, int] = {}  # a site's elements in one launch, its largest
    for op in module_launches(kernels.operation):
        site = string_attr(op, "psk.site")
        size = psk_type(op.results[0]).size
        per_launch[site] = max(per_launch.get(site, 1), size)
    return Time(
        profile,
        {k: envelope.sites[k].work * v.elements for k, v in values.items()},
        {k: max(1, v.elements // per_launch.get(k, 1)) for k, v in values.items()},
    )


def _rule(menu: Menu, p: Priced) -> str | None:
    """Why `p` is not offered, or None."""
    if p.elements == 1:
        return "rule 1"
    if not menu.objective.offers(menu, p):
        return "rule 2"
    if p.terms is None:
        return "unreached"
    return None


def _members(core: Core) -> dict[str, set[str]]:
    """By a fusion group's root site, the sites computed in its kernel (itself included),
    over every function."""
    out: dict[str, set[str]] = {}
    for func in module_functions(core.module.operation):
        for site, root in group_roots(func).items():
            out.setdefault(root, {root}).add(site)
    return out


def _paired(found: Sensitivities, rounding: str) -> dict[str, dict[str, float]]:
    """With `weighted` rounding, the sweep's Σ|∂L/∂vᵢ|·|fl_t(vᵢ) − vᵢ| by key and type,
    where it paired a value with its cotangent; otherwise nothing."""
    if rounding != "weighted":
        return {}
    return {r.key: r.weighted for r in found.rows if r.weighted is not None}


def _value(
    site: str,
    envelope: Envelope,
    members: set[str],
    l1: dict[str, float],
    paired: dict[str, dict[str, float]],
    rounding: str,
    read_by: dict[str, set[str]],
) -> Priced:
    count = envelope.sites[site].count
    readers = tuple(sorted(read_by.get(site, ())))
    priced = [m for m in sorted(members) if m in envelope.sites]
    exact = tuple(t for t in RUNGS if all(t in envelope.sites[m].exact for m in priced))
    if any(m not in l1 for m in priced):
        return Priced(site, "value", count, None, readers, exact=exact)

    def term(m: str, t: str) -> float:
        return _term(
            l1[m], _site_rounding(envelope.sites[m], t, rounding), paired.get(m, {}).get(t)
        )

    terms = {  # a member is rounded in the kernel's arithmetic, the root at its store
        t: sum(term(m, t if m == site else MACHINES[t].arith_name) for m in priced) for t in RUNGS
    }
    return Priced(site, "value", count, terms, readers, exact=exact)


def _site_rounding(s: SiteEnvelope, t: str, rounding: str) -> float:
    """A site's rounding in `t`: +∞ past t's range, else u(t)·magnitude (`unit`) or the
    envelope's measured one (`measured`, and `weighted`'s fallback)."""
    if t == "f64":
        return 0.0
    if s.magnitude > MACHINES[t].largest:
        return math.inf
    return MACHINES[t].unit_roundoff * s.magnitude if rounding == "unit" else s.rounding[t]


def _term(l1: float, rounding: float, weighted: float | None = None) -> float:
    """Sensitivity times rounding, or the sweep's sensitivity-weighted sum where it has
    one; an overflow is never small, whatever the sensitivity."""
    if math.isinf(rounding):
        return math.inf
    return l1 * rounding if weighted is None else weighted


def _params(
    core: Core,
    envelope: Envelope,
    found: Sensitivities,
    paired: dict[str, dict[str, float]],
    rounding: str,
    readers: dict[str, set[str]],
) -> dict[str, Priced]:
    """Every parameter priced: its rounding measured on its values (the envelope's
    weights, or its initializers), or u(t)·max|p|, or weighted by its gradient."""
    values = core.params(envelope.meta.seed, envelope.meta.weights) or {}
    l1 = {r.key: r.l1 for r in found.rows if r.what == "parameter"}
    out = {}
    for path, p in values.items():
        x = np.asarray(p, dtype=np.float64)
        terms = None
        if path in l1:
            terms = {
                t: _term(l1[path], _param_rounding(x, t, rounding), paired.get(path, {}).get(t))
                for t in RUNGS
            }
        exact = tuple(t for t in RUNGS if _param_rounding(x, t, "measured") == 0)
        reading = tuple(sorted(readers.get(path, ())))
        out[path] = Priced(path, "parameter", x.size, terms, reading, exact=exact)
    return out


def _param_rounding(x: np.ndarray, t: str, rounding: str) -> float:
    if t == "f64" or not x.size:
        return 0.0
    if rounding == "unit":
        largest = float(np.max(np.abs(x)))
        return math.inf if largest > MACHINES[t].largest else MACHINES[t].unit_roundoff * largest
    with np.errstate(over="ignore", invalid="ignore"):
        gap = np.abs(to_storage(x, t).astype(np.float64) - x)
    return float(np.max(gap)) if np.all(np.isfinite(gap)) else math.inf
