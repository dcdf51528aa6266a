"""The validation loss: an entry's mean over a data file's validation windows, in batches
of the entry's B, at given parameters. `presk eval` prints it; `presk train --eval-every`
records it during a run, on the training backend, at the parameters of the step."""

from __future__ import annotations

from dataclasses import dataclass

from presk.backends.host import CallContext
from presk.errors import BindingError
from presk.ir.types import TensorType
from presk.runtime.values import Tensor, Value
from presk.train.data import Windows, next_token_pair


@dataclass
class Validation:
    loss: float  # the mean of the batches' losses
    batches: int
    batch: int  # windows a batch
    left_out: int  # windows of a last partial batch, 0 if it was not reached


def check_validation(data: Windows, batch: int) -> None:
    """Refuse (E3011) data whose validation windows fill no batch of `batch`."""
    if data.validation_batches(batch) < 1:
        raise BindingError(
            f"{data.path} has {len(data.val)} validation windows, fewer than a batch of {batch}",
            code="E3011",
        )


def validation_loss(
    backend,
    params: Value,
    data: Windows,
    tokens: TensorType,
    vocab: int,
    seed: int,
    batches: int | None = None,
) -> Validation:
    """The entry `backend` runs (its loss, not training: no dropout) at `params`, averaged
    over the first `batches` validation batches (all of them if None). `tokens` is the type
    of the entry's (tokens, targets) arguments, `vocab` their V."""
    batch = tokens.shape[0]
    available = data.validation_batches(batch)
    count = available if batches is None else min(batches, available)
    total = 0.0
    for windows in data.validation(batch, count):
        x, y = next_token_pair(windows, vocab)
        out = backend.call([params, Tensor(tokens, x), Tensor(tokens, y)], CallContext(seed=seed))
        total += float(out.data.item())
    left_out = data.validation_left_out(batch) if count == available else 0
    return Validation(total / count, count, batch, left_out)


def backend_words(backend) -> str:
    """Where a backend computes, as a closing line says it: `mlir in f32`, `interp at 256
    bits`."""
    name = backend.spec.name
    if backend.spec.exact:
        return f"{name} at {backend.bits} bits"
    return f"{name} in {backend.realization.label}"
