"""presk calibrate --step: one training step under realizations against the exact step
(docs/precision.md, section 11).

From trained parameters, `warmup` steps natively in f64 (AdamW's moments zero at the
first, so that v is not zero at the measured one) give a state (θ, m, v). Each
realization's step starts from that state with every leaf rounded to the type its step
stores it in (the default type, or a site's storage type: an f32 run's state lives in
f32), and so does the exact step it is compared with: `train.step` on the reference.
The rows: the update gap ‖θ̂′ − θ′‖₂ / ‖θ′ − θ‖₂, the storage floor (the exact θ′
rounded to the stored type, as the same ratio: the nearest any stored θ̂′ can be), the
gradient gap ‖ĝ − g‖₂ / ‖g‖₂ (the loss's `.grad` entry, realized and exact), and the
median time of native steps. The measured step is the last of a run whose learning rate
rises linearly over the warm-up to its peak, which the measured step takes.

On the ball reference (the default) each exact value is a ball, so each gap is an
interval: the rows print its upper end, ‖d‖ taken over the midpoints plus the balls'
reach, over the denominator less its reach, a certified bound.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

import numpy as np

from presk import realize as realizations
from presk.api import Core
from presk.kernel.machine import ELEMENTS, to_storage
from presk.prims import balls, exact
from presk.quantize import parameter_values
from presk.realize import Realization
from presk.runtime.output import of_balls
from presk.runtime.values import Tensor, Value, leaves, map_leaves
from presk.stages import launch_sites
from presk.timing import timed
from presk.train.data import Windows
from presk.train.loop import Hyper, State, Trainer, check_trainable, zeros_like
from presk.train.step import SYMBOL

RECIPE = "recipe"
DEFAULTS = ("f64", "f32", "bf16", RECIPE)  # the rows without --realize
OPTIMIZER = "adamw."  # the prelude's optimiser: its functions' sites
TIMED = 5  # native steps a time is the median of
# the fields of a realization keyed by site ("default" is contract's every other site)
SITE_MAPS = ("storage", "accum", "order", "contract")
ELEMENT_OF = {dtype: name for name, dtype in ELEMENTS.items()}


@dataclass(frozen=True)
class Setup:
    """What is measured: a loss's training step (a Core with `train_step`) from `params`."""

    core: Core
    params: Value
    data: Windows | None
    warmup: int  # native f64 steps before the measured one
    lr: float  # the peak learning rate, the measured step's
    seed: int  # of drawn batches, or of the data's order
    bits: int  # the reference's precision
    reference: str = "ball"  # the exact backend the step is measured against

    @property
    def step(self) -> int:
        """The measured step's number: the one after the warm-up."""
        return self.warmup + 1

    @property
    def hyper(self) -> Hyper:
        return Hyper(lr=self.lr, warmup=self.step)


@dataclass(frozen=True)
class Row:
    label: str
    update_gap: float
    floor: float
    grad_gap: float
    ms: float  # the median native step


@dataclass(frozen=True)
class Measured:
    rows: list[Row]
    f64_ms: float  # the all-f64 step's median, what each row's time is against
    update: float  # ‖θ′ − θ‖₂ / ‖θ‖₂ of the exact step from the f64 state
    radius: float  # the most the exact values' balls reach, relative (0 on MPFR)


@dataclass(frozen=True)
class Norm:
    """‖d‖₂ of a difference to exact values: `value` over the float64 nearest each
    element, `reach` the ‖·‖₂ of how far each exact element may lie from it (a certified
    bound on balls; 0 on MPFR, whose own error is estimated, not bounded)."""

    value: float
    reach: float

    def over(self, other: Norm) -> float:
        """The upper end of self / other over the balls (+∞ where other's may be 0)."""
        low = other.value - other.reach
        return (self.value + self.reach) / low if low > 0 else math.inf

    @property
    def relative_reach(self) -> float:
        return self.reach / self.value if self.value > 0 else 0.0


def recipe(step_core: Core) -> Realization:
    """Mixed precision: bf16 everywhere but the optimiser, whose launch sites (the
    prelude's adamw.clip, adamw.schedule and adamw.step) store f64."""
    sites = launch_sites(step_core.lower("bf16").module)
    storage = {s: "f64" for s in sites if s.startswith(OPTIMIZER)}
    return Realization("bf16", storage=storage, spelling=RECIPE)


def read_realizations(spellings: list[str], step_core: Core) -> list[Realization]:
    """Each of f64, f32, bf16, @R.json or `recipe`, refused (E7002) if it quantises
    weights, which a training step cannot update."""
    rs = [recipe(step_core) if s == RECIPE else realizations.read(s) for s in spellings]
    for r in rs:
        check_trainable(r)
    return rs


def measure(setup: Setup, rs: list[Realization]) -> Measured:
    """The rows of `rs`, each against the exact step from the state it starts from."""
    step_core = setup.core
    grad_core = step_core.derived(entry=f"{step_core.entry}.grad", train_step=False)
    f64, state, batch = origin(setup)
    reference = Reference(setup, grad_core, batch)
    grad_sites = set(launch_sites(grad_core.lower("f64").module))
    rows = []
    for r in rs:
        trainer = trainer_for(setup, step_core.lower(r).compile("mlir"))
        grad = grad_core.lower(restricted(r, grad_sites)).compile("mlir").backend
        rows.append(measured_row(setup, r, trainer, grad, state, batch, reference))
    ms = f64_ms(rows, rs, f64, state, setup.step, batch)
    return Measured(rows, ms, reference.update(state), reference.radius)


def f64_ms(rows: list[Row], rs: list[Realization], f64: Trainer, state, t: int, batch) -> float:
    """The all-f64 step's time: its row's, else measured on the warm-up's backend."""
    for row, r in zip(rows, rs, strict=True):
        if r == Realization("f64", spelling=r.spelling):
            return row.ms
    return step_ms(f64, state, t, batch)


def origin(setup: Setup) -> tuple[Trainer, State, list[Value]]:
    """The all-f64 native trainer, the state after its warm-up, and the measured step's
    batch: what every realization's step starts from."""
    f64 = trainer_for(setup, setup.core.lower("f64").compile("mlir"))
    state = warmed(setup, f64)
    batch, _ = f64.batch(setup.step)
    return f64, state, batch


def trainer_for(setup: Setup, compiled) -> Trainer:
    """Single steps of the run the measured step ends, on `compiled`'s backend."""
    return Trainer.detached(
        compiled.core.view, compiled.backend, setup.step, setup.seed, setup.hyper, setup.data
    )


def warmed(setup: Setup, trainer: Trainer) -> State:
    """The trained parameters after the warm-up steps, AdamW's moments zero at the first."""
    state = State(setup.params, zeros_like(setup.params), zeros_like(setup.params))
    if setup.warmup:
        trainer.run(state, stop_at=setup.warmup)
    return state


def restricted(r: Realization, sites: set[str]) -> Realization:
    """`r` with the sites it names narrowed to `sites` (the gradient entry has no
    optimiser's)."""
    narrowed = {
        name: {s: v for s, v in getattr(r, name).items() if s in sites or s == "default"}
        for name in SITE_MAPS
    }
    return replace(r, **narrowed)


class Reference:
    """The exact step and gradient from each state asked for, each computed once (a state
    is fixed by the types its leaves were rounded to)."""

    def __init__(self, setup: Setup, grad_core: Core, batch: list[Value]):
        self.step = trainer_for(setup, setup.core.reference(setup.bits, setup.reference))
        self.grad = grad_core.reference(setup.bits, setup.reference).backend
        self.batch = batch
        self.t = setup.step
        self.bits = setup.bits
        self.steps: dict[tuple, Value] = {}
        self.grads: dict[tuple, Value] = {}
        self.norms: dict[tuple, Norm] = {}  # ‖θ′ − θ‖₂ and ‖g‖₂, by kind and state
        self.radius = 0.0  # the largest relative reach of an exact update or gradient

    def _norm(self, kind: str, state: State, of) -> Norm:
        """`of()`, a norm of an exact value from `state`, taken once a state (a solve
        measures many steps from one), its relative reach noted."""
        key = (kind, _key(state))
        if key not in self.norms:
            norm = self.norms[key] = of()
            self.radius = max(self.radius, norm.relative_reach)
        return self.norms[key]

    def at(self, state: State) -> tuple[Value, Value]:
        """(θ′, g): the exact step's parameters and the exact gradient from `state`, whose
        leaves are in the types it was rounded to."""
        return self.new_at(state), self.grad_at(state)

    def new_at(self, state: State) -> Value:
        """θ′, the exact step's parameters from `state` (computed once a state)."""
        key = _key(state)
        if key not in self.steps:
            args = self.step.call_args(state, self.t, self.batch)
            self.steps[key] = self.step.backend.call(args, self.step.context(self.t), SYMBOL)[3]
        return self.steps[key]

    def grad_at(self, state: State) -> Value:
        """g, the exact gradient from `state` (computed once a state)."""
        key = _key(state)
        if key not in self.grads:
            ctx = self.step.context(self.t)
            self.grads[key] = self.grad.call([state.params, *self.batch], ctx)
        return self.grads[key]

    def update(self, state: State) -> float:
        """‖θ′ − θ‖₂ / ‖θ‖₂ of the exact step from `state` (over the midpoints)."""
        return self.update_norm(state).value / distance(state.params).value

    def update_norm(self, start: State) -> Norm:
        """‖θ′ − θ‖₂ of the exact step from `start`, what every update gap is over."""
        return self._norm(
            "update", start, lambda: distance(self.new_at(start), start.params, self.bits)
        )

    def grad_norm(self, start: State) -> Norm:
        """‖g‖₂ of the exact gradient from `start`, what every gradient gap is over."""
        return self._norm("grad", start, lambda: distance(self.grad_at(start), None, self.bits))


def measured_row(
    setup: Setup,
    r: Realization,
    trainer: Trainer,
    grad_backend,
    state: State,
    batch: list[Value],
    reference: Reference,
) -> Row:
    """`r`'s row: its step (on `trainer`) and gradient (on `grad_backend`) from `state`
    rounded to the types its step stores, against the exact ones from there."""
    t, bits = setup.step, setup.bits
    start, out = realized_step(trainer, state, t, batch)
    new, g = reference.at(start)
    ms = step_ms(trainer, start, t, batch)
    read = parameter_values(start.params, r, native=True)
    g_hat = grad_backend.call([read, *batch], trainer.context(t))
    update = reference.update_norm(start)
    return Row(
        r.label if r.spelling != RECIPE else RECIPE,
        distance(out[3], new, bits).over(update),
        distance(rounded_like(new, out[3]), new, bits).over(update),
        distance(g_hat, g, bits).over(reference.grad_norm(start)),
        ms,
    )


def update_gap(
    setup: Setup, r: Realization, state: State, batch: list[Value], reference: Reference
) -> float:
    """‖θ̂′ − θ′‖₂ / ‖θ′ − θ‖₂ of one native step under `r` from `state` (rounded to the
    types `r`'s step stores), against the exact step from there (`reference`'s)."""
    trainer = trainer_for(setup, setup.core.lower(r).compile("mlir"))
    start, out = realized_step(trainer, state, setup.step, batch)
    return distance(out[3], reference.new_at(start), setup.bits).over(reference.update_norm(start))


def realized_step(trainer: Trainer, state: State, t: int, batch: list[Value]) -> tuple:
    """(start, out): `state` rounded to the types `trainer`'s step stores (a first step
    tells them), and the step's outputs from there."""
    ctx = trainer.context(t)
    first = trainer.backend.call(trainer.call_args(state, t, batch), ctx, trainer.symbol)
    start = stored(state, first)
    return start, trainer.backend.call(trainer.call_args(start, t, batch), ctx, trainer.symbol)


def stored(state: State, out: tuple) -> State:
    """`state` with each leaf of θ, m and v rounded to the type the step `out` stored it
    in."""
    trees = zip((state.params, state.m, state.v), out[3:6], strict=True)
    params, m, v = (rounded_like(x, like) for x, like in trees)
    return State(params, m, v)


def rounded_like(value: Value, like: Value) -> Value:
    """`value` with each real leaf rounded to the dtype of `like`'s leaf."""
    dtypes = {p: np.asarray(t.data).dtype for p, t in leaves(like)}

    def one(path: str, t: Tensor) -> Tensor:
        if t.type.kind != "real":
            return t
        data = np.asarray(t.data)
        data = exact.to_float64(data) if data.dtype == object else data
        return Tensor(t.type, to_storage(data, ELEMENT_OF[dtypes[path]]))

    return map_leaves(one, value)


def step_ms(trainer: Trainer, state: State, t: int, batch: list[Value]) -> float:
    """The median wall time of native steps from `state` (presk bench's timer), in ms."""
    args, ctx = trainer.call_args(state, t, batch), trainer.context(t)
    return statistics.median(timed(lambda: trainer.backend.call(args, ctx, trainer.symbol), TIMED))


def distance(x: Value, y: Value | None = None, bits: int = 53) -> Norm:
    """‖x − y‖₂ over the real leaves (‖x‖₂ without `y`), each difference taken exactly
    (in MPFR at `bits`, or as a ball where either side is one); +∞ where a machine number
    is not finite (an overflow is not a small gap)."""
    xs = [t for _, t in leaves(x) if t.type.kind == "real"]
    ys = [t for _, t in leaves(y) if t.type.kind == "real"] if y is not None else [None] * len(xs)
    squares, reaches = 0.0, 0.0
    for a, b in zip(xs, ys, strict=True):
        if not (_finite(a) and (b is None or _finite(b))):
            return Norm(math.inf, 0.0)
        near, reach = _difference(a, b, max(bits, 53))  # every machine number held exactly
        squares += float(np.sum(np.square(near)))
        reaches += float(np.sum(np.square(reach)))
    return Norm(math.sqrt(squares), math.sqrt(reaches))


def _difference(a: Tensor, b: Tensor | None, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """a − b (a without b) rounded to float64, and how far the exact difference may lie
    from it: over balls, each ball's reach past the rounded midpoint; on MPFR, zero."""
    if of_balls(a) or (b is not None and of_balls(b)):
        with balls.context(bits):
            d = balls.exact(a.data) if b is None else balls.exact(a.data) - balls.exact(b.data)
            near = balls.to_float64(d)
            return near, balls.upper(d - balls.exact(near))
    with exact.context(bits):
        d = exact.exact(a.data) if b is None else exact.exact(a.data) - exact.exact(b.data)
        near = exact.to_float64(np.asarray(d, dtype=object))
        return near, np.zeros(near.shape)


def _finite(t: Tensor) -> bool:
    a = np.asarray(t.data)
    return a.dtype == object or bool(np.all(np.isfinite(a.astype(np.float64))))


def _key(state: State) -> tuple:
    """A state's leaves' types: the state was rounded to them, so they fix it."""
    return tuple(np.asarray(t.data).dtype.str for t in _tensors(state))


def _tensors(state: State) -> list[Tensor]:
    return [t for value in (state.params, state.m, state.v) for _, t in leaves(value)]
