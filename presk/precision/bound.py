"""The first-order bound of `presk check --precision`: how far an execution under a
realization can be from the exact denotation, over an envelope's samples.

Every value carries a `Bound`: a ceiling on |v| (the envelope's magnitude at its site,
or for an argument the largest over the samples) and a ceiling on |executed(v) −
exact(v)| by part (presk/precision/rules.py), each an array over the value's rows, or
channels, as finely as the envelope's grain keeps them (one number for `--grain site`).
The entry runs on the host of the executors (presk/backends/host.py), so calls, folds,
records and tuples are walked as the reference walks them, with a `Bound` in place of
each buffer: a fold's layers run one after the other and carry their errors along, and
every layer reads the one site.
Each primitive adds what its rule says, and each stored value its rounding in its type:
a row's own, not the site's largest, from a grain envelope. A value that is exact in the
type it is stored or loaded in (the envelope's `exact`: an integer-valued mask, a constant
such as 16; for an argument, its own values) rounds by at most the error it already
carries: |fl(ŵ) − ŵ| ≤ |ŵ − v| where v is representable, so that error, if smaller,
is charged instead of u·|v|. A result already rounded to its type by its own rule (a
sum's last addition) or exact in it (a selection of its operands) pays no store rounding
in that type. A result's errors are then
kept at the grain of its site (the largest over each row), which bounds the memory a
value's parts take.

The bound is conditional on the envelope and says nothing about a model's quality: it
bounds the distance of an execution to the denotation over the envelope's inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from presk.api import Compiled, Core
from presk.backends.host import CallContext, Host
from presk.errors import RealizationError
from presk.kernel import functions
from presk.kernel.machine import MACHINES, storage_of, to_storage
from presk.precision.calibrate import work
from presk.precision.envelope import Envelope, Meta, SiteEnvelope
from presk.precision.rules import (
    LIBM,
    RULES,
    UNIT,
    Err,
    Operand,
    Rule,
    Step,
    plus,
    total,
    widest,
)
from presk.precision.samples import sample_arguments, sample_seed
from presk.prims import balls, exact
from presk.prims.base import Apply, aligned
from presk.quantize import parameter_values
from presk.realize import Realization
from presk.runtime.values import Tensor, Value, leaves, map_leaves


@dataclass(frozen=True)
class Bound:
    """A tensor as the propagation sees it, in place of its buffer (so `shape` and a
    layer's slice, which is all the host asks of a buffer): a ceiling on its magnitude,
    its error by part, and the type it is stored in (None for an index or a mask). The
    arrays have one axis for each of the value's, of its size or 1 (rules.py), and `exact`
    the types its exact value is representable in."""

    shape: tuple[int, ...]
    mag: np.ndarray
    err: Err
    stored: str | None
    exact: frozenset[str] = frozenset()

    def __getitem__(self, layer: int) -> Bound:  # a fold's layer
        def one(a: np.ndarray) -> np.ndarray:
            return a[layer if a.shape[0] > 1 else 0]

        err = {w: one(e) for w, e in self.err.items()}
        return Bound(self.shape[1:], one(self.mag), err, self.stored, self.exact)


def _nothing(shape: tuple[int, ...]) -> Bound:
    """An index or a mask: no magnitude, no error."""
    return Bound(shape, np.zeros((1,) * len(shape)), {}, None, frozenset(MACHINES))


def _common(bounds: list[Bound]) -> frozenset[str]:
    """The types every one of `bounds` is exact in."""
    return frozenset.intersection(*(b.exact for b in bounds))


def _stacked(layers: list[Bound]) -> Bound:
    """Layers' bounds as their stack's (a fold's backward pass returns one)."""
    first = layers[0]

    def stack(arrays: list[np.ndarray]) -> np.ndarray:
        return np.stack(np.broadcast_arrays(*arrays))

    zero = np.zeros(())
    parts = {w for b in layers for w in b.err}
    return Bound(
        (len(layers), *first.shape),
        stack([b.mag for b in layers]),
        {w: stack([b.err.get(w, zero) for b in layers]) for w in parts},
        first.stored,
        _common(layers),
    )


def _widest(bounds: list[Bound]) -> Bound:
    """One bound over several values of one shape: the largest magnitude and error."""
    first = bounds[0]
    return replace(
        first,
        mag=np.maximum.reduce([b.mag for b in bounds]),
        err=widest(*(b.err for b in bounds)),
        exact=_common(bounds),
    )


def at_grain(a, rank: int, grain: str) -> np.ndarray:
    """`a` (broadcastable to a value of `rank` axes) as the grain keeps it: the largest
    over each row ("row": all axes but the last), channel (the last axis) or the whole
    value ("site"); one axis for each of the value's."""
    a = np.asarray(a, dtype=np.float64)
    a = a.reshape((1,) * (rank - a.ndim) + a.shape)
    axes = {"row": (rank - 1,), "channel": tuple(range(rank - 1))}.get(grain, range(rank))
    return np.max(a, axis=tuple(axes), keepdims=True) if rank else a


def _grain_kind(site: SiteEnvelope) -> str:
    return site.grain.kind if site.grain is not None else "site"


def _per_grain(site: SiteEnvelope, whole: float, grain: tuple[float, ...] | None, shape):
    """A site's number (its magnitude, or a rounding) at this call, by its grain: a row's
    own for "row", a channel's for "channel", else the site's. A site's calls may differ in
    shape: calibration merged them position by position, so the first rows (or channels)
    are this call's ceilings."""
    kind = _grain_kind(site)
    rank = len(shape)
    if grain is None or kind == "site" or not rank:
        return np.full((1,) * rank, whole)
    lead = shape[:-1] if kind == "row" else (1,) * (rank - 1)
    last = 1 if kind == "row" else shape[-1]
    count = math.prod(lead) * last
    if count > len(grain):  # not this site's shape: the site's largest is the ceiling
        return np.full((1,) * rank, whole)
    return np.asarray(grain[:count]).reshape(*lead, last)


@dataclass(frozen=True)
class Result:
    bound: float  # the ceiling on the output's largest elementwise gap
    parts: dict[str, float]  # its parts at that element, by site (or argument)


def _worst(err: Err) -> Result:
    """The element whose ceiling is largest, and the parts of its ceiling."""
    if not err:
        return Result(0.0, {})
    parts = dict(zip(err, np.broadcast_arrays(*err.values()), strict=True))
    at = np.unravel_index(np.argmax(total(parts)), np.shape(next(iter(parts.values()))))
    return Result(float(total(parts)[at]), {w: float(e[at]) for w, e in parts.items()})


class Propagation:
    """The entry of `core` bounded under `realization`, over the envelope's samples."""

    def __init__(self, core: Core, envelope: Envelope, realization: Realization):
        self.core = core
        self.envelope = envelope
        self.realization = realization
        self.arguments = arguments(core, envelope, realization)
        self._works: dict[tuple, int] = {}

    def run(self, model: str) -> Result:
        """The output's bound by `model` (rules.MODELS)."""
        view = self.core.view
        host = Host(view, partial(self._apply, model), stack=_stacked)
        out = host.call(view.entry, self.arguments, CallContext())
        worst = Result(0.0, {})
        for _, t in leaves(out):
            if t.type.kind == "real":
                found = _worst(t.data.err)
                worst = found if found.bound >= worst.bound else worst
        return worst

    def _apply(self, model: str, op, ins: list[Tensor], ctx: CallContext, draw) -> Tensor:
        if op.type.kind != "real":
            return Tensor(op.type, _nothing(op.type.shape))
        site = self._site(op.site)
        machine = MACHINES[self.realization.type_at(op.site)]
        stored = storage_of(op.type, machine)
        rule = RULES[op.prim.name]
        shape = op.type.shape
        mag = _per_grain(site, site.magnitude, site.grain and site.grain.magnitude, shape)
        accum = self.realization.accum.get(op.site, machine.arith_name)
        operands = [_loaded(t, machine, op.site) for t in ins]
        if rule.pointwise:
            operands = [_aligned(x, t.type, op.type) for x, t in zip(operands, ins, strict=True)]
        step = Step(
            ins=operands,
            mag=mag,
            sums=site.sum,
            model=model,
            u=UNIT[accum],
            order=self.realization.order.get(op.site),
            row=_row(op, ins),
            axis=_axis(op),
            terms=self._terms(op, ins),
            function=self._function(machine),
            apply=partial(_reference, op.prim, self._application(op, ins)),
        )
        carried = rule.carry(step)
        committed = rule.own(step)
        if rule.stores:
            rounded = accum if rule.rounds else None
            store = _store_rounding(site, rule, stored, machine.arith_name, rounded, model, mag)
            if stored in site.exact:  # v representable: fl(ŵ) is no further from ŵ than v
                store = np.minimum(store, total(carried) + committed)
            committed = committed + store
        own = {op.site: committed} if np.any(committed) else {}
        kind = _grain_kind(site)
        err = {w: at_grain(e, len(shape), kind) for w, e in plus(carried, own).items()}
        return Tensor(op.type, Bound(shape, mag, err, stored, frozenset(site.exact)))

    def _function(self, machine) -> float:
        """The relative error of exp, erf and tanh beyond a correctly rounded result in
        kernels of `machine`: presk's own in a kernel computing in f32 (psk-functions),
        which computes in f64 and rounds once, else the C library's ulps."""
        if self.realization.functions == "presk" and machine.arith_name != "f64":
            return functions.RELATIVE_ERROR
        return LIBM * UNIT[machine.arith_name]

    def _application(self, op, ins: list[Tensor]) -> Apply:
        return Apply(op.attrs, [t.type for t in ins], op.type, op.site, False, None)

    def _terms(self, op, ins: list[Tensor]) -> int:
        """The primitive's terms per output element at this call (calibration's `work`):
        calls of one function at other sizes share a site, not their k."""
        shapes = tuple(t.type.shape for t in ins)
        key = (op.site, shapes)
        if key not in self._works:
            self._works[key] = work(op.prim, self._application(op, ins))
        return self._works[key]

    def _site(self, site: str) -> SiteEnvelope:
        found = self.envelope.sites.get(site)
        if found is None:
            raise RealizationError(
                f"the envelope has no site {site}: it was measured on another program",
                code="E7004",
            )
        return found


def _reference(prim, ap: Apply, arrays: list[np.ndarray]) -> np.ndarray:
    """The primitive's exact reference run on float64 arrays (the operands' bounds,
    broadcast to their shapes): a move moves them, a sum of non-negative terms adds them."""
    full = [np.broadcast_to(a, t.shape) for a, t in zip(arrays, ap.in_types, strict=True)]
    return np.asarray(prim.reference(ap, full), dtype=np.float64)


def _aligned(x: Operand, t, out) -> Operand:
    """An operand of a pointwise primitive with its arrays aligned to the result's axes."""

    def one(a: np.ndarray) -> np.ndarray:
        return aligned(np.broadcast_to(a, t.shape), t, out)

    return replace(x, mag=one(x.mag), err={w: one(e) for w, e in x.err.items()})


def _store_rounding(
    site: SiteEnvelope,
    rule: Rule,
    stored: str,
    arith: str,
    rounded: str | None,
    model: str,
    mag: np.ndarray,
):
    """A computed value rounded to its type at its store, after its arithmetic's own
    rounding when that is wider (a bf16 kernel computes in f32) and the rule did not
    round it already (`rounded`, the type its own rounding ended in, None if it did not
    round). A result exact in its type (a selection of its operands) rounds nothing. The
    bounds charge u_t·mag, which holds for the value computed; rss, an estimate, the
    envelope's largest rounding of the exact values (the row's, from a grain envelope)."""
    if site.magnitude > MACHINES[stored].largest:
        return math.inf  # the value overflows its type
    if rule.exact_result:
        return 0.0
    if rounded is not None:  # already a number of `rounded`: the store may narrow it
        first = 0.0
        if MACHINES[rounded].bytes <= MACHINES[stored].bytes:
            return 0.0
    else:
        first = UNIT[arith] * mag if arith != stored else 0.0
    if model == "rss" and stored in site.rounding:
        grain = site.grain.rounding[stored] if site.grain is not None else None
        return first + _per_grain(site, site.rounding[stored], grain, mag.shape)
    return first + UNIT[stored] * mag


def _loaded(t: Tensor, machine, site: str) -> Operand:
    """An operand as a kernel of `machine` reads it: rounded to the kernel's type if it
    is stored in a wider one (by at most its own error, if its exact value is exact in
    the kernel's type)."""
    b: Bound = t.data
    err = b.err
    if b.stored is not None:
        load = storage_of(t.type, machine)
        if MACHINES[b.stored].bytes > MACHINES[load].bytes and np.any(b.mag > 0):
            rounding = UNIT[load] * b.mag
            if load in b.exact:
                rounding = np.minimum(rounding, total(err))
            if np.any(rounding):
                err = plus(err, {site: rounding})
    return Operand(b.mag, err, t.type.size)


def _axis(op) -> int | None:
    """The axis of the row a row-wise primitive reads (None for any other)."""
    return op.attrs.get("axis") if isinstance(op.attrs, dict) else None


def _row(op, ins: list[Tensor]) -> int:
    """The length of the row a row-wise primitive reads (1 for any other)."""
    axis = _axis(op)
    return ins[0].type.shape[axis] if axis is not None and ins else 1


# ---- the entry's arguments ----


def arguments(core: Core, envelope: Envelope, realization: Realization) -> list[Value]:
    """The entry's arguments as bounds: each leaf's largest magnitude over the envelope's
    samples and its rounding to what the machine backends run it in (a parameter's own
    type or integer weights, else the kernels' type), named by its path, at the envelope's
    grain."""
    meta = envelope.meta
    reference = core.reference(meta.bits)
    names = core.view.entry_function.arg_names
    per_sample = []
    for index in range(meta.first, meta.first + meta.samples):
        values = reference.values(sample_arguments(core, meta, index))
        per_sample.append(
            [
                _bounds(n, v, realization, i == 0 and _takes_params(core), meta.grain)
                for i, (n, v) in enumerate(zip(names, values, strict=True))
            ]
        )
    return [_merged(samples) for samples in zip(*per_sample, strict=True)]


def _takes_params(core: Core) -> bool:
    return "psk.module" in core.view.attrs


def _bounds(name: str, value: Value, r: Realization, params: bool, grain: str) -> Value:
    realized = parameter_values(value, r) if params else value
    default = MACHINES[r.default]
    mine = dict(leaves(realized))

    def one(path: str, t: Tensor) -> Tensor:
        if t.type.kind != "real":
            return Tensor(t.type, _nothing(t.type.shape))
        x = np.asarray(t.data, dtype=np.float64)
        key = path[len(name) + 1 :] if params else path
        if params and key in r.params:
            stored, y = r.params[key], np.asarray(mine[key].data, dtype=np.float64)
        elif params and key in r.quant:  # integer weights, dequantised in the arithmetic
            stored, y = default.arith_name, np.asarray(mine[key].data, dtype=np.float64)
        else:
            stored = storage_of(t.type, default)
            y = to_storage(x, stored).astype(np.float64)
        rank = x.ndim
        gap = at_grain(np.abs(y - x), rank, grain)
        mag = at_grain(np.abs(x), rank, grain)
        exact_in = frozenset(m for m in MACHINES if np.array_equal(to_storage(x, m), x))
        err = {path: gap} if np.any(gap) else {}
        return Tensor(t.type, Bound(t.type.shape, mag, err, stored, exact_in))

    return map_leaves(one, value, name)


def _merged(samples: list[Value]) -> Value:
    """One argument's bounds over the samples: the largest magnitude and error."""
    first = samples[0]
    if isinstance(first, Tensor):
        return Tensor(first.type, _widest([s.data for s in samples]))
    if isinstance(first, dict):
        return {k: _merged([s[k] for s in samples]) for k in first}
    return tuple(_merged([s[i] for s in samples]) for i in range(len(first)))


# ---- measuring ----


def measured_gap(core: Core, envelope: Envelope, realization: Realization, backend: str) -> float:
    """The largest |native − exact| over the output's real elements and the envelope's
    samples, against the envelope's reference (the upper end, on balls); +∞ when a native
    element is not finite (an overflow is not a small gap)."""
    return measurement(core, envelope, realization, backend).upper


def measurement(core: Core, envelope: Envelope, realization: Realization, backend: str) -> Gap:
    """`measured_gap`, and the reference's radius beside it."""
    exact_outs = [exact_output(core, envelope.meta, i) for i in sample_indices(envelope)]
    return Gap(gap_to(exact_outs, core, envelope, realization, backend), radius(exact_outs))


def sample_indices(envelope: Envelope) -> range:
    meta = envelope.meta
    return range(meta.first, meta.first + meta.samples)


@dataclass(frozen=True)
class ExactOutput:
    """A sample's exact output: each real leaf rounded to float64 (`values`); on balls, the
    rest of each midpoint (`low`, float64: the two hold it to about 106 bits) and how far
    from `values + low` the exact value may lie (`reach`, a certified bound: the ball's
    radius, rounded up). On the MPFR reference both are 0: its own distance is estimated
    by doubling its bits, not certified."""

    values: list[np.ndarray]
    low: list[np.ndarray]
    reach: list[np.ndarray]


def radius(exact_outs: list[ExactOutput]) -> float:
    """The most any of the exact outputs may lie from its midpoint."""
    return max((float(np.max(r)) for x in exact_outs for r in x.reach if r.size), default=0.0)


def exact_output(core: Core, meta: Meta, index: int) -> ExactOutput:
    """The output's real leaves on sample `index` of an envelope, from its reference:
    what a measurement compares with (kept, since the reference is the slow run)."""
    reference = core.reference(meta.bits, meta.reference)
    out = _run(reference, sample_arguments(core, meta, index), sample_seed(meta, index))
    on_balls = reference.backend.numbers is balls
    values, low, reach = [], [], []
    for x in _real_leaves(out):
        high = exact.to_float64(x.data)
        values.append(high)
        if on_balls:
            rest = balls.to_float64(x.data - balls.exact(high))
            low.append(rest)
            reach.append(balls.upper(x.data - balls.exact(high) - balls.exact(rest)))
        else:
            low.append(np.zeros(high.shape))
            reach.append(np.zeros(high.shape))
    return ExactOutput(values, low, reach)


@dataclass(frozen=True)
class Gap:
    """A measured gap: its upper end over the balls (the gap to the float64 midpoints plus
    their reach; the gap itself on the MPFR reference), and the reference's radius, the
    most any exact output may lie from its float64 value."""

    upper: float
    radius: float


def gap_to(
    exact_outs: list[ExactOutput],
    core: Core,
    envelope: Envelope,
    realization: Realization,
    backend: str,
) -> float:
    """The measured gap of `realization` on `backend` against the exact outputs of the
    envelope's samples (`exact_output`, one a sample in order): its upper end, on balls."""
    return max(sample_gaps(exact_outs, core, envelope, realization, backend), default=0.0)


def sample_gaps(
    exact_outs: list[ExactOutput],
    core: Core,
    envelope: Envelope,
    realization: Realization,
    backend: str,
) -> list[float]:
    """`gap_to`, one a sample in order."""
    meta = envelope.meta
    native = core.lower(realization).compile(backend)
    gaps = []
    for index, xs in zip(sample_indices(envelope), exact_outs, strict=True):
        out = _run(native, sample_arguments(core, meta, index), sample_seed(meta, index))
        gaps.append(_gap(xs, _real_leaves(out)))
    return gaps


def _run(compiled: Compiled, args: list, seed: int) -> Value:
    return compiled.backend.call(compiled.values(args), CallContext(seed=seed))


def _real_leaves(value: Value) -> list[Tensor]:
    return [t for _, t in leaves(value) if t.type.kind == "real" and t.type.size]


# Two float64 subtractions, each within half a unit of its result: a gap computed from
# float64 values and scaled by this is at least the exact one.
_SUBTRACTIONS = 1 + 2.0**-50


def _gap(exact: ExactOutput, native_outs: list[Tensor]) -> float:
    gap = 0.0
    for x, low, r, t in zip(exact.values, exact.low, exact.reach, native_outs, strict=True):
        y = np.asarray(t.data).astype(np.float64)
        if not np.all(np.isfinite(y)):
            return math.inf
        if np.any(r) or np.any(low):  # the upper end over the ball
            d = np.nextafter(np.abs((y - x) - low) * _SUBTRACTIONS + r, math.inf)
        else:
            d = np.abs(x - y)
        gap = max(gap, float(np.max(d)))
    return gap
