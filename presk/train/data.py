"""Token windows from text: a byte-level tokenizer, windows of T + 1 tokens, a 90/10
split, and a batch order fixed by the seed.

The tokenizer ranks the 256 byte values by how often they occur in the corpus (ties by
value): a token is its byte's rank, so a model with a vocabulary of V < 256 reads the
V − 1 most frequent bytes as themselves and every other byte as token V − 1. Windows are
consecutive runs of T + 1 tokens of the concatenated texts, taken every T tokens (each
window's last token is the next one's first); the first 90 % are for training, the rest
for validation. An epoch visits the training windows in an order drawn from the seed;
a step takes the next B of them (a last partial batch is skipped).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from presk.errors import FileFormatError, UsageError
from presk.runtime import pskd, rng

TOKENIZER = "bytes-by-frequency"


def build(paths: list[str], window: int) -> pskd.Container:
    """The data file for these texts at window length `window` (T)."""
    if window < 1:
        raise UsageError(f"--window {window}: a window needs at least one token")
    texts = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                texts.append(f.read())
        except OSError as e:
            raise UsageError(f"cannot read {p}: {e.strerror}") from None
    raw = np.frombuffer(b"\n".join(texts), dtype=np.uint8)
    counts = np.bincount(raw, minlength=256)
    order = sorted(range(256), key=lambda b: (-counts[b], b))  # byte values by rank
    rank = np.empty(256, dtype=np.uint8)
    rank[order] = np.arange(256, dtype=np.uint8)
    tokens = rank[raw]
    n = (len(tokens) - 1) // window
    if n < 2:
        raise UsageError(f"the texts give {n} window(s) of {window + 1} tokens: need at least 2")
    starts = np.arange(n) * window
    windows = tokens[starts[:, None] + np.arange(window + 1)[None, :]]
    n_train = max(1, (n * 9) // 10)
    meta = {
        "tokenizer": TOKENIZER,
        "window": window,
        "vocab": [int(b) for b in order],
        "sources": [os.path.basename(p) for p in paths],
        "bytes": int(len(raw)),
    }
    return pskd.Container("data", meta, {"train": windows[:n_train], "val": windows[n_train:]})


def encode(text: bytes, vocab: list[int]) -> np.ndarray:
    rank = np.empty(256, dtype=np.int64)
    rank[vocab] = np.arange(256)
    return rank[np.frombuffer(text, dtype=np.uint8)]


@dataclass
class Windows:
    path: str
    window: int
    train: np.ndarray
    val: np.ndarray

    @classmethod
    def load(cls, path: str) -> Windows:
        c = pskd.read(path)
        if c.kind != "data" or c.meta.get("tokenizer") != TOKENIZER or "train" not in c.arrays:
            raise FileFormatError(f"{path}: not a token-window data file", code="E9007")
        return cls(
            path,
            int(c.meta["window"]),
            c.arrays["train"],
            c.arrays.get("val", c.arrays["train"][:0]),
        )

    def batches_per_epoch(self, batch: int) -> int:
        return len(self.train) // batch

    def batch(self, step: int, batch: int, seed: int) -> tuple[np.ndarray, int]:
        """The windows of step `step` (from 1) and its epoch (from 1)."""
        per = self.batches_per_epoch(batch)
        k = step - 1
        epoch, j = divmod(k, per)
        order = rng.generator(seed, f"data/epoch{epoch}").permutation(len(self.train))
        return self.train[order[j * batch : (j + 1) * batch]].astype(np.int64), epoch + 1

    def validation(self, batch: int):
        """The validation windows in order, in batches of `batch`."""
        for i in range(len(self.val) // batch):
            yield self.val[i * batch : (i + 1) * batch].astype(np.int64)


def next_token_pair(windows: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, targets): each window without its last token, and without its first,
    tokens of rank V − 1 and above read as V − 1."""
    clipped = np.minimum(windows, vocab_size - 1)
    return clipped[:, :-1], clipped[:, 1:]
