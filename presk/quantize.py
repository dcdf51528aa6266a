"""Integer weights and realized parameter values: what a realization's `params` and
`quant` (presk/realize.py) do to a program's parameters.

A quantised weight becomes `Quantized`: integers (8 or 4 bits) and f32 scales, one per
index of every axis but the one the record's `over` names, by absmax or pow2. The
reference reads the values they stand for; the machine backends read them as they are,
through kernels that dequantise at the load (presk/kernel/weights.py). A typed parameter
is rounded to its type once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from presk.errors import RealizationError
from presk.ir.types import leaves
from presk.kernel.machine import storage_of, to_storage
from presk.kernel.weights import Weights
from presk.prims import exact
from presk.realize import Quant, Realization
from presk.runtime.values import Tensor, map_leaves, map_tensors


def realized_elements(r: Realization, param_type) -> dict[str, str | Weights]:
    """How kernels read each realized parameter, by path: its type (`bf16`), or for
    integer weights their `Weights` (bits, and the axis the scales are constant along,
    counted from the end)."""
    out: dict[str, str | Weights] = dict(r.params)
    for path, t in leaves(param_type) if r.quant else ():
        if path in r.quant:
            q = r.quant[path]
            out[path] = Weights(q.bits, _over_from_end(t, q, f"{r.spelling}: quant {path}"))
    return out


def parameter_values(params, r: Realization, native: bool = False):
    """The parameter tree with `params` leaves rounded to their types (a value reaches bf16
    through f32) and `quant` leaves replaced by integer weights. For the reference
    (`native` false) every such leaf is float64, integer weights their dequantised f32
    values; for the machine backends a typed leaf is a buffer of its type and an integer
    one `Quantized`, which the kernels read as they are. Leaves realized so already are
    kept, so parameters realized once (`presk bench`) cost nothing a call."""
    if params is None or not (r.params or r.quant):
        return params

    def one(path: str, t: Tensor) -> Tensor:
        if path not in r.params and path not in r.quant:
            return t
        if native and isinstance(t.data, Quantized):
            return t
        data = np.asarray(t.data)
        data = exact.to_float64(data) if data.dtype == object else data
        if path in r.params:
            data = to_storage(data, r.params[path])  # no copy if it is of that type already
            return Tensor(t.type, data if native else data.astype(np.float64))
        data = data.astype(np.float64)
        q = r.quant[path]
        ints, scales = quantize(data, t.type, q)
        over = _over_from_end(t.type, q)
        weights = Quantized(pack(ints) if q.bits == 4 else ints, scales, q.bits, over, data.shape)
        return Tensor(t.type, weights if native else np.asarray(weights).astype(np.float64))

    return map_leaves(one, params)


def stored_parameters(params, r: Realization, machine):
    """The parameters as a machine backend's call reads them (presk/backends/schedule.py):
    typed and quantised leaves as `parameter_values` makes them, every other leaf in its
    storage type for `machine`, so a call given them again converts none (on the tiny
    MiniGPT, converting its 18 float64 parameters took a third of a forward call)."""

    def one(path: str, t: Tensor) -> Tensor:
        if path in r.params or path in r.quant:
            return t
        return Tensor(t.type, to_storage(t.data, storage_of(t.type, machine)))

    return None if params is None else map_leaves(one, parameter_values(params, r, native=True))


@dataclass(frozen=True)
class Quantized:
    """Integer weights as a tensor's data: `ints` (int8; at 4 bits two to a byte along
    the last axis, the even element in the low nibble), f32 `scales` (the weight's shape
    with the `over` axis of extent 1) and the weight's `shape`. `np.asarray` gives the
    values they stand for, so a consumer that cannot read them as they are converts them
    like any buffer; a leading axis slices off as the host's folds slice a stack."""

    ints: object
    scales: object
    bits: int
    over: int  # the axis the scales are constant along, counted from the end (negative)
    shape: tuple

    def __array__(self, dtype=None, copy=None):
        ints = unpack(self.ints, self.shape[-1]) if self.bits == 4 else self.ints
        values = dequantize(ints, self.scales)
        return values if dtype is None else np.asarray(values, dtype=dtype)

    def __getitem__(self, layer: int) -> Quantized:
        if self.over == -len(self.shape):
            raise RealizationError("quant over a stack's layer axis", code="E7001")
        return Quantized(self.ints[layer], self.scales[layer], self.bits, self.over, self.shape[1:])


def pack(ints):
    """4-bit integers (int8 in −7..7) two to a byte along the last axis, the even element
    in the low nibble; an odd last extent gets a zero high nibble."""
    if ints.shape[-1] % 2:
        ints = np.concatenate([ints, np.zeros((*ints.shape[:-1], 1), np.int8)], axis=-1)
    low, high = ints[..., 0::2], ints[..., 1::2]
    return ((low & 15) | (high.astype(np.int16) << 4)).astype(np.uint8).view(np.int8)


def unpack(packed, n: int):
    """`pack` undone: the first `n` 4-bit integers of each row, as int8."""
    low = ((packed & 15) ^ 8) - 8
    high = packed >> 4
    ints = np.stack([low, high], axis=-1).reshape(*packed.shape[:-1], -1)
    return ints[..., :n].astype(np.int8)


def axis_position(t, over: str | int, where: str = "quant") -> int:
    """The position of the axis `over` names in `t` (E7001 if it has none)."""
    if isinstance(over, str):
        if over not in t.names:
            named = ", ".join(n for n in t.names if n) or "none"
            raise RealizationError(
                f"{where}: over {over!r}: {t.text()} has no axis of that name (named: {named})",
                code="E7001",
            )
        return t.names.index(over)
    if not -t.rank <= over < t.rank:
        raise RealizationError(f"{where}: over {over}: {t.text()} has {t.rank} axes", code="E7001")
    return over % t.rank


def _over_from_end(t, q: Quant, where: str = "quant") -> int:
    """The axis of `t` a quantisation's scales are constant along, counted from the end."""
    return axis_position(t, q.over, where) - t.rank


def quantize(w, t, q: Quant):
    """(integers, f32 scales) of a weight: one scale per index of every axis but `over`,
    absmax (s = max|w| / (2^(b−1) − 1), rounded to f32) or pow2 (the power of two at or
    above it); an all-zero channel has scale 0. The integers round half to even."""
    axis = axis_position(t, q.over)
    top = 2 ** (q.bits - 1) - 1
    peak = np.max(np.abs(w), axis=axis, keepdims=True)
    s = (peak / top).astype(np.float32)
    if q.scheme == "pow2":
        with np.errstate(divide="ignore"):
            s = np.where(s > 0, np.exp2(np.ceil(np.log2(s.astype(np.float64)))), 0).astype(
                np.float32
            )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(s > 0, w / s.astype(np.float64), 0)
    ints = np.clip(np.rint(ratio), -top, top).astype(np.int8)
    return ints, s


def dequantize(ints, scales):
    """f32(q) · s, rounded to f32: the values integer weights stand for."""
    return ints.astype(np.float32) * scales


def machine_args(args: list, program, r: Realization, entry: str | None, convert) -> list:
    """A call's arguments for a machine backend: the entry's realized parameters in their
    own types (or `Quantized`), every other leaf `convert`ed to the kernels' type."""
    realized = realized_args(args, program, r, entry, native=True)
    if realized is args:
        return [map_tensors(convert, a) for a in args]

    def own(path, t):
        return t if path in r.params or path in r.quant else convert(t)

    return [map_leaves(own, realized[0]), *[map_tensors(convert, a) for a in realized[1:]]]


def takes_parameters(program, entry: str | None) -> bool:
    """Whether a call of `entry` (None: the program's) takes the entry module's parameter
    record as its first argument: the one a realization's `params` and `quant` name."""
    return (not entry or entry == program.entry) and "psk.module" in program.attrs


def realized_args(
    args: list, program, r: Realization, entry: str | None, native: bool = False
) -> list:
    """A call's arguments with the entry's parameter record (its first) realized."""
    if not (args and takes_parameters(program, entry)):
        return args
    return [parameter_values(args[0], r, native), *args[1:]]
