"""The cost model's layouts keep a realization's order and contraction: an interleaved(P)
sum or an FMA site planned by `--plan auto` (the mlir backend's default) runs, and gives
the kernel evaluator's bits, where the planner once offered the row-wise form, which
cannot hold partial sums (E7002)."""

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
