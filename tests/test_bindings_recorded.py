"""Say it once: `presk run --weights CKPT` takes the entry, consts, dims and realization
a `presk train` checkpoint records (presk/cli/recorded.py), refuses a const that
disagrees (E3015); a plan's realization is refused against a --realize that disagrees
(E7006) and applies when --realize is left out; `presk plan` says what it predicts."""

from __future__ import annotations

import argparse
import json

import pytest
from conftest import assert_user_error, run_in_process
from programs import REPO

from presk.cli.recorded import apply_checkpoint
from presk.realize import read as read_realization
from presk.runtime import pskd

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
LINEAR = str(REPO / "tutorial" / "01_linear.psk")
CONSTS = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
SPELLED = ["--entry", "MiniGPT.loss", *CONSTS, "--dim", "T=8", "--dim", "B=2"]


def presk(*argv):
    return run_in_process("presk", *map(str, argv))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> str:
    """A MiniGPT checkpoint of two f32 steps on the kernel evaluator."""
    out = tmp_path_factory.mktemp("run")
    train = ["train", MINIGPT, *SPELLED, "--steps", "2", "--backend", "kernel"]
    proc = presk(*train, "--realize", "f32", "--out", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    return str(out / "checkpoint.psk.d")


def output(*argv) -> dict:
    proc = presk("run", *argv, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_checkpoint_gives_the_flags_left_out(trained):
    bare = output(MINIGPT, "--weights", trained, "--backend", "kernel")
    spelled = output(
        MINIGPT, *SPELLED, "--realize", "f32", "--weights", trained, "--backend", "kernel"
    )
    assert bare == spelled
    assert bare["entry"] == "MiniGPT{64, 16, 2, 2}.loss"
    assert bare["realize"] == "f32"  # the recorded realization, not the f64 default


def test_flags_given_replace_how_it_runs(trained):
    """Dims and the realization say how the parameters run: given, they replace the
    recorded ones; any function of the recorded module runs."""
    out = output(
        MINIGPT,
        "--weights",
        trained,
        "--entry",
        "apply",
        "--dim",
        "B=1",
        "--backend",
        "kernel",
        "--realize",
        "f64",
    )
    assert out["entry"] == "MiniGPT{64, 16, 2, 2}.apply"
    assert out["realize"] == "f64"
    assert out["output"]["shape"] == [1, 8, 64]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--const", "D=32"], "--const D=32 disagrees with the checkpoint's D=16 ("),
        (["--entry", "MiniGPT{64, 32, 2, 2}.apply"], "(D=32) disagrees with the checkpoint's D=16"),
        (["--entry", "Linear.apply"], "is not a function of MiniGPT"),
    ],
)
def test_what_the_parameters_are_must_agree(trained, flags, says):
    proc = presk("run", MINIGPT, "--weights", trained, *flags, "--backend", "kernel")
    first = assert_user_error(proc, "E3015")
    assert says in first and trained in first, first


def test_another_program_with_its_entry_given_is_checked_by_shape(trained):
    gpt = str(REPO / "corpus" / "nlp" / "05_gpt.psk")
    proc = presk(
        "run", gpt, "--entry", "GPT{16, 2, 2}.loss", "--weights", trained, "--backend", "kernel"
    )
    first = assert_user_error(proc, "E9005")
    assert "parameter tok has shape [64, 16], the program's is [256, 16]" in first, first
    proc = presk("run", gpt, "--weights", trained, "--backend", "kernel")
    assert "was trained as MiniGPT.loss, which" in assert_user_error(proc, "E3015")


def test_a_parameters_file_records_nothing(trained, tmp_path):
    npz = tmp_path / "p.npz"
    proc = presk("params", MINIGPT, *SPELLED, "--weights", trained, "--out", npz)
    assert proc.returncode == 0, proc.stderr
    args = argparse.Namespace(file=MINIGPT, entry=None, const=None, dim=None)
    assert apply_checkpoint(args, str(npz)) is None
    assert (args.entry, args.const, args.dim) == (None, None, None)


def test_a_recorded_record_is_read_back_from_the_checkpoint(trained, tmp_path):
    """A realization record that is not one machine type is spelled `@CKPT.psk.d`, and
    read back from the checkpoint as it was recorded."""
    c = pskd.read(trained)
    record = {"default": "f32", "params": {"head.w": "bf16"}}
    path = str(tmp_path / "typed.psk.d")
    pskd.write(path, pskd.Container("checkpoint", {**c.meta, "realize": record}, c.arrays))
    args = argparse.Namespace(file=MINIGPT, entry=None, const=None, dim=None, realize=None)
    apply_checkpoint(args, path)
    assert args.realize == "@" + path
    r = read_realization(args.realize)
    assert (r.default, r.params) == ("f32", {"head.w": "bf16"})


@pytest.fixture(scope="module")
def f32_plan(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("plan") / "p32.json"
    proc = presk(
        "plan",
        LINEAR,
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--realize",
        "f32",
        "--out",
        path,
    )
    assert proc.returncode == 0, proc.stderr
    return str(path)


LINEAR_RUN = ["run", LINEAR, "--entry", "Linear{3, 2}.apply", "--dim", "batch=4"]


def test_a_realize_given_must_agree_with_the_plan(f32_plan):
    proc = presk(*LINEAR_RUN, "--backend", "kernel", "--realize", "f64", "--plan", "@" + f32_plan)
    first = assert_user_error(proc, "E7006")
    assert "--realize f64 disagrees with the realize f32 of the plan" in first, first
    agreed = presk(*LINEAR_RUN, "--backend", "kernel", "--realize", "f32", "--plan", "@" + f32_plan)
    assert agreed.returncode == 0, agreed.stderr


def test_the_plans_realization_runs_when_realize_is_left_out(f32_plan):
    proc = presk(*LINEAR_RUN, "--backend", "kernel", "--plan", "@" + f32_plan, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["realize"] == "f32"


def test_the_reference_says_it_ignores_a_plan(f32_plan):
    proc = presk(*LINEAR_RUN, "--plan", "@" + f32_plan)
    assert proc.returncode == 0, proc.stderr
    note, which = proc.stderr.strip().splitlines()
    assert note.startswith("note: the reference (--backend interp)"), note
    assert which == "-- Linear{3, 2}.apply on interp at 256 bits"
    plain = presk(*LINEAR_RUN)
    assert plain.stdout == proc.stdout and plain.stderr == which + "\n"


def test_plan_prints_shared_sites_by_shape_and_the_total(tmp_path):
    proc = presk(
        "plan",
        MINIGPT,
        "--entry",
        "MiniGPT{64, 16, 2, 2}.loss",
        "--dim",
        "B=8",
        "--dim",
        "T=8",
        "--out",
        tmp_path / "p.json",
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    shared = next(i for i, line in enumerate(lines) if line.startswith("Linear.apply/%0"))
    assert "3 kernels, one layout" in lines[shared]
    assert lines[shared + 1 : shared + 4] == [
        "  [8, 8, 16] K=16",
        "  [8, 8, 64] K=16",
        "  [8, 8, 16] K=64",
    ]
    assert lines[-1].startswith("predicted for these 6 sites: ")
    assert lines[-1].endswith("faster than the default"), lines[-1]


@pytest.fixture(scope="module")
def trained_on_data(tmp_path_factory) -> tuple[str, str]:
    """(data file, checkpoint) of 3 MiniGPT f32 steps on windows of 8 tokens, T taken
    from the data: no --dim T given."""
    out = tmp_path_factory.mktemp("run")
    data = out / "d8.psk.d"
    texts = sorted(str(p) for p in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    assert presk("data", *texts, "--window", "8", "--out", data).returncode == 0
    train = ["train", MINIGPT, *CONSTS, "--dim", "B=2", "--data", data, "--steps", "3"]
    proc = presk(*train, "--backend", "kernel", "--realize", "f32", "--out", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    ckpt = out / "checkpoint.psk.d"
    meta = pskd.read(str(ckpt)).meta
    assert "T=8" in meta["dims"]  # the window
    return str(data), str(ckpt)


def test_eval_needs_only_the_checkpoint(trained_on_data):
    data, ckpt = trained_on_data
    spelled = presk("eval", MINIGPT, *SPELLED, "--data", data, "--weights", ckpt,
                    "--backend", "kernel", "--realize", "f32", "--batches", "2")  # fmt: skip
    bare = presk("eval", MINIGPT, "--weights", ckpt, "--backend", "kernel", "--batches", "2")
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout == spelled.stdout
    assert "on kernel in f32" in bare.stdout
    refused = presk("eval", MINIGPT, "--weights", ckpt, "--const", "D=32")
    assert refused.returncode == 1 and "error[E3015]" in refused.stderr


def test_resume_needs_only_the_checkpoint(trained_on_data, tmp_path):
    _, ckpt = trained_on_data
    proc = presk("train", MINIGPT, "--resume", ckpt, "--steps", "4", "--backend", "kernel",
                 "--out", tmp_path, "--quiet")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    meta = pskd.read(str(tmp_path / "checkpoint.psk.d")).meta
    recorded = pskd.read(ckpt).meta
    assert meta["step"] == 4 and meta["steps"] == 4
    for key in ("entry", "dims", "consts", "realize", "data", "seed", "hyper"):
        assert meta[key] == recorded[key], key
    other = presk("train", MINIGPT, "--resume", ckpt, "--steps", "4", "--lr", "0.5",
                  "--backend", "kernel", "--out", tmp_path, "--quiet")  # fmt: skip
    assert other.returncode == 1 and "error[E9005]" in other.stderr


def test_train_records_the_plans_realization_and_the_plan(tmp_path):
    plan = tmp_path / "p.json"
    made = presk("plan", MINIGPT, *SPELLED, "--train-step", "--realize", "f32", "--out", plan)
    assert made.returncode == 0, made.stderr
    out = tmp_path / "run"
    proc = presk("train", MINIGPT, *SPELLED, "--steps", "1", "--backend", "kernel",
                 "--plan", f"@{plan}", "--out", out, "--quiet")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    meta = pskd.read(str(out / "checkpoint.psk.d")).meta
    # the plan's type, not --realize's default
    assert meta["realize"] == {"default": "f32", "functions": "presk"}
    assert meta["plan"] == f"@{plan}"  # a resumed run takes it; run chooses its own
    ran = output(
        MINIGPT, "--weights", out / "checkpoint.psk.d", "--backend", "kernel", "--entry", "apply"
    )
    assert ran["realize"] == "f32"
