"""Bad input to `presk solve --step` (and what --step changed for an envelope's solve)."""

from __future__ import annotations

from conftest import REPO

from bad_input.refusal import refuse

MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")
STEP = ["solve", "--step", MLP, "--entry", "Regression.loss", "--dim", "N=4"]


def test_a_step_budget_is_a_positive_relative_number(tmp_path):
    argv = [*STEP, "--weights", "w.npz", "--out", tmp_path / "R.json"]
    for budget in ("0", "-1e-3"):
        refuse([*argv, f"--budget={budget}"], code="E0001", says="is not a positive number")
    refuse([*argv, "--budget-abs", "1e-3"], code="E0001", says="drop --budget-abs")


def test_a_step_needs_trained_parameters(tmp_path):
    argv = [*STEP, "--budget", "1e-3", "--out", tmp_path / "R.json"]
    refuse(argv, code="E0001", says="give --weights")


def test_a_grain_is_function_or_value(tmp_path):
    argv = [*STEP, "--weights", "w.npz", "--budget", "1e-3", "--grain", "bogus"]
    refuse([*argv, "--out", tmp_path / "R.json"], code="E0001", says="invalid choice: 'bogus'")


def test_a_step_reads_no_envelope(tmp_path):
    argv = [*STEP, "--weights", "w.npz", "--budget", "1e-3", "--precision", "env.json"]
    refuse([*argv, "--out", tmp_path / "R.json"], code="E0001", says="drop --precision")


def test_an_envelope_solve_needs_its_envelope(tmp_path):
    argv = ["solve", MLP, "--entry", "Regression.loss", "--budget", "1e-3"]
    refuse([*argv, "--out", tmp_path / "R.json"], code="E0001", says="give --precision")


def test_a_grain_belongs_to_the_step(tmp_path):
    argv = ["solve", MLP, "--entry", "Regression.loss", "--budget", "1e-3", "--grain", "value"]
    argv += ["--precision", "env.json", "--out", tmp_path / "R.json"]
    refuse(argv, code="E0001", says="--grain belongs to a training step's solve: give --step")
    argv[argv.index("--grain") : argv.index("--grain") + 2] = ["--warmup", "3"]
    refuse(argv, code="E0001", says="--warmup belongs to a training step's solve")
