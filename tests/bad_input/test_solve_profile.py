"""A roofline profile (`presk bench --calibrate`, `presk solve --profile`) that cannot be
taken is refused with a code and one line: a file that cannot be read (E0002), one that
is not JSON or breaks the profile's schema (E7005); `--calibrate` without --out (E0001)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bad_input.refusal import refuse
from presk.precision.profile import PAIRS, TYPES

REPO = Path(__file__).resolve().parent.parent.parent
SOLVE = [
    "solve",
    str(REPO / "tests/train/mlp_regression.psk"),
    "--entry",
    "Regression.loss",
    "--dim",
    "N=4",
    "--precision",
    "no-envelope.json",  # the profile is read first
    "--budget",
    "1e-3",
]


def good() -> dict:
    return {
        "machine": {"cpu": "znver3", "threads": 2},
        "date": "2026-12-01",
        "types": {t: {"latency": 1e-5, "work_rate": 1e10, "byte_rate": 1e10} for t in TYPES},
        "conversions": dict.fromkeys(PAIRS, {"fixed": 1e-6, "element": 1e-9}),
    }


def broken(record: dict, path: tuple, value) -> dict:
    *where, last = path
    node = record
    for key in where:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return record


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("conversions",), None, "a profile has the fields"),
        (("types", "f32", "work_rate"), 0, "work_rate is work a second, a positive number"),
        (("types", "bf16", "byte_rate"), "fast", "byte_rate is bytes a second"),
        (("types", "f64", "latency"), -1.0, "latency is seconds a launch, a number from 0"),
        (("conversions", "f64>f32", "element"), None, "a conversion has the fields"),
        (("machine", "threads"), 2.0, "threads is a whole number from 1"),
        (("date",), "yesterday", "date is a day"),
        (("types", "f16"), {}, "unknown field 'f16'"),
    ],
)
def test_a_profile_breaking_its_schema_is_refused(tmp_path, path, value, says):
    p = tmp_path / "P.json"
    p.write_text(json.dumps(broken(good(), path, value)))
    refuse([*SOLVE, "--profile", str(p), "--out", str(tmp_path / "R.json")], "E7005", says)


def test_a_profile_that_is_not_json_is_refused(tmp_path):
    p = tmp_path / "P.json"
    p.write_text('{"machine": ')
    refuse([*SOLVE, "--profile", str(p), "--out", str(tmp_path / "R.json")], "E7005", "not JSON")


def test_a_missing_profile_is_refused(tmp_path):
    missing = str(tmp_path / "none.json")
    refuse([*SOLVE, "--profile", missing, "--out", str(tmp_path / "R.json")], "E0002")


def test_calibrate_without_out_is_refused():
    refuse(["bench", "--calibrate"], "E0001", "--out")


def test_bench_without_a_file_is_refused():
    refuse(["bench"], "E0001", "give FILE")


def test_calibrate_with_a_program_is_refused(tmp_path):
    program = str(REPO / "tests/train/mlp_regression.psk")
    argv = ["bench", program, "--calibrate", "--out", str(tmp_path / "P.json")]
    refuse(argv, "E0001", "kernels of its own")
