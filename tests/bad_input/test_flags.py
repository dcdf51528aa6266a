"""Flags and sizes presk cannot take: refused with a code before anything is allocated.

`--bits`, `--seed` and `--threads` are checked as the command line is parsed; `--entry`
after the program is read (so the refusal can list its entries); the sizes `--dim` and
`--const` give after elaboration, against this machine's memory (E3012), before a backend
draws an input or a pass multiplies sizes past int64.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from programs import REPO

from bad_input.refusal import refuse
from presk.cli.common import run_cli
from presk.cli.main import main
from presk.front import bindings

LINEAR = str(REPO / "tutorial" / "01_linear.psk")
ENTRY = ["--entry", "Linear{3, 2}.apply"]


def run(*flags) -> list[str]:
    return ["run", LINEAR, *ENTRY, *map(str, flags)]


@pytest.mark.parametrize("bits", ["2147483648", "65537", "1", "0", "-3", "x", "2.5"])
def test_bits_out_of_range(bits):
    refuse(run("--dim", "batch=4", "--bits", bits), code="E0001", says="--bits")


@pytest.mark.parametrize("seed", ["-1", str(2**64), "x", "1.5"])
def test_seed_out_of_range(seed):
    refuse(run("--dim", "batch=4", "--seed", seed), code="E0001", says="--seed")


@pytest.mark.parametrize("threads", ["0", "-2", "x", "1.5"])
def test_threads_refused_before_the_inputs_are_read(threads, tmp_path):
    missing = tmp_path / "missing.npz"
    refuse(
        run("--dim", "batch=4", "--backend", "mlir", "--threads", threads, "--inputs", missing),
        code="E0001",
        says="--threads",
    )


def test_the_largest_seed_and_widest_bits_run(capsys):
    status = run_cli(main, run("--dim", "batch=2", "--seed", 2**64 - 1, "--bits", 65536))
    assert status == 0
    assert "ℝ[batch: 2, 2]" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["run", LINEAR, "--dim", "batch=4"],
        ["dump", LINEAR, "--stage", "core"],
        ["dump", LINEAR, "--stage", "llvm"],
        ["quantize", LINEAR, "--list"],
    ],
)
def test_missing_entry_lists_the_entries(argv):
    refuse(argv, code="E3001", says="entries: Linear{In, Out}.apply")


@pytest.mark.parametrize(
    "argv",
    [
        run("--dim", f"batch={2**62}"),
        run("--dim", f"batch={2**62}", "--backend", "kernel"),
        ["dump", LINEAR, *ENTRY, "--dim", f"batch={2**62}", "--stage", "llvm"],
        ["dump", LINEAR, "--entry", f"Linear{{{2**40}, {2**40}}}.apply", "--dim", "batch=1"],
    ],
)
def test_sizes_past_any_memory(argv):
    refuse(argv, code="E3012", says="bytes")


def test_sizes_past_this_machines_memory(monkeypatch):
    """batch=4000000000 needs 149 GiB: refused on a 16 GiB machine, naming the dim."""
    monkeypatch.setattr(bindings, "physical_memory", lambda: 16 * 2**30)
    refuse(run("--dim", "batch=4000000000"), code="E3012", says="batch=4000000000")


def test_the_check_counts_arguments_parameters_and_the_largest_value(monkeypatch):
    """At batch=4: x is 4·3 float64s, the parameters 3·2 + 2, the output 4·2: 224 bytes."""
    monkeypatch.setattr(bindings, "physical_memory", lambda: 223)
    refuse(run("--dim", "batch=4"), code="E3012", says="224 bytes")
    monkeypatch.setattr(bindings, "physical_memory", lambda: 224)
    assert run_cli(main, run("--dim", "batch=4")) == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(min_value=2**45, max_value=2**63 - 1))
def test_any_huge_dim_is_refused_before_lowering(batch):
    refuse(
        ["dump", LINEAR, *ENTRY, "--dim", f"batch={batch}", "--stage", "affine"],
        code="E3012",
        says=f"batch={batch}",
    )


@settings(max_examples=40, deadline=None)
@given(value=st.one_of(st.text(max_size=24), st.integers().map(str)))
def test_any_dim_value_is_a_size_or_refused(value):
    """Whatever follows `batch=`: a small size runs, anything else but a size a run could
    take is refused with a code (never a traceback)."""
    digits = re.fullmatch(r"\s*([0-9]+)\s*", value)
    size = int(digits[1]) if digits else None
    assume(size is None or size <= 64 or size >= 2**45)
    argv = run("--dim", f"batch={value}", "--bits", 64)
    if size is not None and 0 < size <= 64:
        assert run_cli(main, argv) == 0
    else:
        refuse(argv)
