"""The values a run starts from: parameters from their initializers, inputs drawn.

Every backend starts from these float64 (int64, bool) buffers, so a machine run and the
reference run see the same numbers. A parameter `normal(scale = s)` is z · s with z a
standard normal float64 draw keyed by its path and s rounded once to float64 from its
exact value; `uniform(scale = a)` is (2u − 1) · a with u uniform in [0, 1).
"""

from __future__ import annotations

import gmpy2
import numpy as np

from presk.constants import const_value
from presk.core.program import Function, HostProgram
from presk.errors import BindingError
from presk.ir.types import PskType, TensorType
from presk.runtime import rng
from presk.runtime.values import Tensor, Value, build


def eval_const(text: str) -> float:
    """An initializer argument (`1 / sqrt(3)`), evaluated exactly and rounded to float64."""
    with gmpy2.context(precision=256):
        return float(const_value(text))


def _init_leaf(spec: dict, t: TensorType, seed: int) -> np.ndarray:
    kind, path = spec["init"], spec["path"]
    if kind == "zeros":
        return np.zeros(t.shape)
    if kind == "ones":
        return np.ones(t.shape)
    scale = eval_const(spec["scale"])
    if kind == "normal":
        return rng.normal(seed, f"param/{path}", t.shape) * scale
    if kind == "uniform":
        return (2 * rng.uniform(seed, f"param/{path}", t.shape) - 1) * scale
    raise ValueError(f"unknown initializer {kind}")


def init_params(param_type: PskType, specs: list[dict], seed: int) -> Value:
    """The parameter record at its initial values."""
    by_path = {s["path"]: s for s in specs}
    return build(param_type, lambda path, t: Tensor(t, _init_leaf(by_path[path], t, seed)))


def synth_input(name: str, t: PskType, bound: int | None, seed: int) -> Value:
    """An entry argument drawn from the seed: reals standard normal, indices uniform
    below their bound, masks fair coins."""

    def make(path: str, leaf: TensorType) -> Tensor:
        key = f"input/{path}"
        if leaf.kind == "real":
            return Tensor(leaf, rng.normal(seed, key, leaf.shape))
        if leaf.kind == "bool":
            return Tensor(leaf, rng.uniform(seed, key, leaf.shape) < 0.5)
        if bound is None:
            raise BindingError(
                f"argument {name} : {leaf.text()} has no bound to draw it from: "
                f"declare it nat{{V}}[...] or give it with --inputs",
                code="E3010",
            )
        return Tensor(leaf, rng.integers(seed, key, leaf.shape, bound))

    return build(t, make, name)


def entry_arguments(program: HostProgram, fn: Function) -> list[tuple[str, PskType]]:
    """The entry's arguments a caller gives (its parameter record excluded)."""
    pairs = list(zip(fn.arg_names, fn.arg_types, strict=True))
    return pairs[1:] if "psk.module" in program.attrs else pairs


def synth_inputs(program: HostProgram, seed: int) -> dict[str, Value]:
    fn = program.entry_function
    bounds = program.attrs.get("psk.bounds", {})
    return {n: synth_input(n, t, bounds.get(n), seed) for n, t in entry_arguments(program, fn)}
