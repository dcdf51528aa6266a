"""A machine's roofline, per machine type: what `presk solve` prices time with.

`presk bench --calibrate` fits, on this machine and for each machine type t, a kernel's
predicted time T̂ = λ + max(W/π, Q/β): λ a launch's fixed cost in seconds (what one launch
adds to a call that launches nothing), π the work a second (W counts a primitive's work
per element, calibrate.work, times its elements) and β the bytes a second of the value a
kernel stores (Q its elements times t's bytes). It also fits each conversion between two
types, a fixed cost and a cost an element, of which the solve prices a kernel's
converting loads at the cost an element (docs/precision.md, section 7, "Time, not
traffic").

The fit times small entries natively through the API: an elementwise chain (one fused
kernel, memory-bound) at a tiny size for λ and at larger sizes for β, a square product
(compute-bound) at a few sizes for π, and the host's conversion itself at two sizes.
A call's arguments are given already stored in the kernel's type, so that no conversion is
timed with it, and its result is returned in its type; each call's fastest time is taken,
since a timing's noise only adds to it; and the three types' calls of one kernel are timed
in turns, so that a load that drifts during the fit slows them alike.

`presk solve` prices time by default, so it fits this machine's profile itself, once: the
first solve on a machine fits it (a few seconds) and keeps it in the kernel cache beside
its digest, keyed by the CPU, its features and the threads (`machine_profile`); a later
one reads it back verified, as the cache verifies a kernel, or fits it again.

A type that computes in another's arithmetic computes no faster than that one
(`Profile.roofline`: presk computes bf16 in f32), and the solve prices it no faster at all
(offers.Time). And a launch costs the same whatever its type: the least λ fitted.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from presk import api
from presk.backends.host import CallContext
from presk.backends.native import cache_dir
from presk.errors import PreskError
from presk.fileio import write_atomic
from presk.kernel.machine import MACHINES, TYPES, to_storage
from presk.precision.envelope import _record, _whole
from presk.realize import read_json
from presk.runtime.inputs import arguments
from presk.runtime.values import Tensor
from presk.timing import timed, timed_in_turns
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

fn same(x : ℝ[N]) -> ℝ[N] {
  x
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

    def roofline(self, t: str) -> Roofline:
        """`t`'s roofline as the solve prices it: computing no faster than the type of its
        arithmetic (bf16's is f32's: presk has no bf16 arithmetic), streaming as fitted,
        and a launch's fixed cost the least fitted of any type's, since it is the launch's
        whatever the type and the rest the noise of timing a call that does next to
        nothing."""
        own, arith = self.types[t], self.types[MACHINES[t].arith_name]
        return replace(
            own,
            latency=min(r.latency for r in self.types.values()),
            work_rate=min(own.work_rate, arith.work_rate),
        )

    def load(self, source: str, to: str, elements: int) -> float:
        """A kernel in `to` reading `elements` stored in `source`: the fitted conversion's
        cost an element, and no fixed cost, since the kernel converts as it loads
        (psk-lower-to-kernel's widening and rounding loads), with no host step."""
        return 0.0 if source == to else elements * self.conversions[f"{source}>{to}"].element

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
    write_atomic(path, profile_text(profile))


def profile_text(profile: Profile) -> str:
    return json.dumps(profile.record(), indent=1) + "\n"


def other_machine(profile: Profile) -> str | None:
    """Why `profile`'s predictions may not hold here (another CPU), or None."""
    cpu = host_cpu()[0]
    if profile.cpu == cpu:
        return None
    return f"the profile was fitted on {profile.cpu}, this machine is {cpu}"


# ---- this machine's, kept -----------------------------------------------------------------

FIT = 2  # the fit's version: a change to what it times fits every machine's again


def machine_profile(threads: int | None = None, fit=None) -> Profile:
    """This machine's profile at `threads` (default: the cores), from the kernel cache if a
    verified one is there, else fitted (`fit`, `calibrate` unless given) and kept there: a
    file and its digest (BLAKE2b keyed by the machine's key, written last), a profile of
    this CPU that breaks neither. A cache that cannot hold it costs a fit a solve."""
    cpu, features = host_cpu()
    threads = threads or default_threads()
    identity = f"{cpu}\n{features}\n{threads}\n{FIT}"
    key = hashlib.blake2b(identity.encode(), digest_size=16)
    path = cache_dir() / "profiles" / f"{key.hexdigest()}.json"
    kept = _kept(path, key.digest())
    if kept is not None and (kept.cpu, kept.threads) == (cpu, threads):
        return kept
    fitted = (fit or calibrate)(threads=threads)
    text = profile_text(fitted)
    try:
        write_atomic(path, text)
        write_atomic(path.with_suffix(".blake2b"), _digest(text, key.digest()))
    except PreskError:
        pass  # not kept: the next solve fits it again
    return fitted


def _digest(text: str, key: bytes) -> str:
    return hashlib.blake2b(text.encode(), key=key).hexdigest()


def _kept(path: Path, key: bytes) -> Profile | None:
    """The profile at `path` if it and its digest are regular files that agree and it reads
    as a profile, else None."""
    digest = path.with_suffix(".blake2b")
    try:
        if not (path.is_file() and digest.is_file()):
            return None
        if digest.read_text() != _digest(path.read_text(), key):
            return None
        return read_profile(str(path))
    except (OSError, UnicodeDecodeError, PreskError):
        return None


# ---- the fit ----------------------------------------------------------------------------


def calibrate(repeat: int = 5, threads: int | None = None) -> Profile:
    """This machine's profile, fitted from timed kernels on the mlir backend."""
    conversions = {p: _conversion(*p.split(">"), repeat) for p in PAIRS}
    seconds = _kernel_seconds(api.load(KERNELS), repeat, threads)
    types = {t: _roofline(t, {k: by_type[t] for k, by_type in seconds.items()}) for t in TYPES}
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


# what the fit times, each kernel at each of its sizes: last the tiny calls, since the first
# calls run slow. A call that launches nothing (`same`) is the host's cost of a call; what
# one launch adds to it is a launch's, as the schedule's replay pays it
TIMED = (
    *(("chain", n) for n in STREAMS),
    *(("square", n) for n in SQUARES),
    ("chain", TINY),
    ("same", TINY),
)


def _kernel_seconds(program, repeat: int, threads) -> dict[tuple[str, int], dict[str, float]]:
    """Each of TIMED's calls in each type, its fastest in seconds, the types timed in turns
    (`timing.timed_in_turns`): a shared machine's load, drifting over the fit, slows every
    type alike, so their ratios hold, where timed one type after another they did not (this
    machine's kept fit once had f32 streaming at a fifth of f64's rate). A call's arguments
    are given already stored in its type, so that no conversion is timed with the kernel
    (its result is returned in its type); a timing's noise only adds, so the least is the
    nearest the kernel's own."""
    out = {}
    for entry, n in TIMED:
        core = program.elaborate(entry, dims=dict.fromkeys(("N", "K", "M"), n))
        calls = {t: _call(core, t, threads) for t in TYPES}
        runs = timed_in_turns(calls, repeat, repeat)
        out[entry, n] = {t: min(ms) / 1e3 for t, ms in runs.items()}
    return out


def _call(core, t: str, threads):
    backend = core.lower(t).compile("mlir", threads).backend
    args = [Tensor(a.type, to_storage(a.data, t)) for a in arguments(core.view, 0, None)]
    context = CallContext()
    return lambda: backend.call(args, context)


def _roofline(t: str, seconds: dict[tuple[str, int], float]) -> Roofline:
    """`t`'s roofline from its calls' seconds, by TIMED's kernel and size."""
    call, host = seconds["chain", TINY], seconds["same", TINY]
    streams = [(n * MACHINES[t].bytes, seconds["chain", n]) for n in STREAMS]
    squares = [(n**3, seconds["square", n]) for n in SQUARES]
    byte_rate = statistics.median(q / max(s - call, 1e-9) for q, s in streams)
    work_rate = statistics.median(w / max(s - call, 1e-9) for w, s in squares)
    return Roofline(max(call - host, 1e-9), work_rate, byte_rate)
