"""The precision workflow on an imported model, at small sizes (docs/import.md shows it):
the GPT-2 fixture imported with its next-token loss, trained on the shipped corpus with
`presk train`, its magnitudes calibrated, a realization solved at a budget of 10⁻³,
explained as a page, bisected against the reference, and its trained and its narrowed
weights written back under the ONNX initializers' names."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import safetensors.numpy
from conftest import REPO, run_in_process

GPT2 = REPO / "tests" / "data" / "onnx" / "gpt2.onnx"
DIMS = {"batch": 1, "seq": 8}
TYPES = {"f64": np.float64, "f32": np.float32, "bf16": ml_dtypes.bfloat16}


def presk(*argv) -> str:
    r = run_in_process("presk", *(str(a) for a in argv))
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_train_calibrate_solve_explain_bisect_and_back_on_an_imported_gpt2(tmp_path):
    folder = tmp_path / "gpt2"
    sizes = [f"--dim={d}={n}" for d, n in DIMS.items()]
    presk("import", GPT2, "--out", folder, *sizes, "--loss", "next-token")
    program, data = folder / "model.psk", tmp_path / "lic8.psk.d"
    texts = sorted((REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    presk("data", *texts, "--window", "8", "--out", data)
    printed = presk(
        "train", program, "--entry", "gpt2.loss", "--data", data,
        "--init", folder / "params.safetensors", "--steps", "20", "--realize", "f32",
        "--out", folder / "train",
    )  # fmt: skip
    assert "trained to step 20" in printed
    # the checkpoint records the entry, the dims and the realization the rest read
    weights = ["--weights", folder / "train" / "checkpoint.psk.d"]
    envelope, solved = folder / "env.json", folder / "solved.json"
    printed = presk("calibrate", "--precision", program, *weights, "--data", data, "--bits", "64",
                    "--samples", "1", "--workers", "1", "--out", envelope)  # fmt: skip
    assert "sites over 1 samples of `gpt2.loss` at 64 bits" in printed
    printed = presk(
        "solve", program, *weights, "--precision", envelope, "--budget", "1e-3",
        "--workers", "1", "--out", solved,
    )  # fmt: skip
    assert "against a budget" in printed and ": inside" in printed, printed
    record = json.loads(solved.read_text())
    page = folder / "solved.html"
    presk("explain", program, *weights, "--realize", f"@{solved}", "--format", "html",
          "--out", page)  # fmt: skip
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<details") >= len(record["storage"])
    printed = presk("bisect", program, *weights, "--realize", f"@{solved}", "--data", data,
                    "--bits", "64", "--budget", "1e-3")  # fmt: skip
    assert "budget 0.001: the output's gap is inside it" in printed, printed
    # the way back: the trained weights, and the solved realization's, by ONNX name
    back = folder / "trained.safetensors"
    presk("params", program, *weights, "--names", "onnx", "--out", back)
    trained = safetensors.numpy.load_file(str(back))
    assert "transformer.h.1.mlp.c_fc.weight" in trained
    assert all(a.dtype == np.float32 for a in trained.values())
    presk("params", program, *weights, "--realize", f"@{solved}", "--names", "onnx",
          "--out", back)  # fmt: skip
    with safetensors.safe_open(str(folder / "params.safetensors"), "numpy") as f:
        path_of = {n: p for p, n in json.loads(f.metadata()["onnx_names"]).items()}
    for name, a in safetensors.numpy.load_file(str(back)).items():
        stored = record["params"].get(path_of[name], record["default"])  # bf16 as solved
        assert a.dtype == TYPES[stored], (name, a.dtype, stored)
