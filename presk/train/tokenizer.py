"""Tokenizers: text to tokens and each token back to its bytes, and their record in the
meta of a data file and of a checkpoint, so a model keeps the vocabulary it was trained
on (docs/training.md, "Data").

Two kinds. `bytes-by-frequency` (the default) ranks the 256 byte values by how often they
occur in the corpus, ties by value: a token is its byte's rank. `bpe` is a byte-level BPE
trained by Hugging Face `tokenizers` on the corpus (GPT-2's scheme: the 256 bytes are
tokens, and merges of frequent pairs the others), so every text, UTF-8 or not, has tokens
and every token stands for whole bytes. A meta records a tokenizer in two keys: `tokenizer`
(the kind) and `vocab` (the byte values by rank; for `bpe`, the `tokenizers` library's own
JSON of it). A recorded tokenizer is checked before it is used (`from_meta`).

A model of V tokens reads them through a `Vocabulary`: when V is less than the tokenizer's
tokens, token V − 1 stands for all the others (the rarer bytes, when they are ranked).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from presk.errors import BindingError, FileFormatError, UsageError
from presk.jsontext import first_violation
from presk.runtime import params_file, pskd

BYTES = "bytes-by-frequency"
BPE = "bpe"
KINDS = (BYTES, BPE)
MAX_TOKENS = 1 << 16  # windows of BPE tokens are stored as uint16
REPLACEMENT = "\ufffd".encode()  # what a token standing for no bytes of its own decodes to


def _byte_chars() -> list[str]:
    """The character byte-level BPE writes each byte value as (GPT-2's table): the
    printable Latin-1 characters as themselves, the 68 others from U+0100 on in order."""
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    chars, shifted = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(0x100 + shifted))
            shifted += 1
    return chars


BYTE_CHARS = _byte_chars()
CHAR_BYTES = {c: b for b, c in enumerate(BYTE_CHARS)}
_ESCAPED = re.compile("[\udc80-\udcff]+")  # the bytes of a text that are not UTF-8


@dataclass(frozen=True)
class ByteTokenizer:
    """A byte's token is its rank in `order`, the byte values most frequent first."""

    order: tuple[int, ...]
    kind = BYTES

    @property
    def size(self) -> int:
        return 256

    def encode(self, text: bytes) -> np.ndarray:
        rank = np.empty(256, dtype=np.int64)
        rank[list(self.order)] = np.arange(256)
        return rank[np.frombuffer(text, dtype=np.uint8)]

    def token_bytes(self, token: int) -> bytes:
        return bytes([self.order[token]])

    def vocab(self) -> list[int]:
        return list(self.order)

    def describe(self) -> str:
        return "the 256 bytes ranked by frequency"


@dataclass(frozen=True)
class BpeTokenizer:
    """A byte-level BPE: `record` is the `tokenizers` library's JSON of it, already
    checked (`_bpe_problem`), `text` that JSON in one canonical spelling (what two
    tokenizers are compared by)."""

    record: dict = field(compare=False, hash=False)
    text: str
    kind = BPE

    @classmethod
    def of(cls, record: dict) -> BpeTokenizer:
        return cls(record, json.dumps(record, sort_keys=True, separators=(",", ":")))

    @cached_property
    def library(self) -> HFTokenizer:
        return HFTokenizer.from_str(self.text)

    @property
    def size(self) -> int:
        return len(self.record["model"]["vocab"])

    def encode(self, text: bytes) -> np.ndarray:
        """The tokens of `text`: its UTF-8 runs as the library encodes them, and each
        byte that is not UTF-8 as that byte's own token."""
        library, vocab = self.library, self.record["model"]["vocab"]
        decoded, tokens, at = text.decode("utf-8", errors="surrogateescape"), [], 0
        for m in [*_ESCAPED.finditer(decoded), None]:
            end = len(decoded) if m is None else m.start()
            if end > at:
                tokens += library.encode(decoded[at:end], add_special_tokens=False).ids
            if m is not None:
                tokens += [vocab[BYTE_CHARS[ord(c) - 0xDC00]] for c in m.group()]
                at = m.end()
        return np.array(tokens, dtype=np.int64)

    def token_bytes(self, token: int) -> bytes:
        return self._bytes[token]

    @cached_property
    def _bytes(self) -> list[bytes]:
        return _token_bytes(self.record["model"]["vocab"])

    def vocab(self) -> dict:
        return self.record

    def describe(self) -> str:
        return f"a byte-level BPE of {self.size} tokens"


Tokenizer = ByteTokenizer | BpeTokenizer


def _token_bytes(vocab: dict[str, int]) -> list[bytes]:
    """Each token's bytes, by token, from a byte-level BPE's {token text: token}."""
    table = [b""] * len(vocab)
    for text, token in vocab.items():
        table[token] = bytes(CHAR_BYTES[c] for c in text)
    return table


def bytes_by_frequency(raw: np.ndarray) -> ByteTokenizer:
    """The byte tokenizer of a corpus (its bytes as uint8): the byte values by count,
    ties by value."""
    counts = np.bincount(raw, minlength=256)
    return ByteTokenizer(tuple(sorted(range(256), key=lambda b: (-counts[b], b))))


def train_bpe(texts: list[bytes], size: int) -> BpeTokenizer:
    """A byte-level BPE of at most `size` tokens (fewer if the texts run out of pairs to
    merge) learnt from `texts`, whose bytes that are not UTF-8 take no part in a merge."""
    if not 256 <= size <= MAX_TOKENS:
        raise UsageError(
            f"--vocab {size}: a byte-level BPE has the 256 bytes among its tokens and at "
            f"most {MAX_TOKENS}: give 256 to {MAX_TOKENS}"
        )
    library = HFTokenizer(models.BPE())
    library.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    library.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    runs = [
        run
        for text in texts
        for run in _ESCAPED.split(text.decode("utf-8", errors="surrogateescape"))
        if run
    ]
    library.train_from_iterator(runs, trainer)
    return BpeTokenizer.of(json.loads(library.to_str()))


# What presk relies on in a byte-level BPE's JSON, as `train_bpe` writes it: a BPE model
# over tokens numbered from 0, the ByteLevel pre-tokenizer adding no space, and nothing
# that makes a text's tokens other than its bytes' (a normalizer, added tokens, a prefix
# or suffix on tokens, an unknown or fallback token, truncation, padding, special tokens
# added, random dropout); the library checks the rest when it reads it.
_UNSET_IN_MODEL = ("dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix")
BPE_SCHEMA = {
    "type": "object",
    "required": ["model", "pre_tokenizer", "normalizer", "added_tokens"],
    "properties": {
        "model": {
            "type": "object",
            "required": ["type", "vocab", "merges"],
            "properties": {
                "type": {"const": "BPE"},
                **{k: {"const": None} for k in _UNSET_IN_MODEL},
                "byte_fallback": {"const": False},
                "vocab": {
                    "type": "object",
                    "minProperties": 1,
                    "maxProperties": MAX_TOKENS,
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
                "merges": {"type": "array"},
            },
        },
        "pre_tokenizer": {
            "type": "object",
            "required": ["type", "add_prefix_space"],
            "properties": {"type": {"const": "ByteLevel"}, "add_prefix_space": {"const": False}},
        },
        **{k: {"const": None} for k in ("normalizer", "truncation", "padding", "post_processor")},
        "added_tokens": {"type": "array", "maxItems": 0},
    },
}


def _bpe_problem(record: object) -> str | None:
    """Why `record` is not the JSON of a byte-level BPE presk can read, or None."""
    error = first_violation(record, BPE_SCHEMA)
    if error is not None:
        where = "".join(f"[{p!r}]" for p in error.absolute_path)
        return f"vocab{where}: {error.message}"
    vocab = record["model"]["vocab"]
    if sorted(vocab.values()) != list(range(len(vocab))):
        return "vocab['model']['vocab'] does not number its tokens 0, 1, 2, …"
    strays = [t for t in vocab if any(c not in CHAR_BYTES for c in t)]
    if strays:
        return f"vocab['model']['vocab'] has the token {strays[0]!r}, which is not of bytes"
    try:
        HFTokenizer.from_str(json.dumps(record))
    except BaseException as e:  # a bare Exception saying what it expected, or a panic
        if not isinstance(e, Exception) and type(e).__name__ != "PanicException":
            raise
        return f"vocab is not a tokenizer the tokenizers library reads: {e}"
    return None


def from_meta(meta: dict, path: str, code: str) -> Tokenizer:
    """The tokenizer a meta records (its `tokenizer` and `vocab`), refused with `code`
    unless it is one of the kinds above, whole."""
    kind, vocab = meta.get("tokenizer"), meta.get("vocab")
    if kind == BYTES:
        ok = (
            isinstance(vocab, list)
            and all(type(b) is int for b in vocab)
            and sorted(vocab) == list(range(256))
        )
        if not ok:
            raise FileFormatError(
                f"{path}: its vocab is not an order of the 256 byte values", code=code
            )
        return ByteTokenizer(tuple(vocab))
    if kind == BPE:
        why = _bpe_problem(vocab)
        if why is not None:
            raise FileFormatError(f"{path}: its byte-level BPE: {why}", code=code)
        return BpeTokenizer.of(vocab)
    raise FileFormatError(
        f"{path}: its tokenizer {kind!r} is none of {', '.join(KINDS)}", code=code
    )


def to_meta(tokenizer: Tokenizer) -> dict:
    """The two keys of a meta that record `tokenizer`."""
    return {"tokenizer": tokenizer.kind, "vocab": tokenizer.vocab()}


def recorded(meta: dict | None, path: str) -> Tokenizer | None:
    """The tokenizer a checkpoint's meta records (E9002 if damaged); None for a
    parameters file (`meta` None) or a checkpoint written before tokenizers were
    recorded, or of a run without data."""
    if meta is None or "tokenizer" not in meta:
        return None
    return from_meta(meta, f"{path}: header.json: meta", "E9002")


def checkpoint_meta(path: str) -> dict | None:
    """The meta of the checkpoint at `path`; None for a parameters file, which has none."""
    if params_file.is_params_file(path):
        return None
    return pskd.read(path).meta


def check_same(trained: Tokenizer | None, checkpoint: str, given: Tokenizer, data: str) -> None:
    """Refuse (E3015) a data file whose tokenizer is not the one the checkpoint records:
    its tokens would be read, or a generation's decoded, as other text."""
    if trained is None or given == trained:
        return
    given_words, trained_words = given.describe(), trained.describe()
    if given_words == trained_words:
        given_words += ", another vocabulary"
    raise BindingError(
        f"--data {data} has another tokenizer ({given_words}) than {checkpoint} was "
        f"trained with ({trained_words}): its tokens would stand for other text",
        code="E3015",
    )


@dataclass(frozen=True)
class Vocabulary:
    """A tokenizer cut to a model's V tokens: when V is less than the tokenizer's, token
    V − 1 stands for every token from V − 1 on."""

    tokenizer: Tokenizer
    size: int  # V

    def encode(self, text: bytes) -> list[int]:
        """The tokens of `text`, a token past the model's read as token V − 1."""
        return np.minimum(self.tokenizer.encode(text), self.size - 1).tolist()

    def decode(self, token: int) -> bytes:
        """The bytes a token stands for; REPLACEMENT for the catch-all token V − 1 (when
        V is less than the tokenizer's tokens) and for a token past the tokenizer's."""
        n = self.tokenizer.size
        catch_all = token == self.size - 1 and self.size < n
        return REPLACEMENT if catch_all or token >= n else self.tokenizer.token_bytes(token)

    def table(self) -> list[bytes]:
        """What each of the V tokens decodes to."""
        return [self.decode(t) for t in range(self.size)]
