"""Integer weights as rungs of `presk solve` (docs/precision.md, section 8).

A rung is a float type (`f64`, `f32`, `bf16`) or an integer one: `int8`, `int4`, each
under absmax scales or, spelled `int8/pow2` and `int4/pow2`, power-of-two ones. Integers
are a storage type of parameters (presk/quantize.py): a nest reads f32(q·s) and
computes in its own type. The scales are constant along one axis, the one every reader
of the parameter contracts (the last of a `·`'s left operand, the first of its right
one, the one label of an `ein` operand its output does not keep), else −2; a rung's
bytes count its integers (two 4-bit ones to a byte, as packed) and one f32 scale per
index of the other axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from mlir import ir

from presk.api import Core
from presk.errors import UsageError
from presk.ir.ops import psk_type, site_of, walk_ops
from presk.kernel.machine import MACHINES, TYPES
from presk.precision.sensitivity import parameter_declarations
from presk.quantize import dequantize, quantize
from presk.reach import parameter_elements
from presk.realize import Quant

FLOATS = TYPES  # the float ladder, widest first (offers.RUNGS): the machine types
INTEGER_RUNGS = ("int8", "int8/pow2", "int4", "int4/pow2")  # widest first
MENU = (*FLOATS, "int8", "int4")  # what --menu names; each integer under both schemes
SCHEMES = ("absmax", "pow2")
DEFAULT_AXIS = -2  # where the readers agree on no axis, as `--quant` scales every matrix
SCALE_BYTES = MACHINES["f32"].bytes  # an f32 scale


def is_integer(rung: str) -> bool:
    return rung in INTEGER_RUNGS


def rung_name(bits: int, scheme: str) -> str:
    """`int8`, `int4/pow2`: a quantisation's rung."""
    return f"int{bits}" + ("/pow2" if scheme == "pow2" else "")


def quant_of(rung: str, over: int) -> Quant:
    """The realization's quantisation for an integer rung, scaled along `over`."""
    bits, _, scheme = rung.removeprefix("int").partition("/")
    return Quant(int(bits), over, scheme or "absmax")


def parse_menu(text: str) -> tuple[str, ...]:
    """`--menu f64,f32,bf16,int8,int4`: the rungs named, widest first (E0001 for an unknown
    or repeated one, or a menu without f64 and f32, where the solve starts and rule 2
    looks)."""
    names = [n.strip() for n in text.split(",")]
    for n in names:
        if n not in MENU:
            raise UsageError(f"--menu: {n!r} is not a rung (rungs: {', '.join(MENU)})")
    if len(set(names)) != len(names):
        raise UsageError(f"--menu {text}: a rung named twice")
    if not {"f64", "f32"} <= set(names):
        raise UsageError(f"--menu {text}: the menu needs f64 and f32 (the solve starts at f64)")
    return tuple(n for n in MENU if n in names)


def declared_ranks(core: Core) -> dict[str, int]:
    """Each parameter path's rank as its module declares it (a stack's axis left off)."""
    return {path: len(d.type.axes) for path, d in parameter_declarations(core).items()}


def scale_axes(core: Core, paths: list[str]) -> dict[str, int]:
    """By path, the axis (from the end) every compute op reading the parameter contracts,
    through fields, calls and folds (`reach.parameter_elements`); −2 where one reads it
    otherwise (a gather, an elementwise op) or two contract different axes."""
    spelled = parameter_elements(core.module.operation, {p: p for p in paths})
    axes: dict[str, set[int | None]] = {}
    for op in walk_ops(core.module.operation):
        if site_of(op) is None:
            continue
        for i, v in enumerate(op.operands):
            if v in spelled:
                axes.setdefault(spelled[v], set()).add(_contracted(op, i))
    out = {}
    for p in paths:
        found = axes.get(p, set())
        out[p] = found.pop() if len(found) == 1 and None not in found else DEFAULT_AXIS
    return out


def _contracted(op: ir.Operation, i: int) -> int | None:
    """The axis, from the end, operand `i` of `op` is summed over; None if not one."""
    rank = psk_type(op.operands[i]).rank
    if op.name in ("psk.dot", "psk.matmul"):
        return -1 if i == 0 else (-rank if op.name == "psk.dot" else -2)
    if op.name == "psk.ein":
        kept = {ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["axes"])}
        summed = [j for j, n in enumerate(psk_type(op.operands[i]).names) if n not in kept]
        return summed[0] - rank if len(summed) == 1 else None
    return None


def stored(w: np.ndarray, t, rung: str, over: int) -> np.ndarray:
    """The values `w` (float64, of type `t`) stand for at an integer rung: f32(q·s)."""
    ints, scales = quantize(w, t, quant_of(rung, over))
    return dequantize(ints, scales).astype(np.float64)


def move(w: np.ndarray, t, rung: str, over: int) -> np.ndarray:
    """δ = ŵ − w, exact in float64: |q| ≥ 1 puts ŵ within a factor of two of w (Sterbenz),
    and q = 0 gives −w."""
    return stored(w, t, rung, over) - w


@dataclass(frozen=True)
class Moved:
    """What storing a parameter at an integer rung moves the output by, to first order:
    Σ g·δ, g its gradient and δ its move."""

    bound: float  # Σ|g|·|δ|
    signed: float  # Σ g·δ
    squares: float  # Σ(g·δ)²

    @property
    def rss(self) -> float:
        """√Σ(g·δ)²: the elements' moves taken as independent, so that they may cancel as
        independent ones do, but never all at once because their signs happen to."""
        return math.sqrt(self.squares)


def first_order(g: np.ndarray, w: np.ndarray, t, rung: str, over: int) -> Moved:
    """The first-order move of a parameter `w` (of type `t`, gradient `g`) at `rung`."""
    gd = g * move(w, t, rung, over)
    return Moved(float(np.sum(np.abs(gd))), float(np.sum(gd)), float(np.sum(gd * gd)))


def integer_bytes(shape: tuple[int, ...], rung: str, over: int) -> int:
    """The integers (at 4 bits two to a byte along the last axis) and the f32 scales."""
    bits = quant_of(rung, over).bits
    rows = math.prod(shape[:-1])
    ints = rows * shape[-1] if bits == 8 else rows * -(-shape[-1] // 2)
    return ints + SCALE_BYTES * math.prod(shape) // shape[over]
