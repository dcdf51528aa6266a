"""The FMA realization, `"contract": "fma"`: a contraction's acc + a·b as one fused
multiply-add, rounded once. The kernel evaluator gives native code's bits, on one thread
and two; the bits are other than the exact kernels'; the gap to the reference stays
inside the type's band; and nothing but a contraction's multiply-add fuses."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from presk import backends, stages
from presk.backends.host import CallContext
from presk.ir.ops import walk_ops
from presk.kernel.evaluator import _apply_libm
from presk.realize import Realization
from presk.runtime.values import leaves
from presk.toolchain import vector_bytes
from tests.conformance.suite import (
    DRAWN,
    Case,
    inputs,
    machine_output,
    measure,
    module_of,
    realized,
)
from tests.test_mlir_backend import assert_same_bits

_DRAWN = {c.name: c for c in DRAWN}
CASES = [
    Case("Linear{16, 8}.apply", "tutorial/01_linear.psk", "Linear{16, 8}.apply", ("batch=4",)),
    _DRAWN["mse_grad"],  # the regression MLP's gradient (dot_vjp_l/r), zeros drawn
    _DRAWN["MiniGPT.apply (tiny)"],
]
IDS = [c.name for c in CASES]
# Reported, not asserted, as the suite reports MiniGPT.apply in f32: under fma one element
# of the drawn regression's gradient, 2,500 times smaller than the largest (a sum that
# cancels), is 1.1 band widths from the reference (the exact kernels': 1.9, reported too)
REPORTED = {("mse_grad", "f32")}


def _native(case: Case, machine: str, threads: int):
    """The case's output natively under the FMA realization; with two threads, every
    kernel that may split does, however small."""
    b = backends.make(
        "mlir", module_of(case), realize=realized(case, machine, fma=True), threads=threads
    )
    if threads > 1:
        b.split_work = 0
    return b.call(inputs(case), CallContext())


def _raw(value) -> list[bytes]:
    return [np.asarray(t.data).tobytes() for _, t in leaves(value)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("machine", ["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_kernel_evaluator_gives_native_codes_fused_bits(case, machine, threads):
    kernel = machine_output(case, machine, "kernel", fma=True)
    assert_same_bits(kernel, _native(case, machine, threads), f"{case.name} {machine}")


@pytest.mark.parametrize("machine", ["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fused_bits_are_another_realizations(case, machine):
    fused = _raw(machine_output(case, machine, "kernel", fma=True))
    assert fused != _raw(machine_output(case, machine, "kernel")), "fma changed no bit"


@pytest.mark.parametrize("machine", ["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_fused_gap_to_the_reference_stays_in_the_band(case, machine):
    if machine not in case.asserted or (case.name, machine) in REPORTED:
        pytest.skip(f"the suite reports, not asserts, {case.name} in {machine}")
    gap = measure(case, machine, "mlir", fma=True)
    assert gap.ratio <= 1, f"{case.name} {machine}: {gap.ratio:.3g} of the band"


def _exact_fma(a: float, b: float, c: float, bits: int) -> float:
    with gmpy2.context(gmpy2.ieee(bits)):
        return float(gmpy2.fma(gmpy2.mpfr(a), gmpy2.mpfr(b), gmpy2.mpfr(c)))


def test_the_evaluators_fma_rounds_once():
    # f32: a·b + c computed in f64 and rounded to f32 is a double rounding that lands on a
    # tie (1 + 2^-24) and rounds it to even; the exact sum is above the tie
    a, b = np.array([0x3FCFCE83, 0x331DAF5D], dtype=np.uint32).view(np.float32)
    one = np.float32(1)
    fused = _apply_libm("fma", [a, b, one], np.dtype(np.float32))
    assert fused == np.float32(_exact_fma(float(a), float(b), 1.0, 32)) == np.nextafter(one, 2)
    assert np.float32(np.float64(a) * np.float64(b) + 1.0) == one  # the double rounding's
    # f64: (1 + 2^-30)(1 - 2^-30) - 1 = -2^-60, which a rounded product loses
    x, y = 1 + 2.0**-30, 1 - 2.0**-30
    fused = _apply_libm("fma", [np.float64(x), np.float64(y), np.float64(-1)], np.dtype(np.float64))
    assert fused == _exact_fma(x, y, -1.0, 64) == -(2.0**-60)
    assert x * y - 1 == 0


GPT_GRAD = Case(
    "loss_grad", "tutorial/05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.loss_grad", ("B=2", "T=8")
)


def _fmas(op) -> int:
    return len(list(walk_ops(op, "math.fma")))


def _kernels(realize) -> list[tuple[bool, int]]:
    """Each kernel of the tiny MiniGPT's gradient: whether a contraction, its fmas."""
    module = stages.kernel(module_of(GPT_GRAD), realize)
    return [
        ("psk_kernel.contraction" in f.attributes, _fmas(f))
        for f in walk_ops(module.operation, "func.func")
        if "psk_kernel.kernel" in f.attributes
    ]


def _total(realize) -> int:
    """The fmas of the kernel each launch runs, summed over the launches."""
    module = stages.kernel(module_of(GPT_GRAD), realize)
    fmas = {
        f.attributes["sym_name"].value: _fmas(f) for f in walk_ops(module.operation, "func.func")
    }
    return sum(
        fmas[op.attributes["kernel"].value]
        for op in walk_ops(module.operation, "psk_kernel.launch")
    )


def test_only_contractions_fuse_and_every_one_does():
    kernels = _kernels(Realization("f32", contract={"default": "fma"}))
    assert all(n > 0 for contraction, n in kernels if contraction)
    assert all(n == 0 for contraction, n in kernels if not contraction)
    assert _total("f32") == 0


def test_a_site_fuses_alone_and_a_default_spares_a_site():
    sites = stages.launch_sites(stages.kernel(module_of(GPT_GRAD), "f32"))
    site = next(s for s in sites if s.startswith("Proj.apply/"))
    one = _total(Realization("f32", contract={site: "fma"}))
    spared = _total(Realization("f32", contract={"default": "fma", site: "none"}))
    every = _total(Realization("f32", contract={"default": "fma"}))
    assert 0 < one < every and one + spared == every


@pytest.mark.parametrize("contract", [{}, {"default": "fma"}])
def test_native_code_fuses_with_the_fma_intrinsic_and_nothing_else(contract):
    module = stages.kernel(module_of(_DRAWN["mse"]), Realization("f32", contract=contract))
    fused = _fmas(stages.affine(module, vector_bytes()).operation)
    text = str(stages.llvm(module))
    assert text.count("llvm.intr.fma") == fused and (fused > 0) == bool(contract)
    assert "fastmath" not in text and "@fma" not in text  # no flag lets LLVM contract
