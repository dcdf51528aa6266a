"""presk's own exp, erf and tanh (`"functions": "presk"`, presk/kernel/functions.py):
within an ulp of the exact function, and the same bits on the kernel evaluator and natively, in
vector lanes of every width this machine runs and in the scalar loop after them, and in
the C export; only elementwise calls of f32 and bf16 kernels take them, by default."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from conftest import run_tool

import presk
from presk import backends, realize, stages
from presk.backends.host import CallContext
from presk.backends.mlir import MlirBackend
from presk.core.program import read_host_program
from presk.kernel.functions import evaluate
from presk.kernel.machine import MACHINES
from presk.prims.exact import to_float64
from presk.realize import Realization
from presk.runtime.inputs import arguments
from presk.runtime.values import Tensor, leaves
from presk.toolchain import default_threads, vector_widths
from tests.conformance.suite import (
    BANDS,
    EXAMPLES,
    PRIMS,
    Case,
    core_of,
    inputs,
    module_of,
    reference,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import c_conformance  # noqa: E402

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73, -87.3, -103.9, -104.5, 3.92, -4.5]
SPECIAL += [1e-40, -1e-40, 1e-30, 0.3466, -0.17329, 9.01, -9.02, 10.5]  # tanh's
PROGRAM = """
dim N
fn elementwise(x : ℝ[N]) -> ℝ[N] {
  exp(x) * erf(x)
}
fn hyperbolic(x : ℝ[N]) -> ℝ[N] {
  tanh(x)
}
fn in_a_sum(x : ℝ[N]) -> ℝ[N] {
  softmax[N](x)
}
"""


def _ordered(a: np.ndarray) -> np.ndarray:
    """f32 bits as integers in the order of the values (-0 and +0 one apart)."""
    i = a.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF) - 1, i)


@pytest.mark.parametrize(
    ("fn", "lo", "hi", "exact", "ulps"),
    [
        ("exp", -105, 90, mpmath.exp, 0),
        ("erf", -5, 5, mpmath.erf, 1),
        ("tanh", -11, 11, mpmath.tanh, 0),
    ],
)
def test_within_an_ulp_of_the_exact_function(fn, lo, hi, exact, ulps):
    """exp and tanh were correctly rounded at every point sampled, erf within one ulp."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(lo, hi, 3000), rng.standard_normal(1000) * 1e-3])
    x = x.astype(np.float32)
    with mpmath.workdps(30):
        want = np.array([float(exact(mpmath.mpf(float(v)))) for v in x])
    with np.errstate(over="ignore"):
        want = want.astype(np.float32)
    got = evaluate(fn, x)
    assert np.max(np.abs(_ordered(got) - _ordered(want))) <= ulps


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 89.0, -104.0], np.float32)
    e, f, t = evaluate("exp", x), evaluate("erf", x), evaluate("tanh", x)
    assert np.array_equal(e[[0, 1, 2, 3, 5, 6]], np.float32([1, 1, np.inf, 0, np.inf, 0]))
    assert np.isnan(e[4]) and np.isnan(f[4]) and np.isnan(t[4])
    assert np.array_equal(f[[0, 1, 2, 3]], np.float32([0, -0.0, 1, -1]))
    assert np.signbit(f[1]) and not np.signbit(f[0])
    assert np.array_equal(t[[0, 1, 2, 3, 5, 6]], np.float32([0, -0.0, 1, -1, 1, -1]))
    assert np.signbit(t[1]) and not np.signbit(t[0])


def test_tanh_keeps_a_subnormal_and_saturates_where_f32_does():
    """tanh(x) rounds to x in f32 from 2⁻¹³ down, the subnormals included, and to 1 from
    13·ln 2 ≈ 9.01091 up (1 − tanh(x) < 2⁻²⁵), well before the clamp of 2x at 20."""
    tiny = np.float32([1e-40, -1e-40, 1e-30, -3e-5, 2.0**-13])
    assert np.array_equal(evaluate("tanh", tiny), tiny)
    x = np.float32([9.0, 9.0109, 9.011, 10.0, 10.001, 15.0])
    assert np.array_equal(evaluate("tanh", x), np.float32([1 - 2.0**-24] * 2 + [1.0] * 4))
    assert np.array_equal(evaluate("tanh", -x), -evaluate("tanh", x))  # odd, bit for bit


def _realization(tmp_path, machine: str, functions: str = "presk") -> str:
    path = tmp_path / f"{machine}.{functions}.json"
    path.write_text(json.dumps({"default": machine, "functions": functions}))
    return f"@{path}"


@pytest.mark.parametrize("machine", ["f32", "bf16"])
@pytest.mark.parametrize("entry", ["elementwise", "hyperbolic"])
def test_the_evaluator_and_native_code_agree_bit_for_bit(tmp_path, machine, entry):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-110, 95, 600), rng.standard_normal(300), SPECIAL])
    core = presk.load(PROGRAM).elaborate(entry, dims={"N": len(x)})
    realize = _realization(tmp_path, machine)
    want = core.lower(realize).compile("kernel")(x)  # in the machine's type
    for width in vector_widths():  # the lanes of each width and the scalar loop after them
        got = _native(core, realize, machine, width, x)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), width
    assert 'psk_kernel.impl = "presk"' in str(core.lower(realize).module)  # the mark took


def _native(core, realize: str, machine: str, width: int, x: np.ndarray) -> np.ndarray:
    """The entry's output run natively with vectors of `width` bytes."""
    module = core.lower(realize).module
    program = read_host_program(module)
    stages.affine(module, width)
    backend = MlirBackend(program, module, MACHINES[machine], threads=default_threads())
    (arg,) = arguments(core.view, 0, None)
    out = backend.call([Tensor(arg.type, x)], CallContext()).data
    return np.array(out)  # as the API returns it, in the machine's type


def test_a_softmaxs_exps_are_ours_in_both_its_forms_with_one_set_of_bits():
    """Every exp of a kernel is presk's, the sum's too, so the three-pass form (an exp in
    the sum's loop, an element at a time) and the two-pass form the cost model picks (a
    row's exps in a loop of their own, in lanes) give the same bits, the evaluator's."""
    x = np.random.default_rng(5).uniform(-3, 3, 67)
    core = presk.load(PROGRAM).elaborate("in_a_sum", dims={"N": len(x)})
    out = {}
    for plan, form in [("default", "three-pass"), ("auto", "two-pass")]:
        kernels = core.lower("f32", plan=plan)
        text = str(kernels.module)
        assert f'form = "{form}"' in text, plan
        assert text.count('fn = "exp", psk_kernel.impl = "presk"') == text.count('fn = "exp"')
        out[plan] = np.atleast_1d(kernels.compile("mlir")(x))
    evaluated = np.atleast_1d(core.lower("f32").compile("kernel")(x))
    assert np.array_equal(out["default"], out["auto"]) and np.array_equal(out["auto"], evaluated)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("machine", ["f32", "bf16"])
@pytest.mark.parametrize("entry", ["exp_", "erf_", "gelu_", "tanh_"])
def test_the_c_export_computes_their_bits(entry, machine, tmp_path):
    """The default realization's (presk's own): written as arithmetic and bit casts before
    EmitC, so the C gives the mlir backend's bits."""
    case = Case(entry, PRIMS, entry, ("N=3", "M=4"))
    assert 'psk_kernel.impl = "presk"' in str(core_of(case).lower(machine).module)
    assert c_conformance.check(case, machine, tmp_path) == "same"


@pytest.mark.parametrize("machine", ["f32", "bf16"])
@pytest.mark.parametrize("entry", ["MiniGPT.apply (tiny)", "loss_grad through a stacked module"])
def test_a_model_stays_within_its_band_of_the_exact_reference(machine, entry):
    """The tiny MiniGPT's logits and gradient (gelu's erf and exp, and their derivatives',
    in presk's own) natively within the conformance band of the 256-bit reference."""
    case = next(c for c in EXAMPLES if c.name == entry)
    realize = Realization(machine, functions="presk", spelling="presk functions")
    out = backends.make("mlir", module_of(case), realize=realize).call(inputs(case), CallContext())
    eps, a = BANDS[machine]
    for (_, x), (_, y) in zip(leaves(reference(case)), leaves(out), strict=True):
        exact, got = to_float64(x.data), np.asarray(y.data).astype(np.float64)
        assert np.all(np.abs(exact - got) <= eps * (np.abs(exact) + a))


def test_the_kernel_dump_names_them(tmp_path):
    src = tmp_path / "f.psk"
    src.write_text(PROGRAM)
    args = ["dump", str(src), "--entry", "elementwise", "--dim", "N=8", "--stage", "kernel"]
    ours = run_tool("presk", *args, "--realize", _realization(tmp_path, "f32"))
    assert "presk.exp(" in ours.stdout and "presk.erf(" in ours.stdout, ours.stdout
    assert "presk.exp(" in run_tool("presk", *args, "--realize", "f32").stdout, "the default"
    libm = run_tool("presk", *args, "--realize", _realization(tmp_path, "f32", "libm")).stdout
    assert "presk.exp(" not in libm and "(exp(" in libm, libm
    args[args.index("elementwise")] = "hyperbolic"
    assert "presk.tanh(" in run_tool("presk", *args, "--realize", "bf16").stdout
    assert "presk.tanh(" not in run_tool("presk", *args, "--realize", "f64").stdout


def test_a_checkpoint_recorded_before_the_default_reads_back_the_c_librarys(tmp_path):
    """A record without the field was written when libm's were the default: a resumed run
    computes what that run computed."""
    ckpt = tmp_path / "old.psk.d"
    ckpt.mkdir()
    ours = {"default": "f32", "functions": "presk"}
    for record, functions in [({"default": "f32"}, "libm"), (ours, "presk")]:
        (ckpt / "header.json").write_text(json.dumps({"meta": {"realize": record}}))
        assert realize.read(f"@{ckpt}").functions == functions
    assert realize.read("f32").functions == "presk"
