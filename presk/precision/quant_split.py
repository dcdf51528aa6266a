"""`presk quantize --realize`: a realization's gap to the exact reference split in two.

On one sample (the parameters from `--weights` or the initializers at the seed; the
inputs drawn from the seed, as `presk run --seed` draws them, or the first batch of
`--data`'s training windows: presk/precision/samples.py, sample 0):

- *representation*: the exact denotation on the weights as the realization stores them
  (integer weights dequantised, typed parameters rounded) against the exact denotation
  on the true weights: what storing the weights costs;
- *arithmetic*: the realization's run on a machine backend against the exact denotation
  on its stored weights: what computing in machine types costs;
- *total*: the machine run against the exact denotation on the true weights.

Each is the largest elementwise gap over the output's real elements, absolute and
relative to the output's magnitude (its largest |element| on the true weights, |L| for a
loss). The two parts need not add up to the total, but by the triangle inequality they
are never less. Gaps are taken in MPFR, so a gap far below the output's float64 ulp
(the reference against itself) is not lost to rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from presk.api import Compiled, Core, entry_values
from presk.backends.host import CallContext
from presk.kernel.machine import ELEMENTS, MACHINES, storage_of
from presk.precision.envelope import Meta, program_digest
from presk.precision.samples import sample_arguments, sample_seed
from presk.prims import exact
from presk.quantize import parameter_values
from presk.realize import Realization
from presk.runtime.inputs import param_type
from presk.runtime.values import Tensor, leaves

TRUE_WEIGHTS = Realization("f64", spelling="f64")  # the reference on the weights as given


@dataclass(frozen=True)
class Sample:
    """The arguments of one run (as `Compiled` takes them, the parameters first) and the
    seed of its random draws."""

    args: list
    seed: int


@dataclass(frozen=True)
class Gap:
    absolute: float
    relative: float  # to the output's magnitude


@dataclass(frozen=True)
class Split:
    representation: Gap
    arithmetic: Gap
    total: Gap
    magnitude: float  # the largest |element| of the exact output on the true weights
    weight_bytes: int  # the parameters as the realization stores them
    f64_bytes: int  # the parameters in f64


def sample(
    core: Core, seed: int = 0, weights: str | None = None, data: str | None = None
) -> Sample:
    """Sample 0 of a calibration with these flags: the same parameters and inputs."""
    meta = Meta(  # described for sample_arguments only; no envelope is written, so no date
        program=program_digest(core.program),
        entry=core.entry,
        dims=core.dims,
        consts=core.consts,
        weights=weights,
        data=data,
        seed=seed,
        samples=1,
        first=0,
        bits=0,
        grain="site",
        date="",
    )
    return Sample(sample_arguments(core, meta, 0), sample_seed(meta, 0))


def exact_output(core: Core, s: Sample, realization: Realization, bits: int) -> list:
    """The exact reference's output (its real leaves, MPFR numbers) on the weights as
    `realization` stores them: the reference computes at `bits` whatever the record says
    of types, on the values its `params` and `quant` give the parameters."""
    return outputs(core.reference(bits, realize=realization), s)


def outputs(compiled: Compiled, s: Sample) -> list:
    """The output's real leaves on `s`, as the backend gives them (MPFR numbers from the
    reference, machine numbers otherwise)."""
    out = compiled.backend.call(compiled.values(s.args), CallContext(seed=s.seed))
    return [t.data for _, t in leaves(out) if t.type.kind == "real" and t.type.size]


def split(
    core: Core,
    s: Sample,
    realization: Realization,
    backend: str = "mlir",
    bits: int = 128,
    truth: list | None = None,
) -> Split:
    """The gap of `realization` run on `backend`, split in two against the reference at
    `bits`. `truth` is `exact_output(core, s, TRUE_WEIGHTS, bits)` when already known
    (it is the same for every realization)."""
    # compiled first: a record the program or the backend refuses is refused before the
    # slow reference runs
    machine = core.compile(backend, realization, bits=bits)
    truth = truth if truth is not None else exact_output(core, s, TRUE_WEIGHTS, bits)
    stored = exact_output(core, s, realization, bits) if _moves_weights(realization) else truth
    native = outputs(machine, s)
    magnitude = largest_magnitude(truth, bits)
    return Split(
        output_gap(stored, truth, magnitude, bits),
        output_gap(native, stored, magnitude, bits),
        output_gap(native, truth, magnitude, bits),
        magnitude,
        *weight_bytes(core, s, realization),
    )


def _moves_weights(r: Realization) -> bool:
    """Whether the reference reads other weights under `r` than the true ones."""
    return bool(r.params or r.quant)


def output_gap(xs: list, ys: list, magnitude: float, bits: int) -> Gap:
    """The largest |x − y| over the leaves' elements, taken in MPFR (+∞ where a machine
    number is not finite: an overflow is not a small gap)."""
    largest = 0.0
    with exact.context(max(bits, 53)):  # every float64 held exactly
        for x, y in zip(xs, ys, strict=True):
            if not (_finite(x) and _finite(y)):
                largest = math.inf
                continue
            d = np.abs(exact.exact(x) - exact.exact(y))
            largest = max(largest, float(np.max(d)))
    return Gap(largest, _relative(largest, magnitude))


def _finite(a) -> bool:
    a = np.asarray(a)
    return a.dtype == object or bool(np.all(np.isfinite(a)))


def largest_magnitude(xs: list, bits: int) -> float:
    with exact.context(max(bits, 53)):
        return max((float(np.max(np.abs(exact.exact(x)))) for x in xs), default=0.0)


def _relative(gap: float, magnitude: float) -> float:
    if magnitude:
        return gap / magnitude
    return math.inf if gap else 0.0


def weight_bytes(core: Core, s: Sample, r: Realization) -> tuple[int, int]:
    """(the parameters' bytes as `r` stores them, their bytes in f64): integer weights
    are their integers (two 4-bit ones a byte, as packed) and one f32 scale per index of
    the other axes, a typed parameter its type's, any other the default type's; a plain
    function has none."""
    params = entry_values(core, s.args)[0] if param_type(core.view) is not None else {}
    stored = dict(leaves(parameter_values(params, r, native=True)))
    total = f64 = 0
    for path, t in leaves(params):
        total += _stored_bytes(path, stored[path], r)
        f64 += t.type.size * MACHINES["f64"].bytes
    return total, f64


def _stored_bytes(path: str, t: Tensor, r: Realization) -> int:
    if path in r.quant:
        return t.data.ints.nbytes + t.data.scales.nbytes
    element = r.params.get(path) or storage_of(t.type, MACHINES[r.default])
    return t.type.size * ELEMENTS[element].itemsize
