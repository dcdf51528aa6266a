"""Realizations: what the machine backends are allowed to do to a program's numbers.

`--realize f64|f32|bf16` is the uniform realization; `--realize @R.json` a record:

    {"default": "f32",                                  the machine type of every kernel
     "storage": {"Block.apply/%3": "bf16"},              a kernel's type, by its site
     "accum":   {"Linear.apply/%0": "f32"},              a sum's type, by site
     "order":   {"Linear.apply/%0": "interleaved(4)"},   a contraction's order of its sum
     "envelope": {...},                                  kept for the precision work
     "params":  {"head": "bf16"},                        a parameter's type, by path
     "quant":   {"blocks.ff.up.w": {"bits": 8, "over": "Out", "scheme": "absmax"}}}

A uniform spelling means exactly the record with that default and empty maps. A site is
`"<function>/%<n>"`, the site of a kernel's launch (a fusion group's root); a path is a
parameter's dotted path. The record is checked in two steps: its shape when read,
against its schema (presk/schemas.py: E7001 for an unknown field or type, f64 in
`params`, a malformed order or quantisation; and a path both typed and quantised), and
against the program once lowered (E7001 for an unknown site or path, naming the valid
ones; E7002 for what the kernel and mlir backends cannot honour). The reference
computes at `--bits` whatever the record says, but takes the values of `params`.
`read_json` is the one reader of realization and plan files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from presk import jsontext
from presk.errors import RealizationError
from presk.fileio import read_text
from presk.kernel.machine import TYPES
from presk.schemas import REALIZATION, check

# what read_json reads: a realization or plan is a few lines, so anything past these
# bounds is a mistake, refused before it costs time or Python's stack
MAX_BYTES = 4 << 20
MAX_DEPTH = 32


@dataclass(frozen=True)
class Quant:
    bits: int  # 8 or 4
    over: str | int  # the axis the scales are constant along (a name, or a position from the end)
    scheme: str  # absmax or pow2


@dataclass(frozen=True)
class Realization:
    default: str = "f64"
    storage: dict[str, str] = field(default_factory=dict)
    accum: dict[str, str] = field(default_factory=dict)
    order: dict[str, str] = field(default_factory=dict)
    envelope: dict = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    quant: dict[str, Quant] = field(default_factory=dict)
    spelling: str = ""  # as the user wrote it: "f32", "@R.json"

    @property
    def uniform(self) -> bool:
        return not (self.storage or self.accum or self.order or self.params or self.quant)

    @property
    def label(self) -> str:
        """The realization as headers name it: a record's spelling (`@R.json`), else the
        machine type, which a plan's `realize` may have replaced."""
        return self.spelling if self.spelling.startswith("@") else self.default

    def type_at(self, site: str) -> str:
        return self.storage.get(site, self.default)


def _fail(where: str, why: str):
    raise RealizationError(f"{where}: {why}", code="E7001")


def read_json(path: str, schema: dict):
    """A JSON file's value, checked against `schema` (presk/schemas.py):
    E0002 if it cannot be read, is larger than MAX_BYTES or not UTF-8; E7001 if it is not
    JSON within jsontext's bounds (MAX_DEPTH deep) or breaks the schema."""
    text = read_text(path, MAX_BYTES)
    try:
        value = jsontext.parse(text, MAX_DEPTH)
    except ValueError as e:
        _fail(path, str(e))
    check(value, schema, path)
    return value


def read(arg: str) -> Realization:
    """`f64`, `f32`, `bf16` or `@R.json`."""

    if arg in TYPES:
        return Realization(default=arg, spelling=arg)
    if not arg.startswith("@"):
        _fail("--realize", f"{arg!r} is f64, f32, bf16 or @FILE.json")
    path = arg[1:]
    record = read_json(path, REALIZATION)
    quant = {
        p: Quant(q["bits"], q.get("over", -1), q.get("scheme", "absmax"))
        for p, q in record.get("quant", {}).items()
    }
    params = record.get("params", {})
    both = sorted(set(params) & set(quant))
    if both:
        _fail(path, f"parameter {both[0]} is both typed (params) and quantised (quant)")
    return Realization(
        record.get("default", "f64"),
        record.get("storage", {}),
        record.get("accum", {}),
        record.get("order", {}),
        record.get("envelope", {}),
        params,
        quant,
        arg,
    )


def check_paths(r: Realization, paths: list[str]) -> None:
    """Every path of `params` and `quant` one of the program's parameters (E7001)."""
    for name, mapping in (("params", r.params), ("quant", r.quant)):
        for p in mapping:
            if p not in paths:
                known = ", ".join(paths) or "none"
                _fail(f"{r.spelling}: {name}", f"unknown parameter {p!r} (parameters: {known})")


def check_sites(r: Realization, sites: list[str], backend: str) -> None:
    """Every site of `storage`, `accum` and `order` a kernel's (E7001), and what the
    machine backends cannot honour refused (E7002)."""
    for name, mapping in (("storage", r.storage), ("accum", r.accum), ("order", r.order)):
        for s in mapping:
            if s not in sites:
                shown = ", ".join(sites[:12]) + (
                    f", … ({len(sites)} in all)" if len(sites) > 12 else ""
                )
                _fail(f"{r.spelling}: {name}", f"unknown site {s!r} (sites: {shown})")
    if backend == "interp":
        return
    for s, t in r.accum.items():
        arith = {"f64": "f64", "f32": "f32", "bf16": "f32"}[r.type_at(s)]
        if t != arith:
            raise RealizationError(
                f"{r.spelling}: accum {s}: {t} accumulation in a {r.type_at(s)} kernel; the "
                f"{backend} backend sums in the storage's arithmetic type ({arith}); the "
                "reference runs it",
                code="E7002",
            )


def spellings(r: Realization, param_type) -> dict[str, str]:
    """How kernels read each realized parameter, by path: its type (`bf16`), or for
    integer weights `q8@-2` (bits, and the axis the scales are constant along, counted
    from the end)."""
    from presk.ir.types import leaves

    out = dict(r.params)
    for path, t in leaves(param_type) if r.quant else ():
        if path in r.quant:
            q = r.quant[path]
            out[path] = f"q{q.bits}@{_over(t, q.over, f'{r.spelling}: quant {path}') - t.rank}"
    return out


def parameter_values(params, r: Realization, native: bool = False):
    """The parameter tree with `params` leaves rounded to their types (a value reaches bf16
    through f32) and `quant` leaves replaced by integer weights. For the reference
    (`native` false) every such leaf is float64, integer weights their dequantised f32
    values; for the machine backends a typed leaf is a buffer of its type and an integer
    one `Quantized`, which the kernels read as they are. Leaves realized so already are
    kept, so parameters realized once (`presk bench`) cost nothing a call."""
    import numpy as np

    from presk.kernel.machine import to_storage
    from presk.prims import exact
    from presk.runtime.values import Tensor, map_leaves

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
        over = _over(t.type, q.over) - t.type.rank
        weights = Quantized(pack(ints) if q.bits == 4 else ints, scales, q.bits, over, data.shape)
        return Tensor(t.type, weights if native else np.asarray(weights).astype(np.float64))

    return map_leaves(one, params)


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
        import numpy as np

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
    import numpy as np

    if ints.shape[-1] % 2:
        ints = np.concatenate([ints, np.zeros((*ints.shape[:-1], 1), np.int8)], axis=-1)
    low, high = ints[..., 0::2], ints[..., 1::2]
    return ((low & 15) | (high.astype(np.int16) << 4)).astype(np.uint8).view(np.int8)


def unpack(packed, n: int):
    """`pack` undone: the first `n` 4-bit integers of each row, as int8."""
    import numpy as np

    low = ((packed & 15) ^ 8) - 8
    high = packed >> 4
    ints = np.stack([low, high], axis=-1).reshape(*packed.shape[:-1], -1)
    return ints[..., :n].astype(np.int8)


def _over(t, over: str | int, where: str = "quant") -> int:
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


def quantize(w, t, q: Quant):
    """(integers, f32 scales) of a weight: one scale per index of every axis but `over`,
    absmax (s = max|w| / (2^(b−1) − 1), rounded to f32) or pow2 (the power of two at or
    above it); an all-zero channel has scale 0. The integers round half to even."""
    import numpy as np

    axis = _over(t, q.over)
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
    import numpy as np

    return ints.astype(np.float32) * scales


def machine_args(args: list, program, r: Realization, entry: str | None, convert) -> list:
    """A call's arguments for a machine backend: the entry's realized parameters in their
    own types (or `Quantized`), every other leaf `convert`ed to the kernels' type."""
    from presk.runtime.values import map_leaves, map_tensors

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
