"""What the cost model's layouts (`--plan auto`, the mlir backend's default) must respect,
each once refused with E7002: a realization's order and contraction (an interleaved(P) sum
cannot take the row-wise form), and a bias add two products feed (only one folds it)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_in_process

REALIZATIONS = {
    "interleaved": {"default": "f64", "order": {"Dense.apply/%0": "interleaved(4)"}},
    "fma": {"default": "f32", "contract": "fma"},
}


@pytest.mark.parametrize("name", sorted(REALIZATIONS))
def test_auto_layouts_keep_the_declared_order(name, tmp_path):
    record = tmp_path / "r.json"
    record.write_text(json.dumps(REALIZATIONS[name]))
    outputs = {}
    for backend in ("kernel", "mlir"):
        out = tmp_path / f"{backend}.npz"
        done = run_in_process(
            "presk", "run", "tutorial/02_regression.psk", "--entry", "MLP{4, 8, 1}.mse",
            "--dim", "N=16", "--backend", backend, "--realize", f"@{record}", "--out", out,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs[backend] = np.load(out)
    for key in outputs["kernel"].files:
        assert np.array_equal(
            outputs["kernel"][key].view(np.uint64), outputs["mlir"][key].view(np.uint64)
        )


TWO_PRODUCTS = """dim B
fn f(x : ℝ[B, 4], w : ℝ[4, 3], v : ℝ[4, 3]) -> ℝ[B, 3] {
  x · w + x · v
}
"""


def test_an_add_of_two_products_folds_into_one_of_them(tmp_path):
    program = tmp_path / "two.psk"
    program.write_text(TWO_PRODUCTS)
    outputs = []
    for backend in ("kernel", "mlir"):
        out = tmp_path / f"{backend}.npz"
        done = run_in_process(
            "presk", "run", program, "--entry", "f", "--dim", "B=2", "--backend", backend,
            "--out", out,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs.append(np.load(out))
    for key in outputs[0].files:
        assert np.array_equal(outputs[0][key].view(np.uint64), outputs[1][key].view(np.uint64))
