"""Parameters and inputs by path: `presk params` and `run --save-inputs` write them, and
`--weights` and `--inputs` read them back bit for bit."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
from conftest import assert_user_error, run_in_process
from programs import REPO

from presk.cli.common import run_cli
from presk.cli.main import main
from presk.runtime import pskd

REGRESSION = str(REPO / "tests" / "train" / "mlp_regression.psk")
LOSS = [REGRESSION, "--entry", "loss", "--dim", "N=8"]


def presk(*argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert run_cli(main, [str(a) for a in argv]) == 0
    return out.getvalue()


def read_params(path) -> dict[str, np.ndarray]:
    if str(path).endswith(".safetensors"):
        return safetensors.numpy.load_file(str(path))
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def run_output(tmp_path, *weights) -> np.ndarray:
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.npz"
    presk("run", *LOSS, "--backend", "kernel", *weights, "--out", out)
    return np.load(out)["output"]


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_initial_parameters_round_trip_through_a_file_bit_for_bit(tmp_path, suffix):
    first, second = tmp_path / f"p{suffix}", tmp_path / f"q{suffix}"
    presk("params", *LOSS, "--seed", "3", "--out", first)
    presk("params", *LOSS, "--weights", first, "--out", second)
    a, b = read_params(first), read_params(second)
    assert sorted(a) == ["c", "l1.b", "l1.w", "l2.b", "l2.w", "v"]  # safetensors sorts names
    assert all(a[k].view(np.uint64).tobytes() == b[k].view(np.uint64).tobytes() for k in a)
    runs = tmp_path / "runs"
    runs.mkdir()
    initial = run_output(runs, "--seed", "3")  # inputs drawn from seed 3 in both runs
    from_file = run_output(runs, "--seed", "3", "--weights", first)
    assert np.array_equal(initial.view(np.uint64), from_file.view(np.uint64))


def test_a_checkpoint_written_as_parameters_runs_to_the_checkpoints_bits(tmp_path):
    presk("train", REGRESSION, "--backend", "kernel", "--steps", "3", "--out", tmp_path / "t")
    ckpt = tmp_path / "t" / "checkpoint.psk.d"
    params = tmp_path / "p.safetensors"
    presk("params", *LOSS, "--weights", ckpt, "--out", params)
    runs = tmp_path / "runs"
    runs.mkdir()
    from_ckpt = run_output(runs, "--weights", ckpt)
    from_file = run_output(runs, "--weights", params)
    assert np.array_equal(from_ckpt.view(np.uint64), from_file.view(np.uint64))
    assert not np.array_equal(from_ckpt, run_output(runs))  # trained: not the initial values


def test_inputs_from_safetensors_give_the_bits_of_the_same_npz(tmp_path):
    x = np.random.default_rng(0).standard_normal((8, 3))
    np.savez(tmp_path / "in.npz", x=x)
    safetensors.numpy.save_file({"x": x}, str(tmp_path / "in.safetensors"))
    apply = [REGRESSION, "--entry", "apply", "--dim", "N=8", "--backend", "kernel"]
    outs = []
    for name in ("in.npz", "in.safetensors"):
        presk("run", *apply, "--inputs", tmp_path / name, "--out", tmp_path / f"{name}.out.npz")
        outs.append(np.load(tmp_path / f"{name}.out.npz")["output"])
    assert np.array_equal(outs[0].view(np.uint64), outs[1].view(np.uint64))


def test_saved_inputs_read_back_give_the_same_bits(tmp_path):
    program = tmp_path / "f.psk"
    program.write_text(
        "dim N\nfn f(x : ℝ[N, 3], i : nat{4}[N], m : bool[N]) -> ℝ[N] {\n"
        "  sum[-1](x * x) + where(m, sum[-1](x), 0)\n}\n"
    )
    f = [program, "--entry", "f", "--dim", "N=5", "--backend", "kernel"]
    presk(
        "run", *f, "--seed", "7", "--save-inputs", tmp_path / "in.npz", "--out", tmp_path / "a.npz"
    )
    with np.load(tmp_path / "in.npz") as saved:
        assert sorted(saved.files) == ["i", "m", "x"]
        assert saved["i"].dtype == np.int64 and saved["m"].dtype == bool
    presk("run", *f, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "b.npz")
    a, b = np.load(tmp_path / "a.npz")["output"], np.load(tmp_path / "b.npz")["output"]
    assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
    presk("run", *f, "--out", tmp_path / "c.npz")  # seed 0 draws other inputs
    assert not np.array_equal(a, np.load(tmp_path / "c.npz")["output"])


def test_training_starts_from_the_parameters_init_gives(tmp_path):
    presk("params", *LOSS, "--seed", "4", "--out", tmp_path / "p.npz")
    steps = ["--backend", "kernel", "--steps", "2", "--quiet"]
    presk("train", REGRESSION, *steps, "--seed", "4", "--out", tmp_path / "a")
    presk(
        "train",
        REGRESSION,
        *steps,
        "--init",
        tmp_path / "p.npz",
        "--seed",
        "4",
        "--out",
        tmp_path / "b",
    )
    presk("train", REGRESSION, *steps, "--out", tmp_path / "c")  # seed 0: other parameters
    a, b, c = (
        read_params_of(tmp_path / run / "checkpoint.psk.d", tmp_path / f"{run}.npz")
        for run in "abc"
    )
    assert all(np.array_equal(a[k].view(np.uint64), b[k].view(np.uint64)) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


def read_params_of(checkpoint, path) -> dict[str, np.ndarray]:
    presk("params", *LOSS, "--weights", checkpoint, "--out", path)
    return read_params(path)


def test_parameters_are_written_in_the_type_the_realization_stores_them(tmp_path):
    record = tmp_path / "R.json"
    record.write_text('{"default": "f64", "params": {"l1.w": "bf16", "v": "f32"}}')
    stored = {
        "bf16": {"l1.w": ml_dtypes.bfloat16, "c": np.float32},  # a bf16 scalar is held in f32
        "f32": {"l1.w": np.float32, "c": np.float32},
        f"@{record}": {"l1.w": ml_dtypes.bfloat16, "v": np.float32, "c": np.float64},
    }
    presk("params", *LOSS, "--out", tmp_path / "p64.npz")
    initial = read_params(tmp_path / "p64.npz")
    for realize, dtypes in stored.items():
        first, again = tmp_path / "p.safetensors", tmp_path / "q.safetensors"
        presk("params", *LOSS, "--realize", realize, "--out", first)
        a = read_params(first)
        assert all(a[p].dtype == t for p, t in dtypes.items()), {p: a[p].dtype for p in a}
        assert a["c"] == initial["c"].astype(dtypes["c"])  # rounded once (bf16 through f32)
        presk("params", *LOSS, "--realize", realize, "--weights", first, "--out", again)
        b = read_params(again)  # read back and written again: the same bits
        assert all(a[p].dtype == b[p].dtype and a[p].tobytes() == b[p].tobytes() for p in a)
        runs = tmp_path / f"runs-{realize[-4:]}"
        runs.mkdir()
        typed = ["--realize", realize]
        assert np.array_equal(  # the stored values run to the bits the realization gives
            run_output(runs, *typed, "--weights", first).view(np.uint64),
            run_output(runs, *typed).view(np.uint64),
        )


def test_a_checkpoint_of_an_f32_run_is_written_in_its_own_float32(tmp_path):
    presk("train", REGRESSION, "--backend", "kernel", "--realize", "f32", "--steps", "2",
          "--quiet", "--out", tmp_path / "t")  # fmt: skip
    ckpt = tmp_path / "t" / "checkpoint.psk.d"
    held = {k.removeprefix("params/"): a for k, a in pskd.read(str(ckpt)).arrays.items()}
    given = ("--realize", "f32")  # left out, the checkpoint's recorded realization
    for realize, out in ((given, tmp_path / "p.npz"), ((), tmp_path / "q.safetensors")):
        presk("params", *LOSS, *realize, "--weights", ckpt, "--out", out)
        written = read_params(out)
        assert all(written[p].dtype == np.float32 for p in written)
        assert all(written[p].tobytes() == held[p].tobytes() for p in written)


def test_bfloat16_in_an_npz_is_refused_for_numpy_cannot_read_it_back(tmp_path):
    out = tmp_path / "p.npz"
    refused = run_in_process("presk", "params", *LOSS, "--realize", "bf16", "--out", out)
    message = assert_user_error(refused, "E0001")
    assert "bfloat16" in message and ".safetensors" in message
    assert not out.exists()
