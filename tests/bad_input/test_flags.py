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


# Flags that don't guess (issue 34): `--step 5 --check 2` ran as `--steps 5
# --checkpoint-every 2`; now a flag is taken only as spelled, and what is not known is
# refused with the nearest name.
MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["train", MLP, "--step", "5"],
            "arguments: --step 5; did you mean --steps? (see presk train",
        ),
        (
            ["train", MLP, "--step", "5", "--check", "2"],
            "arguments: --step 5 --check 2; did you mean --steps for --step, "
            "--checkpoint-every for --check?",
        ),
        (run("--dim", "batch=4", "--weig", "w.npz"), "--weig w.npz; did you mean --weights?"),
        (run("--dim", "batch=4", "--realise", "f32"), "--realise f32; did you mean --realize?"),
        (["--verison"], "arguments: --verison; did you mean --version? (see presk --help)"),
    ],
)
def test_a_flag_is_taken_only_as_spelled(argv, says):
    refuse(argv, code="E0001", says=says)


def test_presk_opt_takes_no_abbreviation():
    refuse(["--list-pass"], code="E0001", says="did you mean --list-passes?", tool="presk-opt")


def test_a_flag_spelled_with_its_value_runs(capsys):
    assert run_cli(main, ["run", LINEAR, "--entry=Linear{3, 2}.apply", "--dim=batch=2"]) == 0
    assert "ℝ[batch: 2, 2]" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("entry", "near"),
    [
        ("Linear{3, 2}.aply", "Linear{3, 2}.apply"),
        ("Linaer{3, 2}.apply", "Linear{3, 2}.apply"),
        ("Linear{3, 2}.aply.grad", "Linear{3, 2}.apply.grad"),
    ],
)
def test_an_unknown_entry_names_the_nearest(entry, near):
    first = refuse(["run", LINEAR, "--entry", entry, "--dim", "batch=4"], code="E3001")
    assert f"no entry '{entry}'; did you mean '{near}'? (entries: " in first, first


def test_a_bare_function_name_is_matched_against_every_function():
    minigpt = str(REPO / "tutorial" / "05_minigpt.psk")
    refuse(["run", minigpt, "--entry", "lss"], code="E3001", says="did you mean 'loss'?")


def test_an_entry_near_nothing_lists_the_entries_alone():
    first = refuse(["run", LINEAR, "--entry", "zzz", "--dim", "batch=4"], code="E3001")
    assert "did you mean" not in first and "(entries: Linear{In, Out}.apply" in first, first


def test_a_missing_program_names_the_nearest_file():
    typo = str(REPO / "tutorial" / "01_lineer.psk")
    first = refuse(["run", typo, *ENTRY], code="E0002")
    assert first.endswith(f"cannot read {typo}: no such file; did you mean {LINEAR}?"), first


def test_missing_weights_and_inputs_say_no_such_file(tmp_path):
    (tmp_path / "p.npz").write_bytes(b"")
    says = f"cannot read {tmp_path / 'q.npz'}: no such file; did you mean {tmp_path / 'p.npz'}?"
    refuse(run("--dim", "batch=4", "--weights", tmp_path / "q.npz"), code="E0002", says=says)
    refuse(run("--dim", "batch=4", "--inputs", tmp_path / "q.npz"), code="E0002", says=says)
    nothing_near = tmp_path / "none" / "x.npz"
    first = refuse(run("--dim", "batch=4", "--weights", nothing_near), code="E0002")
    assert first.endswith(f"cannot read {nothing_near}: no such file"), first


@pytest.fixture
def run_folder(tmp_path):
    """A folder as `presk train --out` leaves it: its last and best checkpoints inside
    (empty: the refusal comes before any is read)."""
    folder = tmp_path / "run"
    for name in ("checkpoint.psk.d", "best.psk.d"):
        (folder / name).mkdir(parents=True)
    (folder / "log.csv").write_text("")
    return folder


@pytest.mark.parametrize("entry", [ENTRY, []])  # the checkpoint read for its bindings too
def test_a_run_folder_names_its_checkpoints(run_folder, entry):
    argv = ["run", LINEAR, *entry, "--dim", "batch=4", "--weights", run_folder]
    first = refuse(argv, code="E9001")
    inside = f"{run_folder}/checkpoint.psk.d or {run_folder}/best.psk.d"
    assert first.endswith(f"{run_folder}: the folder of a run, not a checkpoint; give {inside}")


def test_a_missing_checkpoint_names_the_nearest(run_folder):
    typo = run_folder / "checkpoint"
    near = run_folder / "checkpoint.psk.d"
    refuse(
        run("--dim", "batch=4", "--weights", typo),
        code="E9001",
        says=f"cannot read {typo}: no such file; did you mean {near}?",
    )
