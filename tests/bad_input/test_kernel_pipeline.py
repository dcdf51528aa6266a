"""The kernel stage's pipeline (presk/stages.py) names a plan file and each ordered site
as pass options: any path is quoted so the pipeline reads it back, and what the dump
prints is what runs; a malformed option is refused."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stdout

import pytest

from bad_input.refusal import refuse
from presk.cli.common import run_cli
from presk.cli.main import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINEAR = [
    os.path.join(REPO, "tutorial", "01_linear.psk"),
    *("--entry", "Linear{3, 2}.apply", "--dim", "batch=4"),
]
PLAN = {"realize": "f32", "layout": {"Linear.apply/%0": {"form": "tiled", "tile": [1, 2]}}}


def _stdout(argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert run_cli(main, [str(a) for a in argv]) == 0
    return out.getvalue()


@pytest.mark.parametrize("name", ["a plan.json", "plan{1}.json", "p, (1).json", "it's.json"])
def test_a_plan_at_any_path_runs_as_at_a_plain_one(tmp_path, name):
    (tmp_path / "plain.json").write_text(json.dumps(PLAN))
    (tmp_path / name).write_text(json.dumps(PLAN))
    for command in (["dump", "--stage", "kernel"], ["run", "--backend", "kernel"]):
        plain = _stdout([command[0], *LINEAR, *command[1:], "--plan", f"@{tmp_path}/plain.json"])
        other = _stdout([command[0], *LINEAR, *command[1:], "--plan", f"@{tmp_path}/{name}"])
        if command[0] == "run":
            assert other == plain
        else:  # the same kernels; the header's pipeline names the file
            assert other.split("\n")[4:] == plain.split("\n")[4:] and name in other


def test_a_malformed_sum_order_is_refused_by_presk_opt(tmp_path):
    module = tmp_path / "m.mlir"
    module.write_text("module {\n}\n")
    pipeline = "--pass-pipeline=builtin.module(psk-sum-order{order=shuffled(2)})"
    refuse(
        [str(module), pipeline], code="E0001", says="is sequential, blocked(W) or", tool="presk-opt"
    )
