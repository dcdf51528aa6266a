"""`presk import` of the ONNX fixtures (tests/data/onnx: GPT-2, BERT, Llama and an MLP,
exported from PyTorch and `transformers`), each imported program run on fixed inputs
beside an independent peer, onnxruntime on the same graph, and the exact reference.

The bands: f64 ε = 2⁻⁴⁰, a = 2⁻⁵⁰; f32 ε = 2⁻¹⁵, a = 2⁻²⁰. The MLP's outputs are held to
them element by element, |x − x̂| ≤ ε·(|x| + a): native f64 against the exact reference,
native f32 against the exact reference and against onnxruntime's f32 output. A
transformer's logits are sums that cancel (some elements are 10⁻⁴ where the largest is
0.6, summed from terms of 10⁻¹): there no implementation meets the elementwise band,
onnxruntime's own f32 output lying up to 41 times outside it, and native f64 up to 2
times outside the f64 one. Their outputs are held to the same ε normwise,
‖x − x̂‖ ≤ ε·‖x‖, and the elementwise gaps of presk and of onnxruntime to the exact
output are printed side by side (pytest -s shows them): who is closer to exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import safetensors
from conftest import REPO, run_in_process

import presk

ort = pytest.importorskip("onnxruntime")

DATA = REPO / "tests" / "data" / "onnx"
F64, F32 = (2.0**-40, 2.0**-50), (2.0**-15, 2.0**-20)
B, T = 1, 8  # the exact reference stays fast at these sizes
# name: the input, the dims it is imported at, whether its outputs are held elementwise
FIXTURES = {
    "gpt2": ("input_ids", {"batch": B, "seq": T}, False),
    "bert": ("input_ids", {"batch": B, "seq": T}, False),
    "llama": ("input_ids", {"batch": B, "seq": T}, False),
    "mlp": ("x", {"batch": 2}, True),
}


def inputs(name: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    _, dims, _ = FIXTURES[name]
    if name == "mlp":
        return rng.standard_normal((dims["batch"], 16)).astype(np.float32)
    return rng.integers(0, 256, (dims["batch"], dims["seq"])).astype(np.int64)


def onnxruntime(name: str, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        str(DATA / f"{name}.onnx"), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {FIXTURES[name][0]: x})[0].astype(np.float64)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, (_, dims, _) in FIXTURES.items():
        folder = tmp_path_factory.mktemp("import") / name
        flags = [f"--dim={d}={n}" for d, n in dims.items()]
        r = run_in_process(
            "presk", "import", str(DATA / f"{name}.onnx"), "--out", str(folder), *flags
        )
        assert r.returncode == 0, r.stderr
        out[name] = folder
    return out


def gap(x: np.ndarray, exact: np.ndarray, band) -> float:
    """The worst |x − x̂| / (ε (|x̂| + a)): within the band when at most 1."""
    eps, a = band
    return float(np.max(np.abs(x - exact) / (eps * (np.abs(exact) + a))))


def normwise(x: np.ndarray, exact: np.ndarray) -> float:
    return float(np.linalg.norm(x - exact) / np.linalg.norm(exact))


@pytest.mark.parametrize("name", list(FIXTURES))
def test_an_imported_model_agrees_with_onnxruntime_and_the_exact_reference(name, imported):
    folder = imported[name]
    _, dims, elementwise = FIXTURES[name]
    program = presk.load(folder / "model.psk")
    core = program.elaborate(f"{name}.apply", dims=dims)
    params = core.params(weights=str(folder / "params.safetensors"))
    x = inputs(name)
    peer = onnxruntime(name, x)
    exact = core.lower().compile("interp", bits=96)(params, x)
    f64 = core.lower("f64").compile("mlir")(params, x)
    f32 = core.lower("f32").compile("mlir")(params, x)
    assert f64.shape == f32.shape == peer.shape == exact.shape
    print(
        f"\n{name}: f32 elementwise gap to exact, in f32 bands: presk {gap(f32, exact, F32):.3g}, "
        f"onnxruntime {gap(peer, exact, F32):.3g}; normwise: presk {normwise(f32, exact):.2e}, "
        f"onnxruntime {normwise(peer, exact):.2e}; f64 {gap(f64, exact, F64):.3g} of its band, "
        f"normwise {normwise(f64, exact):.2e}"
    )
    assert normwise(f64, exact) <= F64[0]
    assert normwise(f32, exact) <= F32[0]
    assert normwise(f32, peer) <= F32[0]
    assert normwise(peer, exact) <= F32[0]  # the peer runs the graph presk read
    if elementwise:
        assert gap(f64, exact, F64) <= 1
        assert gap(f32, exact, F32) <= 1
        assert gap(f32, peer, F32) <= 1


def test_an_imported_program_reads_as_the_graph(imported):
    """The printed program names its parameters after the initializers (the ONNX names
    in comments and in the weights' metadata), its tokens' bound from the embedding, one
    `let` per value with its op."""
    text = (imported["gpt2"] / "model.psk").read_text()
    assert "dim batch = 1, seq = 8" in text
    assert "fn apply(input_ids : nat{256}[batch, seq]) -> ℝ[batch, seq, 256] {" in text
    assert "param transformer_h_0_attn_c_attn_weight : ℝ[64, 192]" in text
    assert "# transformer.h.0.attn.c_attn.weight" in text
    assert "let layer_norm = " in text and "# LayerNormalization (node_layer_norm)" in text
    assert "softmax[" in text and "causal_mask[" in text
    with safetensors.safe_open(str(imported["gpt2"] / "params.safetensors"), "numpy") as f:
        names = json.loads(f.metadata()["onnx_names"])
        assert names["transformer_wpe_weight"] == "transformer.wpe.weight"
        assert f.get_tensor("transformer_wpe_weight").dtype == np.float32


def test_an_imported_model_runs_on_the_command_line(imported):
    folder = imported["mlp"]
    r = run_in_process(
        "presk", "run", str(folder / "model.psk"), "--entry", "mlp.apply",
        "--weights", str(folder / "params.safetensors"), "--backend", "mlir",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ℝ[batch: 2, 8]")


def test_import_prints_what_it_wrote(tmp_path):
    r = run_in_process(
        "presk", "import", str(DATA / "mlp.onnx"), "--out", str(tmp_path / "m"), "--dim", "batch=3"
    )
    assert r.returncode == 0, r.stderr
    assert (
        f"{tmp_path}/m/model.psk: module mlp, entry mlp.apply(x : ℝ[batch, 16]) -> ℝ[batch, 8]"
        in r.stdout
    )
    assert f"{tmp_path}/m/params.safetensors: 6 parameters, 5768 values" in r.stdout
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["model.psk", "params.safetensors"]
    # into a folder that is there: its other files stay, the two are replaced
    (tmp_path / "m" / "notes.txt").write_text("mine")
    r = run_in_process(
        "presk", "import", str(DATA / "mlp.onnx"), "--out", str(tmp_path / "m"), "--dim", "batch=2"
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"
    assert "dim batch = 2" in (tmp_path / "m" / "model.psk").read_text()


def test_a_language_model_imports_with_a_loss_that_trains(tmp_path):
    """`--loss next-token` adds `loss(tokens, targets)`, which `presk train` trains from
    the imported weights on the shipped corpus."""
    folder = tmp_path / "gpt2"
    r = run_in_process(
        "presk", "import", str(DATA / "gpt2.onnx"), "--out", str(folder),
        "--dim", "batch=2", "--dim", "seq=8", "--loss", "next-token",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "and gpt2.loss" in r.stdout
    text = (folder / "model.psk").read_text()
    assert (
        "fn loss(input_ids : nat{256}[batch, seq], targets : nat{256}[batch, seq]) -> ℝ {" in text
    )
    assert "mean(cross_entropy[-1](apply(input_ids), targets))" in text
    data = tmp_path / "lic8.psk.d"
    texts = sorted(str(p) for p in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    assert (
        run_in_process("presk", "data", *texts, "--window", "8", "--out", str(data)).returncode == 0
    )
    r = run_in_process(
        "presk", "train", str(folder / "model.psk"), "--entry", "gpt2.loss", "--data", str(data),
        "--init", str(folder / "params.safetensors"), "--steps", "3", "--log-every", "1",
        "--realize", "f32", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "trained to step 3" in r.stdout


def test_a_loss_is_refused_for_a_graph_that_is_no_language_model(tmp_path):
    r = run_in_process(
        "presk", "import", str(DATA / "mlp.onnx"), "--out", str(tmp_path / "m"),
        "--dim", "batch=2", "--loss", "next-token",
    )  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.startswith("error[E0001]: --loss next-token:")
    assert not (tmp_path / "m").exists()
