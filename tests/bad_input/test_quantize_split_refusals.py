"""Records and flags `presk quantize --realize` refuses: each with its code and one line,
before the reference runs."""

from __future__ import annotations

import json
import os

import pytest

from bad_input.refusal import refuse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUANTIZE = [
    "quantize",
    os.path.join(REPO, "tutorial", "02_regression.psk"),
    *("--entry", "MLP{4, 8, 1}.mse", "--dim", "N=16"),
]
INT8 = {"bits": 8, "over": -2}


def record(tmp_path, value: dict) -> str:
    path = tmp_path / "R.json"
    path.write_text(json.dumps(value))
    return f"@{path}"


@pytest.mark.parametrize(
    "value, code, says",
    [
        ({"quant": {"hidden.w": {"bits": 6}}}, "E7001", "quant hidden.w: bits is 8 or 4, not 6"),
        ({"quant": {"hidden.w": {"bits": 16, "over": -2}}}, "E7001", "bits is 8 or 4, not 16"),
        ({"quant": {"hidden.w": {"bits": 8, "over": 2}}}, "E7001", "over 2: ℝ[4, 8] has 2 axes"),
        ({"quant": {"hidden.w": {"bits": 8, "over": -3}}}, "E7001", "over -3"),
        ({"quant": {"hidden.w": {"bits": 4, "over": "Out"}}}, "E7001", "no axis of that name"),
        (
            {"params": {"hidden.w": "bf16"}, "quant": {"hidden.w": INT8}},
            "E7001",
            "parameter hidden.w is both typed (params) and quantised (quant)",
        ),
        ({"quant": {"hidden.v": INT8}}, "E7001", "unknown parameter 'hidden.v'"),
        ({"quant": {"hidden.w": {"over": -2}}}, "E7001", 'weight is an object {"bits"'),
        ({"default": "f32", "accum": {"Dense.apply/%0": "f64"}}, "E7002", "f64 accumulation"),
        ({"storage": {"Dense.apply/%9": "f32"}}, "E7001", "unknown site 'Dense.apply/%9'"),
    ],
)
@pytest.mark.parametrize("backend", ["kernel", "mlir"])
def test_bad_records(tmp_path, value, code, says, backend):
    r = record(tmp_path, value)
    refuse([*QUANTIZE, "--realize", r, "--backend", backend], code=code, says=says)


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--realize", "f32", "--list"], "not allowed with argument"),
        (["--realize", "f32", "--backend", "interp"], "invalid choice: 'interp'"),
        (["--realize", "f16"], "'f16' is f64, f32, bf16 or @FILE.json"),
        (["--realize", "f32", "--bits", "1"], "not a whole number of bits"),
        ([], "give --list"),
    ],
)
def test_bad_flags(flags, says):
    code = "E7001" if "f16" in flags else "E0001"
    refuse([*QUANTIZE, *flags], code=code, says=says)


def test_a_missing_weights_file(tmp_path):
    missing = tmp_path / "none.psk.d"
    refuse([*QUANTIZE, "--realize", "f32", "--weights", missing], code="E9001", says=str(missing))
