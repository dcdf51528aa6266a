"""presk check --precision refuses what it cannot bound: an envelope measured on another
program, entry or bindings (E7004), a truncated or hand-edited envelope (E7003), an
unknown --model (E0001), an envelope file that is not there (E0002)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bad_input.refusal import refuse
from presk.cli.main import main

REPO = Path(__file__).resolve().parent.parent.parent
NORMS = str(REPO / "tutorial/04_norms.psk")
LAYER = ["--entry", "LayerNorm{8}.apply", "--dim", "B=2", "--dim", "T=4"]


@pytest.fixture(scope="module")
def envelope(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("env") / "ln.json")
    argv = ["calibrate", "--precision", NORMS, *LAYER, "--bits", "64", "--samples", "1"]
    assert main([*argv, "--workers", "1", "--out", path]) == 0
    return path


def check(env: str, program: str = NORMS, sizes: list[str] = LAYER, *flags: str) -> list[str]:
    return ["check", "--precision", env, program, *sizes, *flags]


def test_another_program(envelope, tmp_path):
    other = tmp_path / "norms.psk"
    other.write_text(Path(NORMS).read_text() + "\n# changed\n")
    refuse(check(envelope, str(other)), code="E7004", says="another program")


def test_another_entry(envelope):
    sizes = ["--entry", "RMSNorm{8}.apply", "--dim", "B=2", "--dim", "T=4"]
    refuse(check(envelope, NORMS, sizes), code="E7004", says="entry")


def test_other_bindings(envelope):
    sizes = ["--entry", "LayerNorm{8}.apply", "--dim", "B=2", "--dim", "T=5"]
    refuse(check(envelope, NORMS, sizes), code="E7004", says="--dim")


def test_a_truncated_envelope(envelope, tmp_path):
    cut = tmp_path / "cut.json"
    text = Path(envelope).read_text()
    cut.write_text(text[: len(text) // 2])
    refuse(check(str(cut)), code="E7003")


def test_a_hand_edited_envelope(envelope, tmp_path):
    edited = tmp_path / "edited.json"
    value = json.loads(Path(envelope).read_text())
    next(iter(value["sites"].values()))["magnitude"] = "large"
    edited.write_text(json.dumps(value))
    refuse(check(str(edited)), code="E7003", says="magnitude")


def test_an_unknown_model(envelope):
    refuse(check(envelope, NORMS, LAYER, "--model", "exact"), code="E0001", says="--model")


def test_a_missing_envelope(tmp_path):
    refuse(check(str(tmp_path / "none.json")), code="E0002")
