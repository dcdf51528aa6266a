"""`presk calibrate --step`: one training step under realizations against the exact step,
from a trained checkpoint and ten warm-up steps in f64 (presk/precision/step_gap.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import REPO, run_in_process

import presk
from presk.ir.types import Axis, TensorType
from presk.precision.step_gap import (
    DEFAULTS,
    RECIPE,
    Norm,
    Setup,
    distance,
    measure,
    read_realizations,
)
from presk.prims import balls
from presk.runtime.inputs import parameters
from presk.runtime.values import Tensor
from tests.conformance.suite import MINIGPT_TRAINING, corpus, train_minigpt

MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")
MINIGPT = [str(REPO / MINIGPT_TRAINING[0]), *MINIGPT_TRAINING[1:11], "--dim", "B=1", "--dim", "T=8"]
# How close a storage floor may come above its gap: the floor rounds the exact θ′ through
# float64 (and f32 on the way to bf16), a double rounding that can land on the farther
# neighbour of a value within a hair of a midpoint, where the step may land on the nearer.
DOUBLE_ROUNDING = 1e-6


def _train_mlp(out) -> str:
    argv = ["train", MLP, "--entry", "Regression.loss", "--dim", "N=4", "--steps", "30"]
    proc = run_in_process("presk", *argv, "--backend", "mlir", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return str(out / "checkpoint.psk.d")


@pytest.fixture(scope="module")
def mlp_measured(tmp_path_factory):
    """The MLP's step measured under the default realizations on each reference (through
    the API)."""
    weights = _train_mlp(tmp_path_factory.mktemp("mlp"))
    core = presk.load(MLP).elaborate("Regression.loss", {"N": 4}, train_step=True)
    params = parameters(core.view, 0, weights)
    by_reference = {}
    for reference in ("ball", "interp"):
        setup = Setup(core, params, None, 10, 1e-2, 0, 64, reference)
        by_reference[reference] = measure(setup, read_realizations(list(DEFAULTS), core))
    return by_reference


@pytest.fixture(scope="module")
def mlp_rows(mlp_measured):
    """The MLP's rows on the default reference, balls, by label."""
    return {row.label: row for row in mlp_measured["ball"].rows}


@pytest.fixture(scope="module")
def minigpt_table(tmp_path_factory):
    """The tiny MiniGPT's printed table (B=1, T=8, on windows of the corpus), by label:
    (update gap, storage floor, gradient gap)."""
    base = tmp_path_factory.mktemp("minigpt")
    data = corpus(base / "lic8.psk.d")
    weights = train_minigpt(base / "run", data, "--backend", "mlir")
    argv = ["calibrate", "--step", *MINIGPT, "--weights", weights, "--data", data]
    proc = run_in_process("presk", *argv, "--realize", "f64,f32,bf16")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("presk calibrate --step: step 11 of `loss` after 10 warm-up")
    assert lines[1].split()[:3] == ["realization", "update", "gap"]
    assert lines[-1].startswith("each gap is its upper end over the reference's balls")
    return {w[0]: tuple(map(float, w[1:4])) for w in (line.split() for line in lines[2:-1])}


def test_f64_is_the_exact_step_to_rounding(mlp_rows, minigpt_table):
    assert mlp_rows["f64"].update_gap < 1e-10
    assert mlp_rows["f64"].grad_gap < 1e-12
    assert minigpt_table["f64"][0] < 1e-10


def test_f32_is_above_half_its_floor_and_below_a_thousandth(mlp_rows, minigpt_table):
    f32 = mlp_rows["f32"]
    assert f32.floor * 0.5 <= f32.update_gap <= 1e-3
    gap, floor, _ = minigpt_table["f32"]
    assert floor * 0.5 <= gap <= 1e-3


def test_bf16_is_further_than_f32(mlp_rows, minigpt_table):
    assert mlp_rows["bf16"].update_gap > mlp_rows["f32"].update_gap
    assert mlp_rows["bf16"].grad_gap > mlp_rows["f32"].grad_gap
    assert minigpt_table["bf16"][0] > minigpt_table["f32"][0]


def test_no_step_is_nearer_than_its_storage_floor(mlp_rows, minigpt_table):
    for row in mlp_rows.values():
        assert row.update_gap >= row.floor * (1 - DOUBLE_ROUNDING), row
    for label, (gap, floor, _) in minigpt_table.items():
        assert gap >= floor, label  # as printed, to three digits


def test_the_recipe_stores_the_optimiser_in_f64(mlp_rows):
    """Its floor is f64's; its gap, the bf16 gradient's, is bf16's order."""
    recipe = mlp_rows[RECIPE]
    assert recipe.floor == mlp_rows["f64"].floor
    assert recipe.update_gap > 1e3 * mlp_rows["f32"].update_gap
    assert recipe.grad_gap > mlp_rows["f32"].grad_gap


def test_the_ball_reference_agrees_with_mpfr_and_certifies_its_radius(mlp_measured):
    """The two references give the same gaps but for the MPFR reference's own error at 64
    bits, about 2⁻⁶⁴ of ‖θ‖ (a tenth of it where measured), and the balls' radius, which
    every ball gap includes, is there and small."""
    ball, mpfr = mlp_measured["ball"], mlp_measured["interp"]
    assert mpfr.radius == 0.0
    assert 0.0 < ball.radius < 1e-14
    own = 2.0**-64 / ball.update  # the MPFR reference's error, relative to the update
    for b, m in zip(ball.rows, mpfr.rows, strict=True):
        for field in ("update_gap", "floor", "grad_gap"):
            x, y = getattr(b, field), getattr(m, field)
            assert abs(x - y) <= 1e-9 * y + own, (b.label, field, x, y)


def test_a_gap_over_balls_is_its_upper_end():
    """‖x − X‖ over balls X of radius r: the midpoints' distance plus ‖r‖, over the
    denominator less its reach; +∞ when the denominator's ball may hold 0."""
    t = TensorType("real", (Axis(None, 2),))
    with balls.context(64):
        wide = Tensor(t, np.array([balls.arb(1, 0.25), balls.arb(-2, 0.5)], dtype=object))
    near = Tensor(t, np.array([1.5, -2.0]))
    gap = distance(near, wide, 64)
    assert gap.value == 0.5
    assert math.isclose(gap.reach, math.hypot(0.25, 0.5), rel_tol=1e-8)  # 30-bit radii
    assert gap.reach >= math.hypot(0.25, 0.5)  # rounded up, never down
    assert math.isclose(gap.over(Norm(4.0, 1.0)), (0.5 + gap.reach) / 3.0, rel_tol=1e-15)
    assert gap.over(Norm(1.0, 1.0)) == math.inf


def test_the_table_lines_up_under_a_long_record_path():
    from types import SimpleNamespace

    from presk.cli.cmd_calibrate import step_table
    from presk.precision.step_gap import Measured, Row

    long = "@/some/where/deep/step_1e-3.json"
    rows = [Row("f64", 4.8e-15, 4.05e-15, 3.3e-15, 3.5), Row(long, 6e-6, 2.2e-6, 2e-6, 1.7)]
    setup = SimpleNamespace(
        step=11, core=SimpleNamespace(entry="loss"), warmup=10, lr=3e-3, reference="ball", bits=64
    )
    lines = step_table(Measured(rows, 3.5, 1.1e-2, 5e-17), setup).splitlines()
    header, *body = lines[1:-1]
    ends = {len(line) for line in (header, *body)}
    assert len(ends) == 1, lines  # every row as wide as the header: the columns line up
    assert body[1].startswith(long + " ")
