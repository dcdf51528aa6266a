"""Deterministic randomness: one counter-based stream per (seed, path).

Every draw — an input, a parameter's initial value, a dropout mask, a sample — comes from
numpy's Philox generator keyed by a hash of the seed and the path of what is drawn
(`param/blocks.ff.up.w`, `input/tokens`, `dropout/<step>/<call path>/<site>`). So every
backend draws the same numbers, and drawing one value never shifts another.
"""

from __future__ import annotations

import hashlib

import numpy as np


def key(seed: int, path: str) -> int:
    """The 128-bit Philox key of the stream (seed, path)."""
    digest = hashlib.blake2b(f"presk\0{seed}\0{path}".encode(), digest_size=16).digest()
    return int.from_bytes(digest, "little")


def generator(seed: int, path: str) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(key=key(seed, path)))


def normal(seed: int, path: str, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float64 draws."""
    return generator(seed, path).standard_normal(shape)


def uniform(seed: int, path: str, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform float64 draws in [0, 1)."""
    return generator(seed, path).random(shape)


def integers(seed: int, path: str, shape: tuple[int, ...], bound: int) -> np.ndarray:
    """Uniform int64 draws in [0, bound)."""
    return generator(seed, path).integers(0, bound, size=shape, dtype=np.int64)
