"""The first-order bound of `presk check --precision`: how far an execution under a
realization can be from the exact denotation, over an envelope's samples.

Every value carries a `Bound`: a ceiling on |v| (the envelope's magnitude at its site,
or for an argument the largest over the samples) and a ceiling on |executed(v) −
exact(v)| by part (presk/precision/rules.py). The entry runs on the host of the
executors (presk/backends/host.py), so calls, folds, records and tuples are walked as
the reference walks them, with a `Bound` in place of each buffer: a fold's layers run
one after the other and carry their errors along, and every layer reads the one site.
Each primitive adds what its rule says, and each stored value its rounding in its type.

The bound is conditional on the envelope and says nothing about a model's quality: it
bounds the distance of an execution to the denotation over the envelope's inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial

import ml_dtypes
import numpy as np

from presk.api import Compiled, Core
from presk.backends.host import CallContext, Host
from presk.errors import RealizationError
from presk.kernel.machine import MACHINES, storage_of, to_storage
from presk.precision.calibrate import work
from presk.precision.envelope import Envelope, SiteEnvelope
from presk.precision.rules import RULES, UNIT, Err, Operand, Step, plus, total, widest
from presk.precision.samples import sample_arguments, sample_seed
from presk.prims import exact
from presk.prims.base import Apply
from presk.quantize import parameter_values
from presk.realize import Realization
from presk.runtime.values import Tensor, Value, leaves, map_leaves

WIDTH = {"bf16": 0, "f32": 1, "f64": 2}
LARGEST = {t: float(ml_dtypes.finfo(MACHINES[t].storage).max) for t in WIDTH}


@dataclass(frozen=True)
class Bound:
    """A tensor as the propagation sees it, in place of its buffer (so `shape` and a
    layer's slice, which is all the host asks of a buffer): a ceiling on its magnitude,
    its error by part, and the type it is stored in (None for an index or a mask)."""

    shape: tuple[int, ...]
    mag: float
    err: Err
    stored: str | None

    def __getitem__(self, layer: int) -> Bound:  # a fold's layer: every layer's ceilings
        return replace(self, shape=self.shape[1:])


def _stacked(layers: list[Bound]) -> Bound:
    """Layers' bounds as their stack's (a fold's backward pass returns one)."""
    first = layers[0]
    return Bound(
        (len(layers), *first.shape),
        max(b.mag for b in layers),
        widest(*(b.err for b in layers)),
        first.stored,
    )


@dataclass(frozen=True)
class Result:
    bound: float  # the ceiling on the output's largest elementwise gap
    parts: Err  # its parts, by site (or argument) where each was committed


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
            if t.type.kind == "real" and total(t.data.err) >= worst.bound:
                worst = Result(total(t.data.err), t.data.err)
        return worst

    def _apply(self, model: str, op, ins: list[Tensor], ctx: CallContext, draw) -> Tensor:
        if op.type.kind != "real":
            return Tensor(op.type, Bound(op.type.shape, 0.0, {}, None))
        site = self._site(op.site)
        machine = MACHINES[self.realization.type_at(op.site)]
        stored = storage_of(op.type, machine)
        rule = RULES[op.prim.name]
        step = Step(
            ins=[_loaded(t, machine, op.site) for t in ins],
            mag=site.magnitude,
            sums=site.sum,
            model=model,
            u=UNIT[self.realization.accum.get(op.site, machine.arith_name)],
            order=self.realization.order.get(op.site),
            row=_row(op, ins),
            terms=self._terms(op, ins),
        )
        committed = rule.own(step)
        if rule.stores:
            committed += _store_rounding(site, stored, machine.arith_name, model)
        err = plus(rule.carry(step), {op.site: committed} if committed else {})
        return Tensor(op.type, Bound(op.type.shape, site.magnitude, err, stored))

    def _terms(self, op, ins: list[Tensor]) -> int:
        """The primitive's terms per output element at this call (calibration's `work`):
        calls of one function at other sizes share a site, not their k."""
        shapes = tuple(t.type.shape for t in ins)
        key = (op.site, shapes)
        if key not in self._works:
            ap = Apply(op.attrs, [t.type for t in ins], op.type, op.site, False, None)
            self._works[key] = work(op.prim, ap)
        return self._works[key]

    def _site(self, site: str) -> SiteEnvelope:
        found = self.envelope.sites.get(site)
        if found is None:
            raise RealizationError(
                f"the envelope has no site {site}: it was measured on another program",
                code="E7004",
            )
        return found


def _store_rounding(site: SiteEnvelope, stored: str, arith: str, model: str) -> float:
    """A computed value rounded to its type at its store, after its arithmetic's own
    rounding when that is wider (a bf16 kernel computes in f32). The bounds charge
    u_t·mag, which holds for the value computed; rss, an estimate, the envelope's
    largest rounding of the exact values, where it has one."""
    if site.magnitude > LARGEST[stored]:
        return math.inf  # the value overflows its type
    first = UNIT[arith] * site.magnitude if arith != stored else 0.0
    if model == "rss" and stored in site.rounding:
        return first + site.rounding[stored]
    return first + UNIT[stored] * site.magnitude


def _loaded(t: Tensor, machine, site: str) -> Operand:
    """An operand as a kernel of `machine` reads it: rounded to the kernel's type if it
    is stored in a wider one."""
    b: Bound = t.data
    err = b.err
    if b.stored is not None:
        load = storage_of(t.type, machine)
        if WIDTH[b.stored] > WIDTH[load] and b.mag > 0:
            err = plus(err, {site: UNIT[load] * b.mag})
    return Operand(b.mag, err, t.type.size)


def _row(op, ins: list[Tensor]) -> int:
    """The length of the row a row-wise primitive reads (1 for any other)."""
    axis = op.attrs.get("axis") if isinstance(op.attrs, dict) else None
    return ins[0].type.shape[axis] if axis is not None and ins else 1


# ---- the entry's arguments ----


def arguments(core: Core, envelope: Envelope, realization: Realization) -> list[Value]:
    """The entry's arguments as bounds: each leaf's largest magnitude over the envelope's
    samples and its rounding to what the machine backends run it in (a parameter's own
    type or integer weights, else the kernels' type), named by its path."""
    meta = envelope.meta
    reference = core.lower("f64").compile("interp", bits=meta.bits)
    names = core.view.entry_function.arg_names
    per_sample = []
    for index in range(meta.first, meta.first + meta.samples):
        values = reference.values(sample_arguments(core, meta, index))
        per_sample.append(
            [
                _bounds(n, v, realization, i == 0 and _takes_params(core))
                for i, (n, v) in enumerate(zip(names, values, strict=True))
            ]
        )
    return [_merged(samples) for samples in zip(*per_sample, strict=True)]


def _takes_params(core: Core) -> bool:
    return "psk.module" in core.view.attrs


def _bounds(name: str, value: Value, r: Realization, params: bool) -> Value:
    realized = parameter_values(value, r) if params else value
    default = MACHINES[r.default]
    mine = dict(leaves(realized))

    def one(path: str, t: Tensor) -> Tensor:
        if t.type.kind != "real":
            return Tensor(t.type, Bound(t.type.shape, 0.0, {}, None))
        x = np.asarray(t.data, dtype=np.float64)
        key = path[len(name) + 1 :] if params else path
        if params and key in r.params:
            stored, y = r.params[key], np.asarray(mine[key].data, dtype=np.float64)
        elif params and key in r.quant:  # integer weights, dequantised in the arithmetic
            stored, y = default.arith_name, np.asarray(mine[key].data, dtype=np.float64)
        else:
            stored = storage_of(t.type, default)
            y = to_storage(x, stored).astype(np.float64)
        gap = float(np.max(np.abs(y - x), initial=0.0))
        mag = float(np.max(np.abs(x), initial=0.0))
        return Tensor(t.type, Bound(t.type.shape, mag, {path: gap} if gap else {}, stored))

    return map_leaves(one, value, name)


def _merged(samples: list[Value]) -> Value:
    """One argument's bounds over the samples: the largest magnitude and error."""
    first = samples[0]
    if isinstance(first, Tensor):
        return Tensor(first.type, _stacked([s.data for s in samples])[0])
    if isinstance(first, dict):
        return {k: _merged([s[k] for s in samples]) for k in first}
    return tuple(_merged([s[i] for s in samples]) for i in range(len(first)))


# ---- measuring ----


def measured_gap(core: Core, envelope: Envelope, realization: Realization, backend: str) -> float:
    """The largest |native − exact| over the output's real elements and the envelope's
    samples; +∞ when a native element is not finite (an overflow is not a small gap)."""
    meta = envelope.meta
    reference = core.lower("f64").compile("interp", bits=meta.bits)
    native = core.lower(realization).compile(backend)
    gap = 0.0
    for index in range(meta.first, meta.first + meta.samples):
        args = sample_arguments(core, meta, index)
        seed = sample_seed(meta, index)
        gap = max(gap, _gap(_run(reference, args, seed), _run(native, args, seed)))
    return gap


def _run(compiled: Compiled, args: list, seed: int) -> Value:
    return compiled.backend.call(compiled.values(args), CallContext(seed=seed))


def _gap(exact_out: Value, native_out: Value) -> float:
    gap = 0.0
    for (_, x), (_, y) in zip(leaves(exact_out), leaves(native_out), strict=True):
        if x.type.kind != "real" or not x.type.size:
            continue
        y = np.asarray(y.data).astype(np.float64)
        if not np.all(np.isfinite(y)):
            return math.inf
        gap = max(gap, float(np.max(np.abs(exact.to_float64(x.data) - y))))
    return gap
