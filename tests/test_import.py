"""`presk import` of the ONNX fixtures (tests/data/onnx: GPT-2, BERT, Llama and an MLP,
exported from PyTorch and `transformers`), each imported program run on fixed inputs
beside an independent peer, onnxruntime on the same graph, and the exact reference.

The inputs are those of a calibration sample (`presk calibrate --precision --seed 0`),
so that presk's own first-order bound (`presk check --precision`, cond) is computed at
exactly them. On every fixture, natively in f32 and in f64, that bound must contain the
measured gap to the exact output at every element, and be within a stated factor of the
largest: a claim presk makes that a measurement could refute, and that says how far
from sharp it is. The elementwise bands, f64 ε = 2⁻⁴⁰, a = 2⁻⁵⁰ and f32 ε = 2⁻¹⁵,
a = 2⁻²⁰ (|x − x̂| ≤ ε·(|x| + a)), are held where they hold: f64 on all four at these
inputs, f32 on the MLP, against the exact output and against onnxruntime's. A
transformer's logits are sums that cancel (elements of 10⁻⁴ where the largest are near 0.7,
from terms of 10⁻¹): there no implementation meets the f32 band, onnxruntime included,
and the gaps of presk and of onnxruntime to the exact output are printed side by side
(pytest -s shows them): who is closer to exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import safetensors
from conftest import REPO, run_in_process

import presk
from presk.precision.samples import sample_arguments

pytest.importorskip("onnxruntime")

from imported_models import (  # noqa: E402 - needs onnxruntime
    DATA,
    EXACT_BITS,
    F32,
    F64,
    band_gap,
    bound,
    calibrated,
    import_model,
    onnxruntime,
)

B, T = 1, 8  # the exact reference stays fast at these sizes
# name: its input, the dims it is imported at, whether its f32 output is held to the band
FIXTURES = {
    "gpt2": ("input_ids", {"batch": B, "seq": T}, False),
    "bert": ("input_ids", {"batch": B, "seq": T}, False),
    "llama": ("input_ids", {"batch": B, "seq": T}, False),
    "mlp": ("x", {"batch": 2}, True),
}
# bound / the largest measured gap, at most (measured 2026-12-07: f32 and f64, GPT-2
# 1.3·10⁵ and 1.7·10⁵, BERT 2.9·10⁴ and 2.7·10⁴, Llama 7.2·10⁴ and 7.8·10⁴, the MLP 321
# and 388): the cond rule charges each of the twenty-odd sums in series its envelope's
# worst case, as docs/precision.md, section 4, finds on the corpus GPT
SHARPNESS = {"gpt2": 2e5, "bert": 2e5, "llama": 2e5, "mlp": 1e3}


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, (_, dims, _) in FIXTURES.items():
        out[name] = import_model(name, tmp_path_factory.mktemp("import") / name, dims)
    return out


@pytest.mark.parametrize("name", list(FIXTURES))
def test_an_imported_model_is_within_presks_bound_of_exact_beside_onnxruntime(name, imported):
    folder = imported[name]
    input_name, dims, f32_band = FIXTURES[name]
    program = folder / "model.psk"
    entry = f"{name}.apply"
    envelope = calibrated(program, entry, dims, folder / "params.safetensors", folder / "env.json")
    core = presk.load(program).elaborate(entry, dims=dims)
    params, x = sample_arguments(core, envelope.meta, 0)
    peer = onnxruntime(DATA / f"{name}.onnx", {input_name: x.astype(ort_type(x))})
    exact = core.reference(bits=EXACT_BITS)(params, x)
    f64 = core.lower("f64").compile("mlir")(params, x)
    f32 = core.lower("f32").compile("mlir")(params, x)
    assert f64.shape == f32.shape == peer.shape == exact.shape
    gaps = {t: np.abs(y - exact) for t, y in (("f32", f32), ("f64", f64), ("peer", peer))}
    bounds = {t: bound(core, envelope, t) for t in ("f32", "f64")}
    print(
        f"\n{name}: f32 gap to exact, in f32 bands: presk {band_gap(f32, exact, F32):.3g}, "
        f"onnxruntime {band_gap(peer, exact, F32):.3g}; largest: presk {gaps['f32'].max():.3g}, "
        f"onnxruntime {gaps['peer'].max():.3g}, presk's f32 bound {bounds['f32']:.3g} "
        f"({bounds['f32'] / gaps['f32'].max():.3g}×); f64 {band_gap(f64, exact, F64):.3g} of "
        f"its band, largest {gaps['f64'].max():.3g}, bound {bounds['f64']:.3g} "
        f"({bounds['f64'] / gaps['f64'].max():.3g}×)"
    )
    for t in ("f32", "f64"):
        assert np.all(gaps[t] <= bounds[t]), (t, gaps[t].max(), bounds[t])
        assert bounds[t] <= SHARPNESS[name] * gaps[t].max(), (t, bounds[t], gaps[t].max())
    # onnxruntime's arithmetic is not the one bounded: this says it computes the graph
    # presk read, as closely to exact as presk's own f32 execution is bounded to
    assert np.all(gaps["peer"] <= bounds["f32"]), (gaps["peer"].max(), bounds["f32"])
    assert band_gap(f64, exact, F64) <= 1
    if f32_band:
        assert band_gap(f32, exact, F32) <= 1
        assert band_gap(f32, peer, F32) <= 1


def ort_type(x: np.ndarray) -> type:
    """What the graph's input takes: float32 reals (presk's f32 rounds them so too)."""
    return np.float32 if x.dtype.kind == "f" else np.int64


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
