"""The training step as one PSK-Core function, `train.step`:

    train.step(params, m, v, t, peak, warmup, total, b1, b2, eps, wd, max_norm, batch…)
        -> (loss, |g|, lr, params', m', v')

It runs the loss's forward and backward (psk-vjp's `fwd` and `bwd`), clips the gradient
by its 2-norm (`adamw.clip`), computes the learning rate (`adamw.schedule`) and takes an
AdamW step (`adamw.step`): every number of a step is computed by the backend, in PSK.

Beside it, `train.master_step(read, params, m, v, …)` is the step of master weights, for
a realization whose `params` type parameters: the forward and backward read `read`, the
parameters with each typed leaf rounded to its type (the caller rounds them), and the
gradient taken there updates `params`, the master copy in the backend's type
(straight-through). `read` comes first, where a call's parameter record goes.
"""

from __future__ import annotations

from presk.core.autodiff import Derivatives, Pair
from presk.core.build import FuncBuilder
from presk.core.program import read_host_program
from presk.errors import BindingError
from presk.front.elaborate import Elaborated, Signature
from presk.ir.types import REAL_SCALAR, TupleType
from presk.stages import core

SYMBOL = "train.step"
MASTER = "train.master_step"
HYPER = ("t", "peak", "warmup", "total", "b1", "b2", "eps", "wd", "max_norm")


def add_train_step(elaborated: Elaborated, remat: str) -> None:
    """Add `train.step` and `train.master_step` for the elaborated loss entry (its
    derivatives already expanded by `stages.core`) to its module, and verify them."""
    sig = elaborated.signature
    if sig.params is None:
        raise BindingError(
            f"{sig.symbol} has no parameters to train: train a module's function", code="E3011"
        )
    if sig.result != REAL_SCALAR:
        raise BindingError(
            f"{sig.symbol} returns {sig.result.text()}: training needs a scalar loss", code="E3011"
        )
    module = elaborated.module
    p, r = sig.params, REAL_SCALAR
    step = elaborated.instantiate("adamw", "step", [p, p, p, p] + [r] * 6)
    clip = elaborated.instantiate("adamw", "clip", [p, r])
    schedule = elaborated.instantiate("adamw", "schedule", [r] * 4)
    adamw = (clip, schedule, step)
    pair = Derivatives(module, read_host_program(module), remat).pair(sig.symbol)
    _add_step(module, SYMBOL, sig, pair, adamw, reads_copy=False)
    _add_step(module, MASTER, sig, pair, adamw, reads_copy=True)
    core(module, remat)


def _add_step(
    module, symbol: str, sig: Signature, pair: Pair, adamw: tuple, reads_copy: bool
) -> None:
    """The function `symbol`: one step whose forward and backward read the parameters
    themselves, or (`reads_copy`) a first argument `read` of their type. `adamw` holds the
    instances of the prelude's clip, schedule and step."""
    clip, schedule, step = adamw
    p, r = sig.params, REAL_SCALAR
    data = [(f"x{i}", t) for i, t in enumerate(sig.args)]
    read = [("read", p)] if reads_copy else []
    inputs = [*read, ("params", p), ("m", p), ("v", p)] + [(h, r) for h in HYPER] + data
    b = FuncBuilder(module, symbol, inputs, symbol)
    args = list(b.args)
    read_by_loss = args.pop(0) if reads_copy else args[0]
    params, m, v, t, peak, warmup, total, b1, b2, eps, wd, max_norm, *batch = args
    fwd = b.call(
        pair.fwd, [read_by_loss, *batch], TupleType((pair.result, pair.res)), f"{symbol}/%c0"
    )
    grads = b.call(
        pair.bwd, [b.get(fwd, 1), b.const("1")], TupleType((p, *sig.args)), f"{symbol}/%c0"
    )
    none = b.record([], [])  # adamw has no parameters
    clipped = b.call(clip.symbol, [none, b.get(grads, 0), max_norm], clip.result, f"{symbol}/%c1")
    lr = b.call(schedule.symbol, [none, t, peak, warmup, total], r, f"{symbol}/%c2")
    new = b.call(
        step.symbol,
        [none, params, b.get(clipped, 0), m, v, t, lr, b1, b2, eps, wd],
        step.result,
        f"{symbol}/%c3",
    )
    b.ret(
        b.tuple([b.get(fwd, 0), b.get(clipped, 1), lr, b.get(new, 0), b.get(new, 1), b.get(new, 2)])
    )
