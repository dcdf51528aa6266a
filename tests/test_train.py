"""presk train, presk data and presk eval on the reference."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest
from conftest import assert_user_error, run_in_process
from programs import REPO

from presk.runtime import pskd

REGRESSION = str(REPO / "tests" / "train" / "mlp_regression.psk")
MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2", "--dim", "T=8"]
LOG = re.compile(
    r"^step (\d+)  epoch (\d+)  loss (\d+\.\d{6})  lr (\d\.\d{3}e-?\d+)  \|g\| (\d\.\d{4}e-?\d+)$"
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "lic8.psk.d"
    texts = sorted(str(p) for p in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    proc = run_in_process("presk", "data", *texts, "--window", "8", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return str(out)


def test_regression_loss_falls_tenfold_in_200_steps(tmp_path):
    proc = run_in_process(
        "presk",
        "train",
        REGRESSION,
        "--backend",
        "interp",
        "--steps",
        "200",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((tmp_path / "log.csv").open()))
    first, last = float(rows[0]["loss"]), float(rows[-1]["loss"])
    assert last * 10 <= first, (first, last)
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_minigpt_trains_20_steps_on_the_reference_in_the_seed_log_format(tmp_path, corpus):
    proc = run_in_process(
        "presk",
        "train",
        MINIGPT,
        "--entry",
        "loss",
        *TINY,
        "--dim",
        "B=2",
        "--data",
        corpus,
        "--backend",
        "interp",
        "--steps",
        "20",
        "--log-every",
        "5",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert [int(LOG.match(line).group(1)) for line in lines] == [1, 5, 10, 15, 20], lines
    assert float(LOG.match(lines[0]).group(3)) == pytest.approx(
        np.log(64), abs=1e-6
    )  # the zero head
    assert float(LOG.match(lines[-1]).group(3)) < float(LOG.match(lines[0]).group(3))
    c = pskd.read(str(tmp_path / "checkpoint.psk.d"))
    assert c.meta["step"] == 20
    assert any(k.startswith("m/") for k in c.arrays) and any(k.startswith("v/") for k in c.arrays)
    assert c.arrays["params/head"].dtype == object  # the reference's numbers, every digit kept
    evaluated = run_in_process(
        "presk",
        "eval",
        MINIGPT,
        *TINY,
        "--dim",
        "B=16",
        "--data",
        corpus,
        "--weights",
        str(tmp_path / "checkpoint.psk.d"),
        "--backend",
        "interp",
        "--bits",
        "64",
        "--batches",
        "2",
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert evaluated.stdout.startswith("validation loss ")


def logged(rows: list[dict]) -> list[tuple]:
    """A log's rows without their timings, as numbers (an epoch only with data)."""
    fields = ("step", "epoch", "loss", "lr", "grad_norm")
    return [tuple(float(r[k]) for k in fields if r.get(k) not in (None, "")) for r in rows]


def test_resuming_reproduces_the_uninterrupted_run_bit_for_bit(tmp_path):
    # every third step logged: the stop (5) and the first resumed step (6) are not
    base = ["train", REGRESSION, "--steps", "10", "--log-every", "3", "--quiet"]
    base += ["--backend", "interp"]
    base += ["--dim", "N=8", "--bits", "128"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert run_in_process("presk", *base, "--out", str(whole)).returncode == 0
    assert run_in_process("presk", *base, "--out", str(part), "--stop-at", "5").returncode == 0
    stopped = pskd.read(str(part / "checkpoint.psk.d"))
    assert stopped.meta["step"] == 5
    resumed = run_in_process(
        "presk", *base, "--out", str(part), "--resume", str(part / "checkpoint.psk.d")
    )
    assert resumed.returncode == 0, resumed.stderr
    a, b = pskd.read(str(whole / "checkpoint.psk.d")), pskd.read(str(part / "checkpoint.psk.d"))
    assert a.meta["step"] == b.meta["step"] == 10
    assert sorted(a.arrays) == sorted(b.arrays)
    assert any(k.startswith("m/") for k in a.arrays) and any(k.startswith("v/") for k in a.arrays)
    for k in a.arrays:
        x, y = a.arrays[k], b.arrays[k]
        assert x.dtype == object and y.dtype == object
        assert all(
            p == q and p.precision == q.precision for p, q in zip(x.flat, y.flat, strict=True)
        ), k
    assert [r[0] for r in logged(a.meta["history"])] == [1, 3, 6, 9, 10]
    assert logged(a.meta["history"]) == logged(b.meta["history"])
    csvs = [list(csv.DictReader((d / "log.csv").open())) for d in (whole, part)]
    assert logged(csvs[0]) == logged(csvs[1]) == logged(a.meta["history"])
    # a checkpoint of another run's setup is refused
    other = run_in_process(
        "presk",
        *base[:-2],
        "--bits",
        "64",
        "--out",
        str(tmp_path / "o"),
        "--resume",
        str(part / "checkpoint.psk.d"),
    )
    assert_user_error(other, code="E9005")


@pytest.mark.parametrize("backend", ["kernel", "mlir"])
def test_a_diverging_run_is_logged_then_stopped(tmp_path, backend):
    """A learning rate of 1e30 makes the f32 loss infinite at step 2: its line is printed
    and its row written to log.csv, then the run stops with E8004 naming the step, and
    nothing else is said (an overflow is a value, not a numpy warning)."""
    proc = run_in_process(
        "presk",
        "train",
        str(REPO / "tutorial" / "02_regression.psk"),
        "--entry",
        "MLP{4, 8, 1}.mse",
        "--dim",
        "N=16",
        "--steps",
        "30",
        "--backend",
        backend,
        "--realize",
        "f32",
        "--lr",
        "1e30",
        "--out",
        str(tmp_path),
    )
    assert_user_error(proc, code="E8004", where="training diverged at step 2")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("step 2  loss inf  "), proc.stdout
    rows = list(csv.DictReader((tmp_path / "log.csv").open()))
    assert [r["step"] for r in rows] == ["1", "2"]
    assert not np.isfinite(float(rows[-1]["loss"]) * float(rows[-1]["grad_norm"]))
    assert not (tmp_path / "checkpoint.psk.d").exists()


def test_refusals(tmp_path, corpus):
    assert_user_error(
        run_in_process(
            "presk",
            "train",
            MINIGPT,
            "--entry",
            "next_token",
            *TINY,
            "--dim",
            "B=2",
            "--steps",
            "1",
            "--out",
            str(tmp_path),
        ),
        code="E3011",
    )
    assert_user_error(
        run_in_process(
            "presk", "train", REGRESSION, "--data", corpus, "--steps", "1", "--out", str(tmp_path)
        ),
        code="E3011",
    )
    assert_user_error(
        run_in_process(
            "presk",
            "train",
            MINIGPT,
            "--entry",
            "loss",
            *TINY,
            "--dim",
            "B=2",
            "--data",
            corpus,
            "--epochs",
            "1",
            "--steps",
            "0",
        )
    )
