"""The training step as one PSK-Core function, `train.step`:

    train.step(params, m, v, t, peak, warmup, total, b1, b2, eps, wd, max_norm, batch…)
        -> (loss, |g|, lr, params', m', v')

It runs the loss's forward and backward (psk-vjp's `fwd` and `bwd`), clips the gradient
by its 2-norm (`adamw.clip`), computes the learning rate (`adamw.schedule`) and takes an
AdamW step (`adamw.step`): every number of a step is computed by the backend, in PSK.
"""

from __future__ import annotations

from presk.core.autodiff import Derivatives
from presk.core.build import FuncBuilder
from presk.core.program import read_host_program
from presk.errors import BindingError
from presk.front.elaborate import Elaborated
from presk.ir.types import REAL_SCALAR, TupleType
from presk.stages import core

SYMBOL = "train.step"
HYPER = ("t", "peak", "warmup", "total", "b1", "b2", "eps", "wd", "max_norm")


def add_train_step(elaborated: Elaborated, remat: str) -> None:
    """Add `train.step` for the elaborated loss entry (its derivatives already expanded by
    `stages.core`) to its module, and verify it."""
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
    pair = Derivatives(module, read_host_program(module), remat).pair(sig.symbol)
    data = [(f"x{i}", t) for i, t in enumerate(sig.args)]
    inputs = [("params", p), ("m", p), ("v", p)] + [(h, r) for h in HYPER] + data
    b = FuncBuilder(module, SYMBOL, inputs, SYMBOL)
    params, m, v, t, peak, warmup, total, b1, b2, eps, wd, max_norm, *batch = b.args
    fwd = b.call(pair.fwd, [params, *batch], TupleType((pair.result, pair.res)), f"{SYMBOL}/%c0")
    grads = b.call(
        pair.bwd, [b.get(fwd, 1), b.const("1")], TupleType((p, *sig.args)), f"{SYMBOL}/%c0"
    )
    none = b.record([], [])  # adamw has no parameters
    clipped = b.call(clip.symbol, [none, b.get(grads, 0), max_norm], clip.result, f"{SYMBOL}/%c1")
    lr = b.call(schedule.symbol, [none, t, peak, warmup, total], r, f"{SYMBOL}/%c2")
    new = b.call(
        step.symbol,
        [none, params, b.get(clipped, 0), m, v, t, lr, b1, b2, eps, wd],
        step.result,
        f"{SYMBOL}/%c3",
    )
    b.ret(
        b.tuple([b.get(fwd, 0), b.get(clipped, 1), lr, b.get(new, 0), b.get(new, 1), b.get(new, 2)])
    )
    core(module, remat)
