"""Training typed parameters with master weights (`presk train --realize @R.json` whose
record has `params`): AdamW's state stays in the backend's type, the forward and backward
read a copy rounded to the record's types, and the kernel evaluator and native code give
the same bits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from programs import REPO

import presk
from presk.cli.common import run_cli
from presk.cli.main import main
from presk.kernel.machine import to_storage
from presk.runtime import pskd
from tests.conformance.suite import corpus

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
ENTRY = "MiniGPT{64, 16, 2, 2}.loss"
DIMS = {"B": 1, "T": 8}
TYPED = {"tok": "bf16", "blocks.ff.up.w": "bf16", "blocks.attn.q.w": "f32"}
STEPS = 6


def _record(path, record: dict) -> str:
    path.write_text(json.dumps(record))
    return f"@{path}"


def _train(out, data: str, realize: str, *flags: str) -> pskd.Container:
    """The tiny MiniGPT trained on `data` under `realize`; its checkpoint."""
    argv = ["train", MINIGPT, "--entry", ENTRY, "--dim", "B=1", "--dim", "T=8", "--quiet"]
    argv += ["--data", data, "--steps", str(STEPS), "--realize", realize, "--out", str(out)]
    assert run_cli(main, [*argv, *flags]) == 0
    return pskd.read(str(out / "checkpoint.psk.d"))


def _same_bits(a: pskd.Container, b: pskd.Container) -> None:
    """Every array of two checkpoints (parameters, m, v) equal bit for bit, and their logs
    but for the time."""
    assert sorted(a.arrays) == sorted(b.arrays)
    for k in a.arrays:
        x, y = np.asarray(a.arrays[k]), np.asarray(b.arrays[k])
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), k
    assert _logged(a) == _logged(b)


def _logged(c: pskd.Container) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in c.meta["history"]]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return corpus(tmp_path_factory.mktemp("data") / "lic8.psk.d")


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return _record(tmp_path_factory.mktemp("record") / "R.json", {"params": TYPED})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data, record):
    base = tmp_path_factory.mktemp("runs")
    return {b: _train(base / b, data, record, "--backend", b) for b in ("kernel", "mlir")}


def test_native_code_trains_typed_parameters_to_the_kernel_evaluators_bits(runs):
    _same_bits(runs["kernel"], runs["mlir"])


def test_the_loss_falls(runs):
    losses = [row["loss"] for row in runs["kernel"].meta["history"]]
    assert len(losses) == STEPS and losses[-1] < losses[0], losses


def test_the_checkpoint_holds_master_parameters_in_f64(runs):
    arrays = runs["kernel"].arrays
    for path, t in TYPED.items():
        master = np.asarray(arrays[f"params/{path}"])
        assert master.dtype == np.float64, path
        rounded = to_storage(master, t).astype(np.float64)
        # nearly every element lies between two numbers of its type: not a rounded copy
        assert np.mean(rounded != master) > 0.9, path


def test_a_resumed_typed_run_is_the_uninterrupted_run(tmp_path, data, record, runs):
    flags = ("--backend", "kernel")
    _train(tmp_path, data, record, *flags, "--stop-at", str(STEPS // 2))
    resumed = _train(tmp_path, data, record, *flags, "--resume", str(tmp_path / "checkpoint.psk.d"))
    _same_bits(resumed, runs["kernel"])


def test_a_record_with_storage_and_params_trains_to_the_same_bits_natively(tmp_path, data):
    # a record as `presk solve` writes it: kernels' storage types by site, and parameters'
    solved = {"storage": {"MLP.apply/%0": "bf16", "LayerNorm.apply/%3": "f32"}}
    realize = _record(tmp_path / "solved.json", {**solved, "params": TYPED})
    kernel = _train(tmp_path / "kernel", data, realize, "--backend", "kernel", "--steps", "2")
    native = _train(tmp_path / "mlir", data, realize, "--backend", "mlir", "--steps", "2")
    _same_bits(kernel, native)
    assert all(np.isfinite(row["loss"]) for row in kernel.meta["history"])


@pytest.fixture(scope="module")
def core():
    return presk.load(MINIGPT).elaborate(ENTRY, dims=DIMS)


def test_a_steps_forward_reads_the_parameters_rounded_to_their_types(core, record):
    tokens = np.arange(8).reshape(1, 8)
    targets = (tokens + 1) % 64
    head = np.random.default_rng(0).normal(0, 0.5, (16, 64))  # the initial head is zeros
    params = {**core.params(), "head": head}
    typed = core.lower(record).compile("kernel")
    step = typed.train_step(params, tokens, targets)
    assert step.loss == float(typed(params, tokens, targets))  # the loss of the rounded copy
    assert step.loss != float(core.lower().compile("kernel")(params, tokens, targets))
    for path in TYPED:  # the update went to the master, in f64
        assert step.params[path].dtype == np.float64
        assert not np.array_equal(step.params[path], params[path]), path


def test_a_training_step_refuses_integer_weights(core, tmp_path):
    record = _record(tmp_path / "Q.json", {"quant": {"head": {"bits": 8, "over": -1}}})
    with pytest.raises(presk.PreskError) as e:
        core.lower(record).compile("kernel").train_step(core.params())
    assert e.value.code == "E7002", e.value.render()
    assert "not integer weights (quant)" in e.value.message
