"""`presk solve --step`: a budget on one training step's update gap, solved by greedy
narrowing measured natively (presk/precision/step_solve.py), on the MLP regression
trained 30 steps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import REPO, run_in_process

import presk
from presk import realize
from presk.precision.profile import PAIRS
from presk.precision.step_gap import Setup
from presk.precision.step_solve import solve_step
from presk.runtime.inputs import parameters
from presk.stages import launch_sites
from presk.toolchain import host_cpu

MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")
ENTRY = ["--entry", "Regression.loss", "--dim", "N=4"]


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("mlp")
    argv = ["train", MLP, *ENTRY, "--steps", "30", "--backend", "mlir", "--quiet"]
    proc = run_in_process("presk", *argv, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return str(out / "checkpoint.psk.d")


def _solved(weights: str, out, *flags: str, objective: str = "bytes") -> tuple[list[str], dict]:
    """presk solve --step's summary lines and the record it wrote (of traffic unless asked,
    so that the decisions do not depend on this machine's speeds)."""
    argv = ["solve", "--step", MLP, *ENTRY, "--weights", weights, *flags, "--out", str(out)]
    argv += ["--objective", objective]
    proc = run_in_process("presk", *argv)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines(), json.loads(out.read_text())


@pytest.fixture(scope="module")
def loose(weights, tmp_path_factory):
    return _solved(weights, tmp_path_factory.mktemp("loose") / "R.json", "--budget", "1e-1")


def _gap_line(lines: list[str]) -> str:
    (line,) = [line for line in lines if line.startswith("measured update gap")]
    return line


def test_a_loose_budget_narrows_and_ends_inside(loose):
    lines, record = loose
    assert ": inside;" in _gap_line(lines)
    assert float(_gap_line(lines).split()[4]) <= 1e-1 / 2.5
    core = presk.load(MLP).elaborate("Regression.loss", {"N": 4}, train_step=True)
    optimizer = [s for s in launch_sites(core.lower("f64").module) if s.startswith("adamw.step/")]
    # the default is the optimizer's rung: the step's arguments are the state it stores
    assert {record["storage"].get(s, record["default"]) for s in optimizer} == {record["default"]}
    assert record["storage"] or record["default"] != "f64", "nothing narrowed at 1e-1"
    assert realize.read(f"@{lines[-1].split()[-1]}").storage == record["storage"]


def test_a_function_decision_types_all_its_sites(loose):
    """Each function narrowed names every one of its launch sites, in one type."""
    _, record = loose
    core = presk.load(MLP).elaborate("Regression.loss", {"N": 4}, train_step=True)
    sites = launch_sites(core.lower("f64").module)
    for function in {s.rsplit("/", 1)[0] for s in record["storage"]}:
        mine = [s for s in sites if s.rsplit("/", 1)[0] == function]
        types = {record["storage"].get(s) for s in mine}
        assert len(types) == 1 and None not in types, function


def test_a_tiny_budget_narrows_only_what_the_update_does_not_read(weights):
    """At 1e-12 nothing that reaches θ′ narrows: what does narrow (the loss's value, the
    target's gradient with respect to the inputs) leaves the gap all-f64's."""
    core = presk.load(MLP).elaborate("Regression.loss", {"N": 4}, train_step=True)
    setup = Setup(core, parameters(core.view, 0, weights), None, 10, 1e-2, 0, 64)
    s = solve_step(setup, "function", 1e-12, 2.5, 40)
    assert s.gap == s.base <= 1e-12 / 2.5
    narrowed = {k for k, t in s.assignment.items() if t != "f64"}
    reach = {"adamw.step", "adamw.clip", "Dense.apply.bwd", "Regression.apply.bwd"}
    assert not narrowed & reach, narrowed
    assert s.kept < len(s.decisions)


def test_grain_value_decides_stored_values_outside_the_optimizer_state(weights, tmp_path):
    lines, record = _solved(
        weights, tmp_path / "R.json", "--budget", "1e-1", "--grain", "value", "--measurements", "6"
    )
    assert ": inside;" in _gap_line(lines)
    assert record["storage"], "nothing narrowed at 1e-1"
    assert not [s for s in record["storage"] if s.startswith("adamw.step/")]
    assert any("measurements: 6 (the cap" in line for line in lines)


def test_the_record_trains_with_equal_bits_on_kernel_and_mlir(loose, tmp_path):
    lines, _ = loose
    record = lines[-1].split()[-1]
    trained = {}
    for backend in ("kernel", "mlir"):
        out = tmp_path / backend
        argv = ["train", MLP, *ENTRY, "--steps", "3", "--backend", backend, "--quiet"]
        proc = run_in_process("presk", *argv, "--realize", f"@{record}", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        core = presk.load(MLP).elaborate("Regression.loss", {"N": 4})
        trained[backend] = core.params(weights=str(out / "checkpoint.psk.d"))
    for path, value in trained["kernel"].items():
        kernel, native = np.asarray(value), np.asarray(trained["mlir"][path])
        assert kernel.dtype == native.dtype and kernel.tobytes() == native.tobytes(), path


def test_under_a_profile_the_step_saves_time_and_bf16_is_no_licence(weights, tmp_path):
    # a profile where f32 computes and streams twice as fast as f64, and bf16, computed in
    # f32, streams its half of the bytes at a quarter of f32's rate: at a budget loose
    # enough for bf16 (the traffic solve above takes it), the time solve takes f32 only
    rates = {"f64": (1e9, 1e9), "f32": (2e9, 2e9), "bf16": (2e9, 5e8)}
    profile = {
        "machine": {"cpu": host_cpu()[0], "threads": 1},
        "date": "2026-12-01",
        "types": {
            t: {"latency": 1e-9, "work_rate": w, "byte_rate": b} for t, (w, b) in rates.items()
        },
        "conversions": dict.fromkeys(PAIRS, {"fixed": 0.0, "element": 1e-12}),
    }
    path = tmp_path / "P.json"
    path.write_text(json.dumps(profile))
    lines, record = _solved(
        weights, tmp_path / "R.json", "--budget", "1e-1", "--profile", str(path), objective="time"
    )
    assert ": inside;" in _gap_line(lines)
    core = presk.load(MLP).elaborate("Regression.loss", {"N": 4}, train_step=True)
    sites = launch_sites(core.lower("f64").module)
    assert {record["storage"].get(s, record["default"]) for s in sites} == {"f32"}
    assert any(line.startswith("predicted time (") for line in lines)
