"""presk train and presk eval as a nanoGPT user expects them: validation during a run and
the best checkpoint, a resumed run validating, logging and checkpointing as the run did, a
finished run extended, the epoch only with data, the note of a partial validation batch,
--batch on a dim without a default, a progress line with a rate, as the docs show it.
Tiny configurations on the kernel evaluator (f64), a few steps each."""

from __future__ import annotations

import csv
import re
from unittest import mock

import pytest
from conftest import assert_user_error, run_in_process
from programs import REPO

import presk.progress
from presk.runtime import pskd
from presk.train.loop import BEST, CHECKPOINT, Trainer, progress

REGRESSION = str(REPO / "tests" / "train" / "mlp_regression.psk")
MLP = str(REPO / "tutorial" / "02_regression.psk")
MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
TINY = [
    *("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"),
    *("--dim", "T=8", "--backend", "kernel"),
]
# 100 windows of 8 + 1 tokens: 90 train, 10 validate
TEXT = bytes(range(32, 127)) * 9


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A data file of 90 training and 10 validation windows of 8 tokens."""
    base = tmp_path_factory.mktemp("small")
    (base / "t.txt").write_bytes(TEXT[:801])
    out = base / "small.psk.d"
    proc = run_in_process("presk", "data", str(base / "t.txt"), "--window", "8", "--out", out)
    assert proc.returncode == 0, proc.stderr
    data = pskd.read(str(out))
    assert (len(data.arrays["train"]), len(data.arrays["val"])) == (90, 10)
    return str(out)


def rows(out) -> list[dict]:
    with (out / "log.csv").open() as f:
        return list(csv.DictReader(f))


def presk_ok(*argv) -> str:
    proc = run_in_process("presk", *argv)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_eval_every_records_validation_and_keeps_the_best(tmp_path, small):
    out = tmp_path / "run"
    flags = ["--dim", "B=4", "--data", small, "--steps", "6", "--log-every", "4", "--lr", "0.05"]
    stdout = presk_ok("train", MINIGPT, *TINY, *flags, "--eval-every", "3", "--out", out)
    val = {int(m[1]): m[2] for m in re.finditer(r"^step (\d+)  val loss (\S+)$", stdout, re.M)}
    assert sorted(val) == [3, 6], stdout
    assert "on kernel in f64" in stdout.splitlines()[-1]
    assert "best.psk.d" in stdout.splitlines()[-1]
    logged = rows(out)
    assert list(logged[0]) == ["step", "epoch", "loss", "lr", "grad_norm", "seconds", "val_loss"]
    # the validation steps are recorded beside the logged ones; val_loss empty elsewhere
    assert [(r["step"], bool(r["val_loss"])) for r in logged] == [
        ("1", False),
        ("3", True),
        ("4", False),
        ("6", True),
    ]
    assert {int(r["step"]): f"{float(r['val_loss']):.6f}" for r in logged if r["val_loss"]} == val
    best_step = min(val, key=lambda step: float(val[step]))
    best = pskd.read(str(out / "best.psk.d"))
    assert best.meta["step"] == best.meta["history"][-1]["step"] == best_step
    ckpt = pskd.read(str(out / "checkpoint.psk.d"))
    assert [r["step"] for r in ckpt.meta["history"] if "val_loss" in r] == [3, 6]
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # `presk eval` computes what the run recorded: 2 batches of 4 of the 10 windows
    evaluated = presk_ok(
        "eval", MINIGPT, *TINY, "--dim", "B=4", "--data", small, "--weights", out / "best.psk.d"
    )
    assert evaluated.startswith(f"validation loss {val[best_step]} over 2 batches of 4 ")
    assert (
        "on kernel in f64 (the last 2 windows, fewer than a batch of 4, are left out)" in evaluated
    )


def test_eval_batches_bounds_an_evaluation(tmp_path, small):
    out = tmp_path / "run"
    flags = ["--dim", "B=4", "--data", small, "--steps", "2", "--quiet", "--out", out]
    presk_ok("train", MINIGPT, *TINY, *flags, "--eval-every", "2", "--eval-batches", "1")
    (row,) = [r for r in rows(out) if r["val_loss"]]
    one = presk_ok(
        "eval", MINIGPT, *TINY, "--dim", "B=4", "--data", small, "--weights", out / "best.psk.d",
        "--batches", "1",
    )  # fmt: skip
    assert one.startswith(f"validation loss {float(row['val_loss']):.6f} over 1 batch of 4 ")
    assert "left out" not in one  # the partial batch was not reached


def test_eval_says_nothing_is_left_out_when_the_batches_are_whole(small):
    five = presk_ok("eval", MINIGPT, *TINY, "--dim", "B=5", "--data", small)
    assert re.fullmatch(r"validation loss \S+ over 2 batches of 5 windows on kernel in f64\n", five)


def test_extending_a_finished_run(tmp_path):
    """A run of 4 steps, resumed with --steps 6: steps 5 and 6 run and are recorded, at the
    learning rates of a run planned for 6 steps; without --steps, or with fewer, refused."""
    out, straight = tmp_path / "run", tmp_path / "straight"
    base = ["train", REGRESSION, "--dim", "N=8", "--backend", "kernel", "--log-every", "1"]
    stdout = presk_ok(*base, "--steps", "4", "--out", out)
    # drawn arguments have no epochs: none in the log line, an empty cell in log.csv
    assert re.search(r"^step 4  loss \S+  lr \S+  \|g\| \S+$", stdout, re.M), stdout
    assert {r["epoch"] for r in rows(out)} == {""}
    ckpt = out / "checkpoint.psk.d"
    refused = run_in_process("presk", *base, "--out", out, "--resume", ckpt)
    assert "give --steps past 4 to extend" in assert_user_error(refused, "E0001")
    fewer = run_in_process("presk", *base, "--steps", "3", "--out", out, "--resume", ckpt)
    assert "already at step 4" in assert_user_error(fewer, "E0001")
    extended = run_in_process("presk", *base, "--steps", "6", "--out", out, "--resume", ckpt)
    assert extended.returncode == 0, extended.stderr
    assert extended.stderr == (
        "extending the run from 4 to 6 steps: the learning-rate schedule now ends at step 6\n"
    )
    assert [int(line.split()[1]) for line in extended.stdout.splitlines()[:-1]] == [5, 6]
    meta = pskd.read(str(ckpt)).meta
    assert (meta["steps"], meta["step"]) == (6, 6)
    assert [r["step"] for r in meta["history"]] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in rows(out)] == ["1", "2", "3", "4", "5", "6"]
    presk_ok(*base, "--steps", "6", "--quiet", "--out", straight)
    planned = {r["step"]: r["lr"] for r in rows(straight)}
    assert [r["lr"] for r in rows(out)[4:]] == [planned["5"], planned["6"]]
    assert rows(out)[3]["lr"] != planned["4"]  # step 4 ran on the 4-step schedule


def trained_saving(*argv) -> tuple[str, str, list[tuple[str, int]]]:
    """`presk train` in process: its stdout, its stderr, and each checkpoint it wrote
    (name, step), in order."""
    saved, save = [], Trainer.save

    def spy(self, state, name=CHECKPOINT):
        saved.append((name, state.step))
        save(self, state, name)

    with mock.patch.object(Trainer, "save", spy):
        proc = run_in_process("presk", "train", *argv)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr, saved


def test_a_resumed_run_keeps_its_validation_logging_and_checkpoints(tmp_path, small):
    """A run stopped at step 2 and resumed with no flags validates, logs and checkpoints
    as the run did: best.psk.d is the uninterrupted run's. A flag given on resume that
    changes one of them is said, in one line."""
    straight, part, other = tmp_path / "straight", tmp_path / "part", tmp_path / "other"
    flags = [MINIGPT, *TINY, "--dim", "B=4", "--data", small, "--steps", "6", "--lr", "0.05"]
    flags += ["--eval-every", "2", "--log-every", "3", "--checkpoint-every", "2"]
    presk_ok("train", *flags, "--quiet", "--out", straight)
    presk_ok("train", *flags, "--quiet", "--out", part, "--stop-at", "2")
    stdout, stderr, saved = trained_saving(MINIGPT, "--resume", part / CHECKPOINT)
    assert stderr == ""
    val = [int(m[1]) for m in re.finditer(r"^step (\d+)  val loss ", stdout, re.M)]
    assert val == [4, 6], stdout
    assert [line.split()[1] for line in stdout.splitlines()[:-1] if "epoch" in line] == [
        "3",
        "4",
        "6",
    ]
    assert (CHECKPOINT, 4) in saved and saved[-1] == (CHECKPOINT, 6)  # --checkpoint-every 2
    assert [(r["step"], r["val_loss"]) for r in rows(part)] == [
        (r["step"], r["val_loss"]) for r in rows(straight)
    ]
    best = {p: pskd.read(str(p / BEST)).meta["step"] for p in (straight, part)}
    assert best[part] == best[straight]
    assert pskd.read(str(part / CHECKPOINT)).meta["eval_every"] == 2

    presk_ok("train", *flags, "--quiet", "--out", other, "--stop-at", "2")
    changed = run_in_process(
        "presk", "train", MINIGPT, "--resume", other / CHECKPOINT, "--stop-at", "3",
        "--eval-every", "3", "--checkpoint-every", "0", "--quiet",
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    assert changed.stderr == (
        "resuming with --eval-every 3 (the run's: 2), --checkpoint-every 0 (the run's: 2) "
        "from step 3 on\n"
    )
    assert [r["step"] for r in rows(other) if r["val_loss"]] == ["2", "3"]


def test_batch_binds_a_dim_without_a_default(tmp_path):
    """`dim N` has no default in the tutorial: --batch binds it before elaboration."""
    entry = ["--entry", "MLP{4, 8, 1}.mse", "--batch", "4", "--steps", "2", "--quiet"]
    presk_ok("train", MLP, *entry, "--backend", "kernel", "--out", tmp_path)
    assert pskd.read(str(tmp_path / "checkpoint.psk.d")).meta["dims"] == ["N=4"]


def test_a_run_piped_shows_no_progress_bar(tmp_path):
    proc = run_in_process(
        "presk", "train", REGRESSION, "--dim", "N=4", "--steps", "2", "--backend", "kernel",
        "--out", tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert progress(40, 600, 12.3, 3.21) == "step 40/600  12.3 steps/s  ETA 46 s  loss 3.210000"
    assert "ETA 10 min" in progress(1, 6001, 10.0, 1.0)


def test_the_progress_line_is_the_one_the_docs_show(tmp_path, monkeypatch):
    """The line a run draws on a terminal (forced here, and drawn from the first step),
    in the shape docs/training.md shows it."""
    monkeypatch.setenv("PRESK_PROGRESS", "1")
    monkeypatch.setattr(presk.progress, "DELAY", 0.0)
    proc = run_in_process(
        "presk", "train", REGRESSION, "--dim", "N=4", "--steps", "3", "--backend", "kernel",
        "--out", tmp_path,
    )  # fmt: skip
    drawn = [p.removesuffix("\x1b[K") for p in proc.stderr.split("\r") if p.startswith("train")]
    assert re.fullmatch(r"training step 3/3  \S+ steps/s  ETA 0 s  loss \d+\.\d{6}", drawn[-1])

    def shape(line: str) -> str:
        return re.sub(r"\d+(\.\d+)?", "N", line)

    shown = re.findall(r"`([^`]*step \d+/\d+[^`]*)`", (REPO / "docs" / "training.md").read_text())
    assert shown and {shape(line) for line in shown} == {shape(drawn[-1])}, shown


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--eval-every", "2"], "give --data"),
        (["--eval-batches", "2"], "give both"),
    ],
)
def test_validation_flags_without_what_they_need(tmp_path, flags, says):
    proc = run_in_process("presk", "train", REGRESSION, "--steps", "2", "--out", tmp_path, *flags)
    assert says in assert_user_error(proc, "E0001")


def test_validation_needs_a_whole_batch(tmp_path, small):
    flags = ["--dim", "B=16", "--data", small, "--steps", "2", "--out", tmp_path]
    train = run_in_process("presk", "train", MINIGPT, *TINY, *flags, "--eval-every", "1")
    assert "10 validation windows, fewer than a batch of 16" in assert_user_error(train, "E3011")
    evaluated = run_in_process("presk", "eval", MINIGPT, *TINY, "--dim", "B=16", "--data", small)
    assert_user_error(evaluated, "E3011")
