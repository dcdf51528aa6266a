"""Text from a language model's logits: autoregressive sampling over the vocabulary it was
trained on, bytes or a byte-level BPE (presk/train/tokenizer.py; docs/generate.md). No
command line here: `presk generate` and `presk serve` call it.

The model is an entry taking one argument of tokens `nat{V}[1, T]` and returning logits
`ℝ[1, T, V]`, compiled once and called once a token. PSK programs declare no KV cache,
so each call recomputes the window: the context's last T tokens at positions 0..n−1, the
rest padded with token 0, and the logits read at position n−1. Under causal attention
the logits at a position depend on the tokens up to it only, so the padding changes
nothing read. A token is drawn on the host in float64 from a numpy Generator seeded once
a generation, one draw a token: the same logits' bits give the same text on every
backend that computes them (the kernel evaluator and native code do).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from presk import api, quantize
from presk.backends.host import CallContext
from presk.errors import BindingError, UsageError
from presk.ir.types import TensorType
from presk.runtime.output import float64
from presk.runtime.values import Tensor, Value
from presk.train.loop import token_argument
from presk.train.tokenizer import Tokenizer, Vocabulary


@dataclass(frozen=True)
class Sampling:
    """How a generation draws: `tokens` tokens at `temperature` (0: the most likely,
    the first of equal logits), among the `top_k` most likely (None: all), from `seed`."""

    tokens: int = 64
    temperature: float = 1.0
    top_k: int | None = None
    seed: int = 0


def pick(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
    """A token from one position's logits: the argmax at temperature 0, else one draw
    from softmax(logits / temperature) in float64 over the top k."""
    x = np.asarray(logits, dtype=np.float64)
    if sampling.temperature == 0:
        return int(np.argmax(x))
    if sampling.top_k is not None and sampling.top_k < len(x):
        kept = np.argsort(-x, kind="stable")[: sampling.top_k]  # ties by token
        x = np.where(np.isin(np.arange(len(x)), kept), x, -np.inf)
    with np.errstate(over="ignore"):  # a tiny temperature sends all but the top to −∞
        p = np.exp((x - x.max()) / sampling.temperature)
    cumulative = np.cumsum(p / p.sum())
    return int(min(np.searchsorted(cumulative, rng.random(), side="right"), len(x) - 1))


def single_batch(core: api.Core) -> api.Core:
    """`core`'s entry with the dim of its tokens' first axis bound to 1 (one sequence is
    generated at a time); `core` itself if it is 1 already."""
    tokens, _ = logits_entry_types(core)
    if tokens.shape[0] == 1:
        return core
    name = tokens.names[0]
    if name is None:
        raise BindingError(
            f"{core.entry} takes tokens {tokens.text()}: generation binds their first axis to "
            "1, which needs it to be a dim",
            code="E3014",
        )
    return core.program.elaborate(core.entry, core.dims | {name: 1}, core.consts, core.remat)


def logits_entry_types(core: api.Core) -> tuple[TensorType, int]:
    """The entry's tokens type `nat{V}[B, T]` and V, refused (E3014) unless it takes one
    such argument and returns logits ℝ[B, T, V], or (E3010) if the tokens have no bound."""
    view = core.view
    tokens, vocab = token_argument(view, "generation feeds it")
    result = view.entry_function.result_type
    if not (
        isinstance(result, TensorType)
        and result.kind == "real"
        and result.shape == (*tokens.shape, vocab)
    ):
        raise BindingError(
            f"{view.entry} returns {result.text()}: generation reads logits "
            f"ℝ[{tokens.shape[0]}, {tokens.shape[1]}, {vocab}], one row of V a position",
            code="E3014",
        )
    return tokens, vocab


class Model:
    """A compiled logits entry at one sequence (B = 1), its parameters realized once, and
    the tokenizer of its tokens cut to its V: text continued token by token. Calls into
    the backend are serialized, since it keeps its buffers between calls; generations may
    run on several threads."""

    def __init__(self, compiled: api.Compiled, params: Value | None, tokenizer: Tokenizer):
        self.compiled = compiled
        self.tokens_type, size = logits_entry_types(compiled.core)
        if self.tokens_type.shape[0] != 1:
            raise UsageError(f"{compiled.core.entry}: generation runs at B = 1 (single_batch)")
        self.window = self.tokens_type.shape[1]
        self.vocabulary = Vocabulary(tokenizer, size)
        backend = compiled.backend
        realized = (
            quantize.parameter_values(params, backend.realization)
            if backend.spec.exact
            else quantize.stored_parameters(params, backend.realization, backend.machine)
        )
        self._params = [] if params is None else [realized]
        self._lock = threading.Lock()

    def next_logits(self, context: list[int]) -> np.ndarray:
        """The logits (float64) of the token after `context`'s last T tokens."""
        window = context[-self.window :]
        tokens = np.zeros((1, self.window), dtype=np.int64)
        tokens[0, : len(window)] = window
        args = [*self._params, Tensor(self.tokens_type, tokens)]
        with self._lock:
            out = self.compiled.backend.call(args, CallContext())
        return float64(out)[0, len(window) - 1]

    def generate(self, prompt: bytes, sampling: Sampling) -> Iterator[tuple[int, bytes]]:
        """The tokens after `prompt` (at least one byte), each with the bytes it stands
        for, as drawn."""
        if not prompt:
            raise UsageError("the prompt is empty: generation continues at least one byte")
        rng = np.random.default_rng(sampling.seed)
        context = self.vocabulary.encode(prompt)
        for _ in range(sampling.tokens):
            token = pick(self.next_logits(context), sampling, rng)
            context.append(token)
            yield token, self.vocabulary.decode(token)
