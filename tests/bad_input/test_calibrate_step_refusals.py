"""Bad input to `presk calibrate --step` (and what --step changed for --precision)."""

from __future__ import annotations

import json

from conftest import REPO

from bad_input.refusal import refuse

MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")
ENTRY = ["--entry", "Regression.loss", "--dim", "N=4"]


def test_a_step_needs_trained_parameters():
    refuse(["calibrate", "--step", MLP, *ENTRY], code="E0001", says="give --weights")


def test_a_step_writes_no_file(tmp_path):
    argv = ["calibrate", "--step", MLP, *ENTRY, "--weights", "w.npz", "--out", tmp_path / "x"]
    refuse(argv, code="E0001", says="drop --out")


def test_precision_and_step_are_two_measurements():
    argv = ["calibrate", "--precision", "--step", MLP, *ENTRY]
    refuse(argv, code="E0001", says="not allowed with argument")


def test_an_envelope_needs_its_file():
    refuse(["calibrate", "--precision", MLP, *ENTRY], code="E0001", says="give --out")


def test_a_step_cannot_update_integer_weights(tmp_path):
    record = tmp_path / "R.json"
    record.write_text(json.dumps({"quant": {"l1.w": {"bits": 8}}}))
    argv = ["calibrate", "--step", MLP, *ENTRY, "--weights", "unread.npz"]
    refuse([*argv, "--realize", f"f32,@{record}"], code="E7002", says="integer weights")


def test_a_learning_rate_of_zero_moves_nothing():
    argv = ["calibrate", "--step", MLP, *ENTRY, "--weights", "unread.npz", "--lr", "0"]
    refuse(argv, code="E0001", says="'0' is not a positive finite learning rate")


def test_a_step_under_no_realization():
    argv = ["calibrate", "--step", MLP, *ENTRY, "--weights", "unread.npz", "--realize", ","]
    refuse(argv, code="E0001", says="name at least one realization")
