"""A machine's roofline, per machine type: what `presk solve --profile` prices time with.

`presk bench --calibrate` fits, on this machine and for each machine type t, a kernel's
predicted time T̂ = λ + max(W/π, Q/β): λ a launch's fixed cost in seconds, π the work a
second (W counts a primitive's work per element, calibrate.work, times its elements) and
β the bytes a second of the value a kernel stores (Q its elements times t's bytes). It
also fits each conversion the host makes at a kernel's edge, where a value stored in one
type is read by a kernel of another: a fixed cost and a cost an element (docs/precision.md,
section 7, "Time, not traffic").

The fit times small entries natively through the API: an elementwise chain (one fused
kernel, memory-bound) at a tiny size for λ and at larger sizes for β, a square product
(compute-bound) at a few sizes for π, and the host's conversion itself at two sizes.
A call's arguments reach a narrower kernel converted, so their fitted conversion is taken
off a call's time before the kernel's is read from it; its result is returned in its type.
"""

from __future__ import annotations

import datetime
import json
import statistics
from dataclasses import dataclass

import numpy as np

from presk import api
from presk.fileio import write_atomic
from presk.kernel.machine import MACHINES, TYPES, to_storage
from presk.precision.envelope import _record, _whole
from presk.realize import read_json
from presk.timing import timed
from presk.toolchain import default_threads, host_cpu

PAIRS = tuple(f"{a}>{b}" for a in TYPES for b in TYPES if a != b)  # a conversion, from>to
MAX_BYTES = 64 << 10
MAX_DEPTH = 4

# What the fit times: sizes of the elementwise chain (the first tiny, for λ), of the
# square product, and of a conversion.
TINY = 16
STREAMS = (1 << 18, 1 << 20)
SQUARES = (128, 256)
CONVERSIONS = (1 << 10, 1 << 20)

KERNELS = """\
dim N
dim K
dim M

fn chain(x : ℝ[N]) -> ℝ[N] {
  x * x + x
}

fn square(a : ℝ[N, K], b : ℝ[K, M]) -> ℝ[N, M] {
  a · b
}
"""


@dataclass(frozen=True)
class Roofline:
    latency: float  # λ, seconds a launch
    work_rate: float  # π, work a second
    byte_rate: float  # β, stored bytes a second

    def seconds(self, work: float, stored_bytes: float, launches: int = 1) -> float:
        return launches * self.latency + max(work / self.work_rate, stored_bytes / self.byte_rate)


@dataclass(frozen=True)
class Conversion:
    fixed: float  # seconds a conversion
    element: float  # seconds an element

    def seconds(self, elements: int, times: int = 1) -> float:
        return times * self.fixed + elements * self.element


@dataclass(frozen=True)
class Profile:
    cpu: str  # the machine it was fitted on: host_cpu()'s name
    threads: int
    date: str  # the UTC day, YYYY-MM-DD
    types: dict[str, Roofline]  # by TYPES
    conversions: dict[str, Conversion]  # by PAIRS

    def convert(self, source: str, to: str, elements: int, times: int = 1) -> float:
        """The host's conversion of `elements` stored in `source` for a kernel in `to`."""
        return 0.0 if source == to else self.conversions[f"{source}>{to}"].seconds(elements, times)

    def record(self) -> dict:
        return {
            "machine": {"cpu": self.cpu, "threads": self.threads},
            "date": self.date,
            "types": {t: vars(r) for t, r in self.types.items()},
            "conversions": {p: vars(c) for p, c in self.conversions.items()},
        }


# ---- the file ---------------------------------------------------------------------------


def _rate(what: str) -> dict:
    return {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": f"{{field}} is {what}, a positive number, not {{value}}",
    }


def _cost(what: str) -> dict:
    return {
        "type": "number",
        "minimum": 0,
        "description": f"{{field}} is {what}, a number from 0, not {{value}}",
    }


def _by(keys, value: dict) -> dict:
    return _record("a table", dict.fromkeys(keys, value))


SCHEMA = _record(
    "a profile",
    {
        "machine": _record(
            "machine",
            {
                "cpu": {"type": "string", "description": "{field} is a string, not {value}"},
                "threads": _whole(1, "a whole number from 1"),
            },
        ),
        "date": {
            "type": "string",
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
            "description": "{field} is a day, YYYY-MM-DD, not {value}",
        },
        "types": _by(
            TYPES,
            _record(
                "a roofline",
                {
                    "latency": _cost("seconds a launch"),
                    "work_rate": _rate("work a second"),
                    "byte_rate": _rate("bytes a second"),
                },
            ),
        ),
        "conversions": _by(
            PAIRS,
            _record(
                "a conversion",
                {"fixed": _cost("seconds"), "element": _cost("seconds an element")},
            ),
        ),
    },
)


def read_profile(path: str) -> Profile:
    """The profile at `path`: E0002 if it cannot be read; E7005 if it is not JSON within
    jsontext's bounds or breaks SCHEMA."""
    value = read_json(path, SCHEMA, "E7005", MAX_BYTES, MAX_DEPTH)
    return Profile(
        value["machine"]["cpu"],
        value["machine"]["threads"],
        value["date"],
        {t: Roofline(**{k: float(x) for k, x in r.items()}) for t, r in value["types"].items()},
        {
            p: Conversion(**{k: float(x) for k, x in c.items()})
            for p, c in value["conversions"].items()
        },
    )


def write_profile(profile: Profile, path: str) -> None:
    write_atomic(path, json.dumps(profile.record(), indent=1) + "\n")


def other_machine(profile: Profile) -> str | None:
    """Why `profile`'s predictions may not hold here (another CPU), or None."""
    cpu = host_cpu()[0]
    if profile.cpu == cpu:
        return None
    return f"the profile was fitted on {profile.cpu}, this machine is {cpu}"


# ---- the fit ----------------------------------------------------------------------------


def calibrate(repeat: int = 5, threads: int | None = None) -> Profile:
    """This machine's profile, fitted from timed kernels on the mlir backend."""
    conversions = {p: _conversion(*p.split(">"), repeat) for p in PAIRS}
    program = api.load(KERNELS)
    types = {t: _roofline(program, t, conversions, repeat, threads) for t in TYPES}
    return Profile(
        host_cpu()[0],
        threads or default_threads(),
        datetime.datetime.now(datetime.UTC).date().isoformat(),
        types,
        conversions,
    )


def _conversion(source: str, to: str, repeat: int) -> Conversion:
    """The host's conversion as the schedule makes it (machine.to_storage), at two sizes."""
    small, large = (_convert_seconds(source, to, n, repeat) for n in CONVERSIONS)
    element = max(large - small, 0.0) / (CONVERSIONS[1] - CONVERSIONS[0])
    return Conversion(max(small - element * CONVERSIONS[0], 0.0), element)


def _convert_seconds(source: str, to: str, n: int, repeat: int) -> float:
    data = to_storage(np.linspace(-1.0, 1.0, n), source)
    return statistics.median(timed(lambda: to_storage(data, to), repeat)) / 1e3


def _roofline(program, t: str, conversions, repeat: int, threads) -> Roofline:
    def kernel_seconds(entry: str, n: int, shape: tuple[int, ...], operands: int) -> float:
        """A call's median time less its arguments' conversions (its result is returned
        in its type)."""
        core = program.elaborate(entry, dims=dict.fromkeys(("N", "K", "M"), n))
        compiled = core.lower(t).compile("mlir", threads)
        call = statistics.median(timed(compiled.drawn(), repeat)) / 1e3
        elements = int(np.prod(shape))
        edges = 0.0
        if t != "f64":
            edges = operands * conversions[f"f64>{t}"].seconds(elements)
        return max(call - edges, 1e-9)

    streams = [(n * MACHINES[t].bytes, kernel_seconds("chain", n, (n,), 1)) for n in STREAMS]
    squares = [(n**3, kernel_seconds("square", n, (n, n), 2)) for n in SQUARES]
    latency = kernel_seconds("chain", TINY, (TINY,), 1)  # last: the first calls run slow
    byte_rate = statistics.median(q / max(s - latency, 1e-9) for q, s in streams)
    work_rate = statistics.median(w / max(s - latency, 1e-9) for w, s in squares)
    return Roofline(latency, work_rate, byte_rate)
