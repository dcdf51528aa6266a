"""The magnitude envelope: what `presk calibrate --precision` measured, site by site.

An envelope is a property of the samples it was measured on, not of the program: every
bound computed from it holds over those samples only, and says so. Each number is an
upper bound, the exact MPFR value rounded up to float64 (written with `repr`, so it
reads back to the same bits; a bound past float64, or a rounding that overflows its type,
is the string "inf"). Samples merge by max, which does not depend on how they were
spread over processes or machines.

At a sum (`sum`, `mean`, `sum_to`) or a contraction (`dot`, `matmul`, `ein` and dot's
derivatives) the terms of an output element are xᵢwᵢ (a plain sum's xᵢ, a mean's xᵢ/k),
and `SumStats` keeps what they add up to without cancelling. The factors are per summed
operand: a contraction's two, a sum's one.

A site also records the machine types every one of its sampled values is exact in
(`exact`: an integer-valued mask, a constant such as 16): storing such a value rounds it
by at most the error it already carries, which the bound charges instead of a rounding
(presk/precision/bound.py).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from presk import backends
from presk.api import Core, Program
from presk.errors import RealizationError
from presk.fileio import write_atomic
from presk.front.prelude import FILE as PRELUDE
from presk.realize import read_json

TYPES = ("f32", "bf16")  # the narrower types whose rounding an envelope records
EXACT_TYPES = ("f64", *TYPES)  # the types a site may be exact in, widest first
GRAINS = ("site", "row", "channel")
MAX_BYTES = 256 << 20  # a grain of rows keeps a number a row: a big model's is megabytes
MAX_DEPTH = 8


@dataclass(frozen=True)
class SumStats:
    terms: int  # k: the terms summed into each output element (the largest call's)
    abs_sum: float  # max over elements and samples of Σ|xᵢwᵢ|
    rss: float  # max of √Σ(xᵢwᵢ)²
    factors: tuple[float, ...]  # per summed operand: max of Σ|the other operand's terms|
    rss_factors: tuple[float, ...]  # per summed operand: max of √Σ(the other's terms)²


@dataclass(frozen=True)
class Grain:
    kind: str  # "row" (all axes but the last) or "channel" (the last axis)
    magnitude: tuple[float, ...]
    rounding: dict[str, tuple[float, ...]]  # by type in TYPES


@dataclass(frozen=True)
class SiteEnvelope:
    op: str  # the primitive's name
    magnitude: float  # max |v| over the sampled values
    rounding: dict[str, float]  # by type in TYPES: max |fl_t(v) − v| (0 where v is exact in t)
    count: int  # elements the site computes in one sample (every call and layer counted)
    work: int  # the primitive's work per element, the largest call's (calibrate.work)
    sum: SumStats | None = None
    grain: Grain | None = None
    exact: tuple[str, ...] = ()  # the types in EXACT_TYPES every sampled value is exact in


@dataclass(frozen=True)
class Meta:
    program: str  # SHA-256 of the program's source text, the prelude joined (program_digest)
    entry: str
    dims: dict[str, int]
    consts: dict[str, int]
    weights: str | None  # the --weights path as given, or None (initialised parameters)
    data: str | None  # the --data path, or None (drawn inputs)
    seed: int
    samples: int
    first: int  # the first sample's index
    bits: int
    grain: str  # in GRAINS
    date: str  # the UTC day, YYYY-MM-DD
    # the reference the magnitudes were read from: "ball" (certified upper bounds) or
    # "interp" (MPFR numbers; an envelope written before there were two says none)
    reference: str = "interp"


@dataclass(frozen=True)
class Envelope:
    meta: Meta
    sites: dict[str, SiteEnvelope]  # by site "<function>/%<n>", in site order

    def check_program(
        self, source_sha: str, entry: str, dims: dict[str, int], consts: dict[str, int]
    ) -> None:
        """Refuse (E7004) an envelope measured on another program, entry or bindings."""
        meta = self.meta
        if meta.program != source_sha:
            _other(f"another program (SHA-256 {meta.program[:12]}…, this one's {source_sha[:12]}…)")
        if meta.entry != entry:
            _other(f"the entry {meta.entry!r}, not {entry!r}")
        for flag, measured, given in (("--dim", meta.dims, dims), ("--const", meta.consts, consts)):
            if measured != given:
                _other(f"{flag} {_bindings(measured)}, not {_bindings(given)}")


def _other(what: str):
    raise RealizationError(f"the envelope was measured on {what}", code="E7004")


def _bindings(sizes: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(sizes.items())) or "(none)"


def program_digest(program: Program) -> str:
    """The SHA-256 an envelope records of a program: its source and the prelude's."""
    tree = program.ast
    text = tree.text + "\0" + tree.sources.get(PRELUDE, "")
    return hashlib.sha256(text.encode()).hexdigest()


def envelope_for(path: str, core: Core) -> Envelope:
    """The envelope at `path`, refused unless it was measured on `core`'s program, entry
    and bindings: what a command reading an envelope calls."""
    env = read_envelope(path)
    try:
        env.check_program(program_digest(core.program), core.entry, core.dims, core.consts)
    except RealizationError as e:
        raise RealizationError(f"{path}: {e.message}", code=e.code) from None
    return env


def site_order(site: str) -> tuple[str, int]:
    """A site's place: by function, then by number (`f/%2` before `f/%10`)."""
    function, _, n = site.rpartition("/%")
    return (function, int(n)) if n.isdigit() else (site, -1)


# ---- the file ---------------------------------------------------------------------------


def _bound(what: str) -> dict:
    return {
        "anyOf": [{"type": "number", "minimum": 0}, {"const": "inf"}],
        "description": f'{{field}} is {what}: a number from 0 or "inf", not {{value}}',
    }


def _whole(least: int, what: str) -> dict:
    return {
        "type": "integer",
        "minimum": least,
        "description": f"{{field}} is {what}, not {{value}}",
    }


def _record(what: str, properties: dict, optional: tuple[str, ...] = ()) -> dict:
    """An object with exactly `properties`, all required but `optional`."""
    names = ", ".join(properties)
    return {
        "type": "object",
        "description": f"{what} has the fields {names}, not {{value}}",
        "propertyNames": {
            "enum": list(properties),
            "description": f"unknown field {{value!r}} (fields: {names})",
        },
        "properties": properties,
        "required": [k for k in properties if k not in optional],
    }


def _bounds() -> dict:
    return {
        "type": "array",
        "items": _bound("a bound"),
        "description": "{field} is a list of bounds",
    }


def _by_type(value: dict) -> dict:
    return _record("a rounding", dict.fromkeys(TYPES, value))


def _sizes(what: str) -> dict:
    return {
        "type": "object",
        "additionalProperties": _whole(1, "a positive whole number"),
        "description": f"{{field}} maps {what} to sizes, not {{value}}",
    }


def _text_or_null(what: str) -> dict:
    return {
        "type": ["string", "null"],
        "description": f"{{field}} is {what} or null, not {{value}}",
    }


SCHEMA = _record(
    "an envelope",
    {
        "meta": _record(
            "meta",
            {
                "program": {
                    "type": "string",
                    "pattern": "^[0-9a-f]{64}$",
                    "description": "{field} is a SHA-256 in hex, not {value}",
                },
                "entry": {"type": "string", "description": "{field} is a string, not {value}"},
                "dims": _sizes("dims"),
                "consts": _sizes("consts"),
                "weights": _text_or_null("a path"),
                "data": _text_or_null("a path"),
                "seed": _whole(0, "a whole number from 0"),
                "samples": _whole(1, "a whole number from 1"),
                "first": _whole(0, "a whole number from 0"),
                "bits": _whole(2, "a whole number of bits from 2"),
                "grain": {
                    "enum": list(GRAINS),
                    "description": "{field} is site, row or channel, not {value}",
                },
                "date": {
                    "type": "string",
                    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
                    "description": "{field} is a day, YYYY-MM-DD, not {value}",
                },
                "reference": {
                    "enum": list(backends.names(exact=True)),
                    "description": "{field} is a reference backend "
                    f"({', '.join(backends.names(exact=True))}), not {{value}}",
                },
            },
            optional=("reference",),
        ),
        "sites": {
            "type": "object",
            "description": "{field} maps sites to their records, not {value}",
            "additionalProperties": _record(
                "a site's record",
                {
                    "op": {"type": "string", "description": "{field} is a string, not {value}"},
                    "magnitude": _bound("a bound"),
                    "rounding": _by_type(_bound("a bound")),
                    "count": _whole(0, "a whole number from 0"),
                    "work": _whole(0, "a whole number from 0"),
                    "sum": _record(
                        "a sum",
                        {
                            "terms": _whole(0, "a whole number from 0"),
                            "abs_sum": _bound("a bound"),
                            "rss": _bound("a bound"),
                            "factors": _bounds(),
                            "rss_factors": _bounds(),
                        },
                    ),
                    "grain": _record(
                        "a grain",
                        {
                            "kind": {
                                "enum": ["row", "channel"],
                                "description": "{field} is row or channel, not {value}",
                            },
                            "magnitude": _bounds(),
                            "rounding": _by_type(_bounds()),
                        },
                    ),
                    "exact": {
                        "type": "array",
                        "items": {
                            "enum": list(EXACT_TYPES),
                            "description": "{field} is one of "
                            + ", ".join(EXACT_TYPES)
                            + ", not {value}",
                        },
                        "uniqueItems": True,
                        "description": "{field} is a list of machine types, not {value}",
                    },
                },
                optional=("sum", "grain", "exact"),
            ),
        },
    },
)


def json_number(x: float) -> float | str:
    """A number as the files write it: "inf" for an infinite one."""
    return x if math.isfinite(x) else "inf"


def _float(x: float | str) -> float:
    return math.inf if x == "inf" else float(x)


def _floats(xs) -> tuple[float, ...]:
    return tuple(map(_float, xs))


def envelope_text(env: Envelope) -> str:
    """The envelope as JSON, the same bytes for the same envelope."""
    return json.dumps({"meta": vars(env.meta), "sites": _sites_json(env.sites)}, indent=1) + "\n"


def _sites_json(sites: dict[str, SiteEnvelope]) -> dict:
    out = {}
    for site, s in sites.items():
        rec = {
            "op": s.op,
            "magnitude": json_number(s.magnitude),
            "rounding": {t: json_number(s.rounding[t]) for t in TYPES},
            "count": s.count,
            "work": s.work,
            "exact": list(s.exact),
        }
        if s.sum is not None:
            rec["sum"] = {
                "terms": s.sum.terms,
                "abs_sum": json_number(s.sum.abs_sum),
                "rss": json_number(s.sum.rss),
                "factors": [json_number(x) for x in s.sum.factors],
                "rss_factors": [json_number(x) for x in s.sum.rss_factors],
            }
        if s.grain is not None:
            rec["grain"] = {
                "kind": s.grain.kind,
                "magnitude": [json_number(x) for x in s.grain.magnitude],
                "rounding": {t: [json_number(x) for x in s.grain.rounding[t]] for t in TYPES},
            }
        out[site] = rec
    return out


def write_envelope(env: Envelope, path: str) -> None:
    write_atomic(path, envelope_text(env))


def read_envelope(path: str) -> Envelope:
    """The envelope at `path`: E0002 if it cannot be read; E7003 if it is not JSON within
    jsontext's bounds or breaks SCHEMA."""
    value = read_json(path, SCHEMA, "E7003", MAX_BYTES, MAX_DEPTH)
    sites = {site: _site(path, site, rec) for site, rec in value["sites"].items()}
    return Envelope(
        Meta(**value["meta"]), dict(sorted(sites.items(), key=lambda kv: site_order(kv[0])))
    )


def _malformed(path: str, why: str):
    raise RealizationError(f"{path}: {why}", code="E7003")


def _site(path: str, site: str, rec: dict) -> SiteEnvelope:
    s, g = rec.get("sum"), rec.get("grain")
    if s is not None and len(s["factors"]) != len(s["rss_factors"]):
        _malformed(
            path,
            f"sites {site}: sum has {len(s['factors'])} factors and "
            f"{len(s['rss_factors'])} rss_factors",
        )
    if g is not None and any(len(g["rounding"][t]) != len(g["magnitude"]) for t in TYPES):
        _malformed(path, f"sites {site}: grain's rounding lists are not one a magnitude")
    rounding = {t: _float(rec["rounding"][t]) for t in TYPES}
    exact = rec.get("exact")
    return SiteEnvelope(
        rec["op"],
        _float(rec["magnitude"]),
        rounding,
        rec["count"],
        rec["work"],
        None
        if s is None
        else SumStats(
            s["terms"],
            _float(s["abs_sum"]),
            _float(s["rss"]),
            _floats(s["factors"]),
            _floats(s["rss_factors"]),
        ),
        None
        if g is None
        else Grain(
            g["kind"], _floats(g["magnitude"]), {t: _floats(g["rounding"][t]) for t in TYPES}
        ),
        exact_types(exact) if exact is not None else exact_from(rounding),
    )


def exact_types(types) -> tuple[str, ...]:
    """`types` in EXACT_TYPES' order, widest first."""
    return tuple(t for t in EXACT_TYPES if t in types)


def exact_from(rounding: dict[str, float]) -> tuple[str, ...]:
    """What a file without `exact` (written before it was recorded) says of it: the narrow
    types whose rounding is 0, and f64 with f32 (f64 holds every f32 number)."""
    narrow = [t for t in TYPES if rounding[t] == 0]
    return exact_types(narrow + (["f64"] if "f32" in narrow else []))
