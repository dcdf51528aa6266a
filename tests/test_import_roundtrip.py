"""The way back from presk to the model a graph came from: `presk params --names onnx`
writes an imported program's parameters under the names of the ONNX initializers they
hold (which `presk import` records in its weights' metadata). Put into the graph in
place of its initializers, onnxruntime runs them: the imported weights unchanged give
the graph's own output bit for bit, and after training steps in presk the trained
graph's output lies within presk's own bound of the trained program's exact output.
The same file loads into the `transformers` model the graph was exported from (the
`interop` extra: skipped without it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import safetensors.numpy
from conftest import REPO, run_in_process
from onnx import numpy_helper

import presk
from presk.precision.samples import sample_arguments

pytest.importorskip("onnxruntime")

from imported_models import (  # noqa: E402 - needs onnxruntime
    DATA,
    EXACT_BITS,
    F32,
    band_gap,
    bound,
    calibrated,
    import_model,
    onnxruntime,
    with_initializers,
)

GPT2 = DATA / "gpt2.onnx"
DIMS = {"batch": 2, "seq": 8}
ENTRY = "gpt2.apply"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The GPT-2 fixture imported with its loss and trained 5 steps in f32 on the shipped
    corpus: its folder, the checkpoint in `train/`."""
    root = tmp_path_factory.mktemp("roundtrip")
    folder = import_model("gpt2", root / "gpt2", DIMS, "--loss", "next-token")
    data = root / "lic8.psk.d"
    texts = sorted(str(p) for p in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    r = run_in_process("presk", "data", *texts, "--window", "8", "--out", str(data))
    assert r.returncode == 0, r.stderr
    r = run_in_process(
        "presk", "train", str(folder / "model.psk"), "--entry", "gpt2.loss", "--data", str(data),
        "--init", str(folder / "params.safetensors"), "--steps", "5", "--realize", "f32",
        "--out", str(folder / "train"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return folder


def written(folder: Path, out: Path, *flags: str) -> dict[str, np.ndarray]:
    """`presk params --names onnx` of the imported program: the arrays by name."""
    r = run_in_process(
        "presk", "params", str(folder / "model.psk"), "--entry", ENTRY, "--names", "onnx",
        "--out", str(out), *flags,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return safetensors.numpy.load_file(str(out))


def initializers() -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(GPT2)).graph.initializer}


def test_the_imported_weights_go_back_into_the_graph_bit_for_bit(trained, tmp_path):
    arrays = written(
        trained, tmp_path / "back.safetensors",
        "--weights", str(trained / "params.safetensors"), "--realize", "f32",
    )  # fmt: skip
    graph = initializers()
    assert len(arrays) == 28  # every parameter the import made, each an initializer's
    for name, a in arrays.items():
        assert a.dtype == graph[name].dtype and np.array_equal(a, graph[name]), name
    tokens = np.random.default_rng(3).integers(0, 256, (2, 8)).astype(np.int64)
    feeds = {"input_ids": tokens}
    back = onnxruntime(with_initializers(GPT2, arrays), feeds)
    assert np.array_equal(back, onnxruntime(GPT2, feeds))


@pytest.fixture(scope="module")
def trained_run(trained, tmp_path_factory):
    """The trained weights by ONNX name; presk's trained program on a calibration
    sample's tokens, exactly and in f64; and presk's bound on its f32 and f64 gaps."""
    scratch = tmp_path_factory.mktemp("trained")
    checkpoint = trained / "train" / "checkpoint.psk.d"
    arrays = written(trained, scratch / "trained.safetensors", "--weights", str(checkpoint))
    program = trained / "model.psk"
    envelope = calibrated(program, ENTRY, DIMS, checkpoint, scratch / "env.json")
    core = presk.load(program).elaborate(ENTRY, dims=DIMS)
    params, tokens = sample_arguments(core, envelope.meta, 0)
    exact = core.reference(bits=EXACT_BITS)(params, tokens)
    f64 = core.lower("f64").compile("mlir")(params, tokens)
    # |peer − f64| ≤ |peer − exact| + |exact − f64|: an f32 execution's bound plus f64's
    within = bound(core, envelope, "f32") + bound(core, envelope, "f64")
    return arrays, tokens, exact, f64, within


def test_trained_weights_run_in_the_graph_within_presks_bound(trained_run):
    arrays, tokens, exact, f64, within = trained_run
    graph = initializers()
    assert all(a.dtype == np.float32 for a in arrays.values())  # the f32 run's checkpoint
    assert not np.array_equal(arrays["lm_head.weight"], graph["lm_head.weight"])  # trained
    theirs = onnxruntime(with_initializers(GPT2, arrays), {"input_ids": tokens})
    print(
        f"\nonnxruntime on the trained graph: {band_gap(theirs, exact, F32):.3g} of the f32 "
        f"band; largest gap to presk's f64 {np.abs(theirs - f64).max():.3g}, bound {within:.3g}"
    )
    assert np.all(np.abs(theirs - f64) <= within)


def test_trained_weights_load_into_the_transformers_model(trained_run):
    torch = pytest.importorskip("torch")
    fixtures = pytest.importorskip("tools.onnx_fixtures")  # transformers, the exporter
    arrays, tokens, _, f64, within = trained_run
    model = fixtures.gpt2().eval()  # its own random weights, all to be replaced
    missing, unexpected = model.load_state_dict(
        {name: torch.from_numpy(a) for name, a in arrays.items()}, strict=False
    )
    assert not unexpected
    assert set(missing) <= {"transformer.wte.weight"}  # tied to lm_head.weight
    state = model.state_dict()
    for name, a in arrays.items():
        assert np.array_equal(state[name].numpy(), a), name
    with torch.inference_mode():
        logits = model(torch.from_numpy(tokens)).logits.double().numpy()
    assert np.all(np.abs(logits - f64) <= within)
