"""Realizations: what the machine backends are allowed to do to a program's numbers.

`--realize f64|f32|bf16` is the uniform realization; `--realize @R.json` a record:

    {"default": "f32",                                  the machine type of every kernel
     "storage": {"Block.apply/%3": "bf16"},              a kernel's type, by its site
     "accum":   {"Linear.apply/%0": "f32"},              a sum's type, by site
     "order":   {"Linear.apply/%0": "interleaved(4)"},   a contraction's order of its sum
     "contract": "fma",                                  a contraction's a·b + acc fused
     "functions": "libm",                                the C library's exp, erf, tanh
     "envelope": {...},                                  kept for the precision work
     "params":  {"head": "bf16"},                        a parameter's type, by path
     "quant":   {"blocks.ff.up.w": {"bits": 8, "over": "Out", "scheme": "absmax"}}}

A uniform spelling means exactly the record with that default and empty maps. A site is
`"<function>/%<n>"`, the site of a kernel's launch (a fusion group's root); a path is a
parameter's dotted path. The record is checked in two steps: its shape when read,
against its schema (presk/schemas.py: E7001 for an unknown field or type, f64 in
`params`, a malformed order, contraction or quantisation; and a path both typed and
quantised), and
against the program once lowered (E7001 for an unknown site or path, naming the valid
ones; E7002 for what the kernel and mlir backends cannot honour). The reference
computes at `--bits` whatever the record says, but takes the values of `params`.
`read_json` is the one reader of realization and plan files. What `params` and `quant`
do to parameter values (integer weights, rounding) is presk/quantize.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from presk import jsontext
from presk.errors import RealizationError
from presk.fileio import PSKD_HEADER_BYTES, PSKD_HEADER_DEPTH, read_text
from presk.kernel.machine import MACHINES, TYPES
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
    # "fma" or "none" by site, "default" for every contraction no other key names
    contract: dict[str, str] = field(default_factory=dict)
    # whose exp, erf and tanh the f32 and bf16 kernels compute: presk's own (presk/kernel/
    # functions.py), the same bits on every machine and in vector lanes, or the C library's
    functions: str = "presk"

    @property
    def uniform(self) -> bool:
        return not (
            self.storage
            or self.accum
            or self.order
            or self.params
            or self.quant
            or self.contract
            or self.functions != "presk"
        )

    @property
    def label(self) -> str:
        """The realization as headers name it: a record's spelling (`@R.json`), else the
        machine type, which a plan's `realize` may have replaced."""
        return self.spelling if self.spelling.startswith("@") else self.default

    def type_at(self, site: str) -> str:
        return self.storage.get(site, self.default)

    @property
    def contract_sites(self) -> dict[str, str]:
        """`contract` without its "default": the sites it names."""
        return {s: c for s, c in self.contract.items() if s != "default"}


def _fail(where: str, why: str):
    raise RealizationError(f"{where}: {why}", code="E7001")


def read_json(
    path: str, schema: dict, code: str = "E7001", most: int = MAX_BYTES, depth: int = MAX_DEPTH
):
    """A JSON file's value, checked against `schema` (presk/schemas.py): E0002 if it cannot
    be read, is larger than `most` bytes or not UTF-8; `code` (E7001 for realizations and
    plans) if it is not JSON within jsontext's bounds (`depth` deep) or breaks the schema.
    The one reader of the JSON files presk takes: realizations, plans, envelopes, profiles."""
    text = read_text(path, most)
    try:
        value = jsontext.parse(text, depth)
    except ValueError as e:
        raise RealizationError(f"{path}: {e}", code=code) from None
    check(value, schema, path, code=code)
    return value


# What `read` takes from a checkpoint's header.json: the realization its run recorded.
_RECORDED = {
    "type": "object",
    "properties": {"meta": {"type": "object", "properties": {"realize": REALIZATION}}},
    "required": ["meta"],
}


def read(arg: str, given_as: str = "--realize") -> Realization:
    """`f64`, `f32`, `bf16` or `@R.json`, given as a flag or an argument (`given_as`)."""

    if arg in TYPES:
        return Realization(default=arg, spelling=arg)
    if not arg.startswith("@"):
        _fail(given_as, f"{arg!r} is f64, f32, bf16 or @FILE.json")
    path = arg[1:]
    if path.endswith(".psk.d"):  # a checkpoint: the realization its run recorded
        header = os.path.join(path, "header.json")
        meta = read_json(header, _RECORDED, "E9002", PSKD_HEADER_BYTES, PSKD_HEADER_DEPTH)
        record = meta["meta"].get("realize", {})
        # recorded before presk's own became the default, a run computed the C library's
        record = {"functions": "libm"} | record
    else:
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
        _contract(record.get("contract", {})),
        record.get("functions", "presk"),
    )


def _contract(value) -> dict[str, str]:
    """`contract` as a map: `"fma"` (or `"none"`) is `{"default": "fma"}`."""
    return {"default": value} if isinstance(value, str) else value


def check_paths(r: Realization, paths: list[str]) -> None:
    """Every path of `params` and `quant` one of the program's parameters (E7001)."""
    for name, mapping in (("params", r.params), ("quant", r.quant)):
        for p in mapping:
            if p not in paths:
                known = ", ".join(paths) or "none"
                _fail(f"{r.spelling}: {name}", f"unknown parameter {p!r} (parameters: {known})")


def check_sites(r: Realization, sites: list[str]) -> None:
    """Every site of `storage`, `accum`, `order` and `contract` a kernel's (E7001), and
    what the machine backends cannot honour refused (E7002)."""
    named = (
        ("storage", r.storage),
        ("accum", r.accum),
        ("order", r.order),
        ("contract", r.contract_sites),
    )
    for name, mapping in named:
        for s in mapping:
            if s not in sites:
                shown = ", ".join(sites[:12]) + (
                    f", … ({len(sites)} in all)" if len(sites) > 12 else ""
                )
                _fail(f"{r.spelling}: {name}", f"unknown site {s!r} (sites: {shown})")
    for s, t in r.accum.items():
        arith = MACHINES[r.type_at(s)].arith_name
        if t != arith:
            raise RealizationError(
                f"{r.spelling}: accum {s}: {t} accumulation in a {r.type_at(s)} kernel; the "
                f"kernels sum in the storage's arithmetic type ({arith}); the reference runs it",
                code="E7002",
            )
