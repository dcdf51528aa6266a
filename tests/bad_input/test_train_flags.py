"""`presk train` flags it cannot take, and checkpoints whose training meta is malformed.

The checkpoint cases edit only the meta in a real checkpoint's header.json (the header
has no checksum of itself, so nothing else needs recomputing) and resume it in-process.
"""

from __future__ import annotations

import copy
import json
import shutil

import pytest
from programs import REPO

from bad_input.refusal import refuse
from presk.cli.common import run_cli
from presk.cli.main import main

REGRESSION = str(REPO / "tests" / "train" / "mlp_regression.psk")
RUN = [REGRESSION, "--dim", "N=4", "--backend", "interp", "--bits", "64", "--steps", "4", "--quiet"]


def train(*flags) -> list[str]:
    return ["train", *RUN, *map(str, flags)]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A checkpoint of RUN stopped at step 2 of 4, and its header.json's meta."""
    out = tmp_path_factory.mktemp("stopped")
    assert run_cli(main, train("--out", out, "--stop-at", "2")) == 0
    path = out / "checkpoint.psk.d"
    return path, json.loads((path / "header.json").read_text())["meta"]


def edited(stopped, tmp_path, edit):
    """A copy of the stopped checkpoint whose meta `edit` changed in place."""
    source, meta = stopped
    path = tmp_path / "checkpoint.psk.d"
    shutil.copytree(source, path)
    header = json.loads((path / "header.json").read_text())
    header["meta"] = copy.deepcopy(meta)
    edit(header["meta"])
    (path / "header.json").write_text(json.dumps(header))
    return path


@pytest.mark.parametrize("stop", ["-1", "0"])
def test_stop_at_names_a_step(stop, tmp_path):
    refuse(train("--out", tmp_path, "--stop-at", stop), code="E0001", says=f"--stop-at: '{stop}'")


# A flag's value outside what training can take: refused while the flags are read.
BAD_VALUES = [
    ("--steps", "0"),
    ("--epochs", "0"),
    ("--batch", "0"),
    ("--warmup", "-1"),
    ("--log-every", "0"),
    ("--checkpoint-every", "-2"),
    ("--lr", "nan"),
    ("--lr", "inf"),
    ("--lr", "-0.1"),
    ("--weight-decay", "-1"),
    ("--clip", "0"),
    ("--clip", "nan"),
    ("--seed", "-1"),
]


@pytest.mark.parametrize("flag, value", BAD_VALUES, ids=[f"{f}={v}" for f, v in BAD_VALUES])
def test_a_training_flag_out_of_range_is_refused(flag, value, tmp_path):
    refuse(train("--out", tmp_path, f"{flag}={value}"), code="E0001", says=f"argument {flag}")


def test_stop_at_a_step_the_checkpoint_has_passed(stopped, tmp_path):
    refuse(
        train("--out", tmp_path, "--resume", stopped[0], "--stop-at", "2"),
        code="E0001",
        says="already at step 2",
    )


def test_resuming_a_finished_run(stopped, tmp_path):
    path = edited(stopped, tmp_path, lambda meta: meta.update(step=4))
    refuse(train("--out", tmp_path, "--resume", path), code="E0001", says="nothing is left")


@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_resume_refuses_another_realization(stopped, realize, tmp_path):
    refuse(
        train("--out", tmp_path, "--resume", stopped[0], "--realize", realize),
        code="E9005",
        says="realize",
    )


def _set(*keys_and_value):
    """An edit setting meta[k1][k2]... to the last argument."""
    *keys, value = keys_and_value

    def edit(meta):
        for k in keys[:-1]:
            meta = meta[k]
        meta[keys[-1]] = value

    return edit


def _drop(*keys):
    def edit(meta):
        for k in keys[:-1]:
            meta = meta[k]
        del meta[keys[-1]]

    return edit


def _repeat_first_row(meta):
    meta["history"].append({**meta["history"][0], "step": 1})


MALFORMED = {
    "step a string": (_set("step", "2"), "'step'"),
    "step a float": (_set("step", 2.0), "'step'"),
    "step a boolean": (_set("step", True), "'step'"),
    "step zero": (_set("step", 0), "'step'"),
    "step past the run": (_set("step", 9), "past the run's 4 steps"),
    "step missing": (_drop("step"), "'step'"),
    "history missing": (_drop("history"), "'history'"),
    "history an object": (_set("history", {}), "'history'"),
    "history empty": (_set("history", []), "'history'"),
    "row not an object": (_set("history", 0, 5), "['history'][0]"),
    "row without a loss": (_drop("history", 0, "loss"), "'loss'"),
    "row loss a string": (_set("history", 0, "loss", "0.5"), "['loss']"),
    "row step zero": (_set("history", 0, "step", 0), "['step']"),
    "row with another field": (_set("history", 0, "extra", 1), "extra"),
    "rows out of order": (_repeat_first_row, "follows"),
    "row past the step": (_set("history", -1, "step", 3), "past the checkpoint's step 2"),
    "steps a string": (_set("steps", "4"), "'steps'"),
    "seed a float": (_set("seed", 0.5), "'seed'"),
    "bits below 2": (_set("bits", 1), "'bits'"),
    "dims a string": (_set("dims", "N=4"), "'dims'"),
    "realize a string": (_set("realize", "f64"), "'realize'"),
    "realize of another type": (_set("realize", "default", "f16"), "'default'"),
    "realize with an unknown field": (_set("realize", "bits", 3), "bits"),
    "hyper missing": (_drop("hyper"), "'hyper'"),
    "hyper lr a string": (_set("hyper", "lr", "0.01"), "'lr'"),
    "hyper warmup negative": (_set("hyper", "warmup", -1), "'warmup'"),
    "hyper without clip": (_drop("hyper", "clip"), "'clip'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_training_meta(stopped, case, tmp_path):
    edit, says = MALFORMED[case]
    path = edited(stopped, tmp_path, edit)
    line = refuse(train("--out", tmp_path / "out", "--resume", path), code="E9002", says=says)
    assert "header.json" in line, line


def test_init_and_resume_together_are_refused(stopped, tmp_path):
    refuse(train("--out", tmp_path, "--init", stopped[0], "--resume", stopped[0]), code="E0001")


def test_init_from_a_missing_file_is_refused(tmp_path):
    refuse(train("--out", tmp_path, "--init", tmp_path / "absent.npz"), code="E0002")
