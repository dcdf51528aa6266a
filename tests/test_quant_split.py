"""`presk quantize --realize`: a realization's gap to the exact reference split into
representation (the weights as stored) and arithmetic (the machine run), and the weights'
bytes (presk/precision/quant_split.py), on the tutorial's MLP{4, 8, 1}."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO, run_in_process

import presk
from presk.precision.quant_split import Gap, Split, exact_output, sample, split, weight_bytes
from presk.realize import Quant, Realization

MLP = REPO / "tutorial" / "02_regression.psk"
ENTRY = "MLP{4, 8, 1}.mse"
MATRICES = ("hidden.w", "out.w")  # ℝ[4, 8] and ℝ[8, 1]; the biases ℝ[8] and ℝ[1]
F64_BYTES = (32 + 8 + 8 + 1) * 8
BITS = 128
TINY = 2.0**-100  # far below any machine gap, far above the MPFR rounding of a gap


def quantised(bits: int, scheme: str = "absmax") -> Realization:
    quant = {p: Quant(bits, -2, scheme) for p in MATRICES}
    return Realization("f32", quant=quant, spelling=f"int{bits}")


@pytest.fixture(scope="module")
def core():
    return presk.load(MLP).elaborate(ENTRY, {"N": 16})


@pytest.fixture(scope="module")
def drawn(core):
    return sample(core, seed=3)


@pytest.fixture(scope="module")
def truth(core, drawn):
    return exact_output(core, drawn, Realization("f64"), BITS)


def split_of(core, drawn, truth, r: Realization, backend: str = "kernel") -> Split:
    return split(core, drawn, r, backend, BITS, truth)


@pytest.mark.parametrize("backend", ["kernel", "mlir"])
def test_int8_parts_bound_the_total(core, drawn, truth, backend):
    s = split_of(core, drawn, truth, quantised(8), backend)
    assert s.representation.absolute > 0
    assert s.arithmetic.absolute > 0  # f32 arithmetic
    assert s.representation.absolute + s.arithmetic.absolute >= s.total.absolute - TINY
    # eight bits cost more than f32 arithmetic, and the total is mostly theirs
    assert s.representation.absolute > 100 * s.arithmetic.absolute
    assert s.total.relative == pytest.approx(s.total.absolute / s.magnitude, rel=1e-15)


def test_the_truth_is_computed_when_not_given(core, drawn, truth):
    given = split_of(core, drawn, truth, quantised(4))
    assert split(core, drawn, quantised(4), "kernel", BITS) == given


def test_four_bits_store_worse_weights_than_eight(core, drawn, truth):
    eight = split_of(core, drawn, truth, quantised(8))
    four = split_of(core, drawn, truth, quantised(4))
    assert four.representation.absolute > 4 * eight.representation.absolute


def test_all_f64_represents_the_weights_exactly(core, drawn, truth):
    s = split_of(core, drawn, truth, Realization("f64", spelling="f64"))
    assert s.representation == Gap(0.0, 0.0)
    assert 0 < s.arithmetic.absolute < 1e-14 * s.magnitude
    assert s.arithmetic == s.total
    assert (s.weight_bytes, s.f64_bytes) == (F64_BYTES, F64_BYTES)


def test_the_reference_as_the_machine_adds_no_arithmetic(core, drawn, truth):
    s = split_of(core, drawn, truth, quantised(8), backend="interp")
    assert s.arithmetic.absolute == 0
    assert s.total == s.representation
    assert s.representation.absolute > 0


def test_uniform_types_move_no_weight(core, drawn, truth):
    """The reference computes exactly whatever the record's types: f32 and bf16 moves
    only the machine run."""
    f32 = split_of(core, drawn, truth, Realization("f32", spelling="f32"))
    bf16 = split_of(core, drawn, truth, Realization("bf16", spelling="bf16"))
    assert f32.representation.absolute == bf16.representation.absolute == 0
    assert bf16.arithmetic.absolute > 100 * f32.arithmetic.absolute > 0
    assert (f32.weight_bytes, bf16.weight_bytes) == (F64_BYTES // 2, F64_BYTES // 4)


def test_typed_parameters_count_their_rounding(core, drawn, truth):
    """A record with no `quant`: representation is the typed `params`' rounding alone."""
    typed = Realization("f64", params={"hidden.w": "bf16"}, spelling="typed")
    s = split_of(core, drawn, truth, typed)
    assert s.representation.absolute > 0
    assert s.weight_bytes == F64_BYTES - 32 * 8 + 32 * 2


def test_weight_bytes_are_the_integers_and_scales_as_stored(core, drawn):
    # over -2: one f32 scale per output column, 8 for hidden.w and 1 for out.w; the
    # biases in the default f32
    scales, biases = (8 + 1) * 4, 9 * 4
    assert weight_bytes(core, drawn, quantised(8)) == (32 + 8 + scales + biases, F64_BYTES)
    # four bits two to a byte along the last axis: hidden.w 4 rows of 4 bytes, out.w's
    # one-element rows a byte each
    assert weight_bytes(core, drawn, quantised(4, "pow2")) == (16 + 8 + scales + biases, F64_BYTES)


def test_the_command_prints_the_split(core, drawn, truth, tmp_path):
    record = tmp_path / "int8.json"
    quant = {p: {"bits": 8, "over": -2} for p in MATRICES}
    record.write_text(json.dumps({"default": "f32", "quant": quant}))
    argv = ("quantize", MLP, "--entry", ENTRY, "--dim", "N=16", "--seed", "3")
    proc = run_in_process("presk", *argv, "--realize", f"@{record}", "--backend", "kernel")
    assert proc.returncode == 0, proc.stderr
    s = split_of(core, drawn, truth, quantised(8))
    rows = {
        m[1]: (float(m[2]), float(m[3]))
        for m in re.finditer(r"^  (\w+) +(\S+) +(\S+) ", proc.stdout, re.M)
    }
    for name in ("representation", "arithmetic", "total"):
        gap = getattr(s, name)
        assert rows[name] == pytest.approx((gap.absolute, gap.relative), rel=1e-3)
    assert f"weights: {s.weight_bytes} bytes, {F64_BYTES} in f64" in proc.stdout
