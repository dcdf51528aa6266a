"""Checkpoints carry their bindings everywhere (issue 34): each command that takes a
program and `--weights` reads the entry, consts and dims a `presk train` checkpoint
records, as `run` and `eval` do (presk/cli/recorded.py), so `--weights CKPT` alone does
what the flags spelled out do; `bench` and `check` run with those parameters, `plan`
takes the bindings alone."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from conftest import assert_user_error, run_in_process
from programs import REPO

from presk.cli.recorded import apply_checkpoint

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
CONSTS = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
DIMS = ["--dim", "B=2", "--dim", "T=8"]  # as the checkpoint records them
SPELLED = ["--entry", "loss", *CONSTS, *DIMS]


def presk(*argv) -> str:
    """stdout of a presk command line that must succeed."""
    proc = run_in_process("presk", *map(str, argv))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[str, str]:
    """(data file, checkpoint) of 2 MiniGPT steps in f32 on the kernel evaluator, on
    windows of 8 tokens: the checkpoint records the entry `loss`, V, D, H, L, T, B, f32
    and the data."""
    out = tmp_path_factory.mktemp("run")
    data = out / "d8.psk.d"
    texts = sorted(str(p) for p in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    presk("data", *texts, "--window", "8", "--out", data)
    presk("train", MINIGPT, *SPELLED, "--data", data, "--steps", "2", "--backend", "kernel",
          "--realize", "f32", "--out", out, "--quiet")  # fmt: skip
    return str(data), str(out / "checkpoint.psk.d")


@pytest.fixture(scope="module")
def envelope(trained, tmp_path_factory) -> str:
    """The envelope of `calibrate --precision` on the checkpoint alone, one sample."""
    data, ckpt = trained
    path = tmp_path_factory.mktemp("env") / "env.json"
    presk("calibrate", "--precision", MINIGPT, "--weights", ckpt, "--data", data,
          "--samples", 1, "--bits", 64, "--workers", 1, "--out", path)  # fmt: skip
    return str(path)


@pytest.fixture(scope="module")
def solved(trained, envelope, tmp_path_factory) -> str:
    """The record of `solve` on the checkpoint alone."""
    path = tmp_path_factory.mktemp("solved") / "R.json"
    presk("solve", MINIGPT, "--precision", envelope, "--weights", trained[1],
          "--budget", "1e-3", "--workers", 1, "--out", path)  # fmt: skip
    return str(path)


def test_calibrate(trained, envelope, tmp_path):
    data, ckpt = trained
    spelled = tmp_path / "env.json"
    presk("calibrate", "--precision", MINIGPT, *SPELLED, "--weights", ckpt, "--data", data,
          "--samples", 1, "--bits", 64, "--workers", 1, "--out", spelled)  # fmt: skip
    bare, given = (json.loads(open(p).read()) for p in (envelope, spelled))
    assert bare["meta"]["dims"] == {"B": 2, "T": 8}
    assert bare["meta"]["consts"] == {"D": 16, "H": 2, "L": 2, "V": 64}
    assert bare == given


def test_check_bounds_the_recorded_realization(trained, envelope):
    ckpt = trained[1]
    bare = presk("check", "--precision", envelope, MINIGPT, "--weights", ckpt)
    given = presk("check", "--precision", envelope, MINIGPT, *SPELLED, "--realize", "f32",
                  "--weights", ckpt)  # fmt: skip
    assert bare == given
    assert "under f32\n" in bare and f"weights {ckpt}" in bare


def test_check_refuses_other_weights_than_the_envelopes(trained, envelope, tmp_path):
    other = tmp_path / "p.npz"
    presk("params", MINIGPT, "--weights", trained[1], "--out", other)
    proc = run_in_process("presk", "check", "--precision", envelope, MINIGPT, *SPELLED,
                          "--weights", str(other))  # fmt: skip
    first = assert_user_error(proc, "E7004")
    assert f"measured on weights {trained[1]}, not {other}" in first, first


def test_solve(trained, envelope, solved, tmp_path):
    given = tmp_path / "R.json"
    presk("solve", MINIGPT, *SPELLED, "--precision", envelope, "--weights", trained[1],
          "--budget", "1e-3", "--workers", 1, "--out", given)  # fmt: skip
    assert json.loads(open(solved).read()) == json.loads(given.read_text())


def test_explain(trained, solved):
    ckpt, record = trained[1], "@" + solved
    bare = presk("explain", MINIGPT, "--realize", record, "--weights", ckpt)
    assert bare == presk("explain", MINIGPT, *SPELLED, "--realize", record, "--weights", ckpt)
    assert bare.startswith(f"presk explain: `loss` of {MINIGPT} under {record}"), bare


def test_bisect(trained):
    ckpt, flags = trained[1], ["--realize", "bf16", "--bits", 64]
    bare = presk("bisect", MINIGPT, "--weights", ckpt, *flags)
    assert bare == presk("bisect", MINIGPT, *SPELLED, "--weights", ckpt, *flags)


def test_margins_reads_the_recorded_modules_logits_on_its_data(trained):
    data, ckpt = trained
    flags = ["--samples", 1, "--workers", 1, "--bits", 64]
    bare = presk("margins", MINIGPT, "--weights", ckpt, *flags)
    given = presk("margins", MINIGPT, "--entry", "MiniGPT.apply", *CONSTS, *DIMS,
                  "--data", data, "--weights", ckpt, *flags)  # fmt: skip
    assert bare == given
    assert bare.startswith("presk margins: `MiniGPT.apply` of"), bare


def test_export(trained, tmp_path):
    ckpt = trained[1]
    presk("export", MINIGPT, "--weights", ckpt, "--out", tmp_path / "bare")
    presk("export", MINIGPT, *SPELLED, "--realize", "f32", "--weights", ckpt,
          "--out", tmp_path / "given")  # fmt: skip
    files = sorted(p.name for p in (tmp_path / "given").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "bare").iterdir())
    for name in files:
        assert (tmp_path / "bare" / name).read_bytes() == (tmp_path / "given" / name).read_bytes()


def test_params(trained, tmp_path):
    ckpt = trained[1]
    presk("params", MINIGPT, "--weights", ckpt, "--out", tmp_path / "bare.npz")
    presk("params", MINIGPT, *SPELLED, "--weights", ckpt, "--out", tmp_path / "given.npz")
    with np.load(tmp_path / "bare.npz") as bare, np.load(tmp_path / "given.npz") as given:
        assert sorted(bare.files) == sorted(given.files)
        for name in bare.files:
            np.testing.assert_array_equal(bare[name], given[name])


def test_bench_runs_the_checkpoints_parameters(trained, tmp_path):
    ckpt = trained[1]
    timed = json.loads(presk("bench", MINIGPT, "--weights", ckpt, "--backends", "kernel",
                             "--repeat", 1, "--format", "json"))  # fmt: skip
    assert timed["kernel"]["realize"] == "f32"
    # parameters of another D: read, so refused, as run refuses them
    other = tmp_path / "d8.npz"
    presk("params", MINIGPT, "--entry", "loss", "--const", "V=64", "--const", "D=8",
          "--const", "H=2", "--const", "L=2", *DIMS, "--out", other)  # fmt: skip
    proc = run_in_process("presk", "bench", MINIGPT, *SPELLED, "--weights", str(other),
                          "--backends", "kernel", "--repeat", "1")  # fmt: skip
    assert "array tok has shape [64, 8]" in assert_user_error(proc, "E9005")


def test_plan_takes_the_bindings(trained):
    ckpt = trained[1]
    bare = presk("plan", MINIGPT, "--weights", ckpt, "--train-step")
    assert bare == presk("plan", MINIGPT, *SPELLED, "--realize", "f32", "--train-step")
    assert json.loads(bare)["realize"] == "f32"


def test_a_realize_naming_what_is_measured_is_left_alone(trained):
    """calibrate --step's --realize lists the realizations it measures, explain's is the
    record it reads: the checkpoint's f32 fills neither."""
    args = argparse.Namespace(file=MINIGPT, entry=None, const=None, dim=None, realize=None)
    apply_checkpoint(args, trained[1], realize=False)
    assert (args.entry, args.realize) == ("loss", None)
    apply_checkpoint(args, trained[1])
    assert args.realize == "f32"
