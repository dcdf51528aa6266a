"""presk solve refuses a budget it cannot aim at (≤ 0, NaN, not a number: E0001), an
envelope of another program or bindings (E7004) or a malformed one (E7003), an
--exhaustive search too large to enumerate (E0001), held-out samples that are not there
(an envelope without --data, a data file too short: E3011), and an --out it will not
write (E0003), each before it measures anything; and, after its sweep, sensitivities
that are vacuous (exactly 0 at initialised parameters) without --force (E3013)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bad_input.refusal import refuse
from presk.cli.main import main

REPO = Path(__file__).resolve().parent.parent.parent
MLP = str(REPO / "tests/train/mlp_regression.psk")
LOSS = ["--entry", "Regression.loss", "--dim", "N=4"]
MINIGPT_FILE = str(REPO / "tutorial/05_minigpt.psk")
MINIGPT = ["--entry", "MiniGPT{64, 16, 2, 2}.loss", "--dim", "B=1", "--dim", "T=8"]


@pytest.fixture(scope="module")
def envelope(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("env") / "mlp.json")
    argv = ["calibrate", "--precision", MLP, *LOSS, "--bits", "64", "--samples", "1"]
    assert main([*argv, "--workers", "1", "--out", path]) == 0
    return path


def solve(env: str, out: str, *flags: str, sizes: list[str] = LOSS) -> list[str]:
    return ["solve", MLP, *sizes, "--precision", env, "--workers", "1", "--out", out, *flags]


@pytest.mark.parametrize("budget", ["0", "-1e-3", "nan", "inf", "tight"])
def test_a_budget_that_is_not_a_positive_number(envelope, tmp_path, budget):
    out = str(tmp_path / "r.json")
    refuse(solve(envelope, out, "--budget", budget), code="E0001", says="--budget")
    refuse(solve(envelope, out, "--budget-abs", budget), code="E0001", says="--budget-abs")


def test_no_budget(envelope, tmp_path):
    refuse(solve(envelope, str(tmp_path / "r.json")), code="E0001", says="--budget")


def test_an_envelope_of_other_bindings(envelope, tmp_path):
    sizes = ["--entry", "Regression.loss", "--dim", "N=5"]
    refuse(
        solve(envelope, str(tmp_path / "r.json"), "--budget", "1e-3", sizes=sizes),
        code="E7004",
        says="--dim",
    )


def test_an_envelope_of_another_program(envelope, tmp_path):
    other = tmp_path / "mlp.psk"
    other.write_text(Path(MLP).read_text() + "\n# changed\n")
    argv = solve(envelope, str(tmp_path / "r.json"), "--budget", "1e-3")
    argv[1] = str(other)
    refuse(argv, code="E7004", says="another program")


def test_weights_that_are_not_the_envelopes(envelope, tmp_path):
    flags = ("--budget", "1e-3", "--weights", str(tmp_path / "w.npz"))
    refuse(solve(envelope, str(tmp_path / "r.json"), *flags), code="E7004", says="weights")


def test_a_malformed_envelope(envelope, tmp_path):
    edited = tmp_path / "edited.json"
    value = json.loads(Path(envelope).read_text())
    next(iter(value["sites"].values()))["rounding"] = {"f32": 0}
    edited.write_text(json.dumps(value))
    refuse(solve(str(edited), str(tmp_path / "r.json"), "--budget", "1e-3"), code="E7003")


def test_an_exhaustive_search_too_large(envelope, tmp_path):
    # the regression offers 15 values at --min-gain 0: 3^15 assignments, past 3^12
    flags = ("--budget", "1e-3", "--exhaustive", "--min-gain", "0")
    refuse(solve(envelope, str(tmp_path / "r.json"), *flags), code="E0001", says="3^15")


def test_out_a_directory(envelope, tmp_path):
    refuse(solve(envelope, str(tmp_path), "--budget", "1e-3"), code="E0003")


@pytest.mark.parametrize("flag", [["--narrow", "heldout"], ["--heldout", "2"]])
def test_held_out_samples_of_an_envelope_without_data(envelope, tmp_path, flag):
    argv = solve(envelope, str(tmp_path / "r.json"), "--budget", "1e-3", *flag)
    refuse(argv, code="E3011", says="inputs were drawn")


def test_held_out_samples_past_the_end_of_the_data_file(tmp_path):
    data = str(tmp_path / "text.psk.d")
    text = str(REPO / "corpus/nlp/data/GPL-1.txt")
    assert main(["data", text, "--window", "8", "--out", data]) == 0
    env = str(tmp_path / "env.json")
    argv = ["calibrate", "--precision", MINIGPT_FILE, *MINIGPT, "--data", data, "--bits", "64"]
    assert main([*argv, "--samples", "1", "--workers", "1", "--out", env]) == 0
    flags = ("--budget", "1e-3", "--heldout", "100000")
    argv = ["solve", MINIGPT_FILE, *MINIGPT, "--precision", env, "--out", str(tmp_path / "r.json")]
    refuse([*argv, *flags], code="E3011", says="--heldout 100000: held-out sample 100000")


@pytest.mark.parametrize(
    "flags, says",
    [(["--heldout", "0"], "not a positive whole number"), (["--narrow", "wider"], "choice")],
)
def test_held_out_and_narrow_flags_presk_cannot_take(envelope, tmp_path, flags, says):
    argv = solve(envelope, str(tmp_path / "r.json"), "--budget", "1e-3", *flags)
    refuse(argv, code="E0001", says=says)


def test_a_vacuous_solve_without_force(tmp_path):
    # the tiny MiniGPT's head is zero at initialisation: every value upstream of it has a
    # sensitivity of exactly 0, so the estimate would narrow them all for nothing
    env = str(tmp_path / "env.json")
    argv = ["calibrate", "--precision", MINIGPT_FILE, *MINIGPT, "--bits", "64", "--samples", "1"]
    assert main([*argv, "--workers", "1", "--out", env]) == 0
    out = tmp_path / "r.json"
    argv = ["solve", MINIGPT_FILE, *MINIGPT, "--precision", env, "--budget", "1e-3", "--out", out]
    line = refuse(argv, code="E3013", says="the solve is vacuous: 31 of the 33 values offered")
    assert line.endswith("or give --force") and not out.exists()
