"""Token windows from text: the texts' tokens (presk/train/tokenizer.py: bytes ranked by
frequency, or a byte-level BPE), windows of T + 1 tokens, a 90/10 split, and a batch order
fixed by the seed.

Windows are consecutive runs of T + 1 tokens of the concatenated texts, taken every T
tokens (each window's last token is the next one's first); the first 90 % are for
training, the rest for validation. An epoch visits the training windows in an order drawn
from the seed; a step takes the next B of them (a last partial batch is skipped).
Validation reads the validation windows in order, in whole batches of B. A model of V
tokens reads every token from V − 1 on as token V − 1 (with bytes ranked by frequency: the
V − 1 most frequent bytes as themselves, the others as one).
"""

from __future__ import annotations

import os
import reprlib
import stat
from dataclasses import dataclass

import numpy as np

from presk.errors import FileFormatError, UsageError
from presk.runtime import pskd, rng
from presk.train.tokenizer import Tokenizer, bytes_by_frequency, from_meta, to_meta, train_bpe


def build(paths: list[str], window: int, bpe: int | None = None) -> pskd.Container:
    """The data file for these texts at window length `window` (T), their tokens the
    bytes ranked by frequency, or with `bpe` a byte-level BPE of that many tokens learnt
    from them."""
    if window < 1:
        raise UsageError(f"--window {window}: a window needs at least one token")
    texts = [_read_text(p) for p in paths]
    joined = b"\n".join(texts)
    raw = np.frombuffer(joined, dtype=np.uint8)
    tok = bytes_by_frequency(raw) if bpe is None else train_bpe(texts, bpe)
    tokens = tok.encode(joined).astype(np.uint8 if tok.size <= 256 else np.uint16)
    n = (len(tokens) - 1) // window
    if n < 2:
        raise UsageError(f"the texts give {n} window(s) of {window + 1} tokens: need at least 2")
    starts = np.arange(n) * window
    windows = tokens[starts[:, None] + np.arange(window + 1)[None, :]]
    n_train = max(1, (n * 9) // 10)
    meta = {
        **to_meta(tok),
        "window": window,
        "sources": [os.path.basename(p) for p in paths],
        "bytes": int(len(raw)),
    }
    return pskd.Container("data", meta, {"train": windows[:n_train], "val": windows[n_train:]})


def _read_text(path: str) -> bytes:
    """A text's bytes; only a regular file, so a device or FIFO is not read forever."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise UsageError(f"cannot read {path}: not a regular file", code="E0002")
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}", code="E0002") from None


@dataclass
class Windows:
    path: str
    window: int
    train: np.ndarray
    val: np.ndarray
    tokenizer: Tokenizer

    @classmethod
    def load(cls, path: str) -> Windows:
        """The windows of the data file at `path`, refused (E9007) unless they are what
        `build` writes: rows of T + 1 tokens of its tokenizer."""
        c = pskd.read(path)
        if c.kind != "data" or "train" not in c.arrays:
            raise FileFormatError(f"{path}: not a token-window data file", code="E9007")
        tok = from_meta(c.meta, path, "E9007")
        window = c.meta.get("window")
        if type(window) is not int or window < 1:
            why = f"its window {reprlib.repr(window)} is not a whole number of tokens (at least 1)"
            raise FileFormatError(f"{path}: {why}", code="E9007")
        why = _windows_error(c.arrays, window, tok.size)
        if why:
            raise FileFormatError(f"{path}: {why}", code="E9007")
        train = c.arrays["train"]
        return cls(path, window, train, c.arrays.get("val", train[:0]), tok)

    def batches_per_epoch(self, batch: int) -> int:
        return len(self.train) // batch

    def batch(self, step: int, batch: int, seed: int) -> tuple[np.ndarray, int]:
        """The windows of step `step` (from 1) and its epoch (from 1)."""
        per = self.batches_per_epoch(batch)
        k = step - 1
        epoch, j = divmod(k, per)
        order = rng.generator(seed, f"data/epoch{epoch}").permutation(len(self.train))
        return self.train[order[j * batch : (j + 1) * batch]].astype(np.int64), epoch + 1

    def validation_batches(self, batch: int) -> int:
        """The whole batches of `batch` windows the validation windows fill."""
        return len(self.val) // batch

    def validation_left_out(self, batch: int) -> int:
        """The validation windows after the last whole batch: a partial batch, not read."""
        return len(self.val) % batch

    def validation(self, batch: int, count: int | None = None):
        """The validation windows in order, in the first `count` (default: all) whole
        batches of `batch`; a last partial batch is left out."""
        n = self.validation_batches(batch) if count is None else count
        for i in range(n):
            yield self.val[i * batch : (i + 1) * batch].astype(np.int64)


def _windows_error(arrays: dict[str, np.ndarray], window: int, tokens: int) -> str | None:
    """Why `train` or `val` is not windows: a 2-D integer array, each row T + 1 of the
    tokenizer's `tokens` tokens."""
    for name in ("train", "val"):
        a = arrays.get(name)
        if a is None:
            continue
        if a.dtype.kind not in "iu" or a.ndim != 2:
            return f"{name} is {a.ndim}-D {pskd.dtype_name(a)}; windows are a 2-D integer array"
        if a.shape[1] != window + 1:
            return f"{name} has rows of {a.shape[1]} tokens, a window of {window} has {window + 1}"
        if a.size and (a.min() < 0 or a.max() >= tokens):
            return f"{name} holds tokens outside 0..{tokens - 1}, those of its tokenizer"
    return None


def next_token_pair(windows: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, targets): each window without its last token, and without its first,
    tokens of rank V − 1 and above read as V − 1."""
    clipped = np.minimum(windows, vocab_size - 1)
    return clipped[:, :-1], clipped[:, 1:]
