"""`presk entries FILE` lists every entry with its consts, arguments, result and dims;
a command left without --entry takes its one obvious entry, else lists them (E3001)."""

from __future__ import annotations

import json

from conftest import assert_user_error, run_in_process
from programs import REPO

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
GPT = str(REPO / "corpus" / "nlp" / "05_gpt.psk")
REGRESSION = str(REPO / "tests" / "train" / "mlp_regression.psk")


def entries(*argv) -> str:
    proc = run_in_process("presk", "entries", *argv)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_minigpt_entries():
    lines = entries(MINIGPT).splitlines()
    assert lines[:2] == [
        "LayerNorm{D}.apply(x : ℝ[B, T, D]) -> ℝ[B, T, D]   dims B, T",
        "Linear{In, Out}.apply(x : ℝ[B, T, In]) -> ℝ[B, T, Out]   dims B, T",
    ]
    assert "MiniGPT{V, D, H, L}.loss_grad = grad(loss)   dims B, T" in lines
    assert "MiniGPT{V, D, H, L}.next_token(tokens : nat{V}[B, T]) -> nat[B, T]   dims B, T" in lines
    assert lines[-1] == "adamw.schedule(t : ℝ, peak : ℝ, warmup : ℝ, total : ℝ) -> ℝ   (prelude)"


def test_gpt_entries():
    lines = entries(GPT).splitlines()
    loss = "GPT{D, H, L}.loss(tokens : nat{256}[B, T], targets : nat{256}[B, T]) -> ℝ   dims B, T"
    assert loss in lines
    assert "GPT{D, H, L}.apply(tokens : nat{256}[B, T]) -> ℝ[B, T, 256]   dims B, T" in lines


def test_entries_as_json_with_a_dims_default():
    found = json.loads(entries(REGRESSION, "--format", "json"))["entries"]
    loss = next(e for e in found if e["entry"] == "Regression.loss")
    assert loss == {
        "entry": "Regression.loss",
        "module": "Regression",
        "consts": [],
        "function": "loss",
        "arguments": [{"name": "x", "type": "ℝ[N, 3]"}],
        "result": "ℝ",
        "alias": None,
        "dims": [{"name": "N", "default": 32}],
        "prelude": False,
    }
    assert [e["prelude"] for e in found].count(True) == 3  # adamw's step, clip, schedule


def test_a_missing_entry_lists_entries_with_their_dims():
    proc = run_in_process("presk", "run", MINIGPT, "--dim", "B=2", "--dim", "T=8")
    first = assert_user_error(proc, "E3001")
    assert "MiniGPT{V, D, H, L}.loss (dims B, T)" in first, first
    assert "`presk entries FILE`" in first


def test_run_takes_the_one_apply_whose_consts_are_given():
    """Regression.apply has no consts, Dense{In, Out}.apply's are not given: run takes the
    first, as `--entry apply` would."""
    proc = run_in_process("presk", "run", REGRESSION, "--dim", "N=2", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["entry"] == "Regression.apply"
    given = run_in_process(
        "presk", "run", REGRESSION, "--entry", "Regression.apply", "--dim", "N=2"
    )
    bare = run_in_process("presk", "run", REGRESSION, "--dim", "N=2")
    assert bare.stdout == given.stdout


def test_an_apply_whose_consts_are_missing_is_not_taken():
    proc = run_in_process("presk", "run", MINIGPT, "--dim", "B=2", "--dim", "T=8")
    assert_user_error(proc, "E3001")
    consts = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
    proc = run_in_process("presk", "run", MINIGPT, *consts, "--dim", "B=1", "--dim", "T=8")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ℝ[B: 1, T: 8, 64]")
