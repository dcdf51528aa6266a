"""`--plan tuned` (presk/backends/tuning.py): each nest measured at the cost model's best
points and moved to the fastest, the pick cached beside the kernel cache and verified on
load, the measuring bounded. A fake timer stands in for the clock: these tests check that
tuning ran, picked what its timer said was fastest and was cached, never that any point
was faster (tests/test_layouts.py checks that every point it measures gives the default's
bits)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import REPO, assert_user_error, run_in_process

from presk import plans, stages
from presk.backends import tuning
from presk.backends.libraries import Entry
from presk.backends.native import Compiler
from presk.cli import main
from presk.ir.ops import string_attr
from presk.kernel.contraction import Layout
from presk.kernel.cost import FITTED, Target
from presk.kernel.planner import offers
from presk.toolchain import default_threads
from tests.conformance.suite import Case, module_of

ATTENTION = Case("attention", "tutorial/03_attention.psk", "attention", ("B=1", "T=8"))


def _auto(machine: str = "f32"):
    """The attention's kernel stage at the cost model's layouts, as a tuned plan starts."""
    module = module_of(ATTENTION)
    stages.kernel(module, machine, plans.AUTO)
    return module


def _measured_points(module) -> dict[str, list[Layout]]:
    """The points tuning measures at each site that has more than one."""
    kind = string_attr(module.operation, "psk_kernel.type")
    found = {
        o.site: tuning.measured_points(o) for o in offers(module.operation, kind, Target.host())
    }
    return {site: points for site, points in found.items() if len(points) > 1}


class LastFastest:
    """A timer under which the point the model ranks last of those measured runs fastest,
    so that the pick moves every site; it counts its runs."""

    def __init__(self, points: dict[str, list[Layout]]):
        self.points = points
        self.runs = 0

    def __call__(self, run: tuning.Run) -> float:
        self.runs += 1
        ranked = self.points[run.site]
        return 1.0 + len(ranked) - 1 - ranked.index(run.layout)


def _no_timing(run: tuning.Run) -> float:
    raise AssertionError(f"{run.site} measured again")


def _layouts(module) -> dict[str, dict]:
    """Each site's layout as a plan writes it, the epilogue left out."""
    kind = string_attr(module.operation, "psk_kernel.type")
    return {
        o.site: tuning.plan_point(Layout.read(o.kernels[0].attributes["psk_kernel.layout"]))
        for o in offers(module.operation, kind, Target.host())
    }


def test_tuning_moves_each_nest_to_what_it_measured_fastest_and_a_second_run_measures_nothing(
    tmp_path,
):
    module = _auto()
    points = _measured_points(module)
    assert points, "no nest with two points to measure"
    timer = LastFastest(points)
    first = tuning.tune(module, default_threads(), Compiler(tmp_path), 60.0, timer)
    assert timer.runs >= tuning.ROUNDS * sum(len(p) for p in points.values())
    assert set(first.measured) == set(points) and not first.cached and not first.left
    for site, ranked in points.items():
        assert first.picks[site] == ranked[-1]
        assert _layouts(module)[site] == tuning.plan_point(ranked[-1]), site
    assert len(list((tmp_path / tuning.FOLDER).glob("*/*.json"))) == len(points)

    again = _auto()
    second = tuning.tune(again, default_threads(), Compiler(tmp_path), 60.0, _no_timing)
    assert not second.measured and set(second.cached) == set(points)
    assert _layouts(again) == _layouts(module)


class LastFasterByLittle(LastFastest):
    """The last point measured a little faster than the others, within the margin."""

    def __call__(self, run: tuning.Run) -> float:
        self.runs += 1
        last = run.layout == self.points[run.site][-1]
        return 1.0 - tuning.MARGIN / 2 if last else 1.0


def test_a_point_only_a_little_faster_than_the_models_does_not_replace_it(tmp_path):
    module = _auto()
    before = _layouts(module)
    points = _measured_points(module)
    timer = LastFasterByLittle(points)
    tuned = tuning.tune(module, default_threads(), Compiler(tmp_path), 60.0, timer)
    assert set(tuned.measured) == set(points) and timer.runs > 0
    assert all(tuned.picks[site] == ranked[0] for site, ranked in points.items())
    assert _layouts(module) == before


def _entries(tmp_path) -> list[Entry]:
    return [
        Entry(path.parent.parent, path.stem, ".txt", ".json")
        for path in sorted((tmp_path / tuning.FOLDER).glob("*/*.json"))
    ]


@pytest.mark.parametrize("damage", ["truncated", "digest", "text", "not one of its points"])
def test_a_cached_pick_is_verified_on_load_and_measured_again_if_it_fails(tmp_path, damage):
    module = _auto()
    points = _measured_points(module)
    tuning.tune(module, default_threads(), Compiler(tmp_path), 60.0, LastFastest(points))
    entry = _entries(tmp_path)[0]
    record = json.loads(entry.lib.read_text())
    if damage == "truncated":
        entry.lib.write_bytes(entry.lib.read_bytes()[:10])
    elif damage == "digest":
        entry.digest_file.write_text("0" * 32)
    elif damage == "text":  # another site's, or another machine's
        entry.text_file.write_text(entry.text_file.read_text() + "\n")
    else:  # whole and its own, but naming a point that is none of those measured
        record["pick"] = {**record["pick"], "tile": [3, 3]}
        entry.store(entry.text_file.read_text(), json.dumps(record).encode())
    timer = LastFastest(points)
    again = tuning.tune(_auto(), default_threads(), Compiler(tmp_path), 60.0, timer)
    assert len(again.measured) == 1 and len(again.cached) == len(points) - 1
    assert timer.runs > 0


def test_the_bound_leaves_the_sites_it_does_not_reach_at_the_models_point(tmp_path):
    module = _auto()
    before = _layouts(module)
    points = _measured_points(module)
    tuned = tuning.tune(module, default_threads(), Compiler(tmp_path), 0.0, _no_timing)
    assert set(tuned.left) == set(points) and not tuned.measured and not tuned.cached
    assert _layouts(module) == before
    assert not list((tmp_path / tuning.FOLDER).glob("*/*"))


def test_the_default_plan_is_measured_only_on_a_core_the_model_was_not_fitted_on(monkeypatch):
    cpu, width = next(iter(FITTED.items()))
    monkeypatch.setattr(tuning, "host_cpu", lambda: (cpu, ""))
    monkeypatch.setattr(tuning, "vector_bytes", lambda: width)
    assert tuning.default_plan() == plans.AUTO
    monkeypatch.setattr(tuning, "host_cpu", lambda: ("a-core-never-measured", ""))
    assert tuning.default_plan() == plans.TUNED


@pytest.mark.parametrize("plan,bound", [("tuned", None), ("tuned:2.5", 2.5), ("tuned:0", 0.0)])
def test_a_tuned_plan_is_spelled_with_its_bound(plan, bound):
    assert plans.plan_path(plan) == plan and plans.is_tuned(plan)
    assert plans.tuning_budget(plan) == bound


ATTENTION_ARGV = [str(REPO / "tutorial/03_attention.psk"), "--entry", "attention"]
ATTENTION_ARGV += ["--dim", "B=1", "--dim", "T=8"]


@pytest.mark.parametrize("bound", ["x", "-1", "nan", "inf"])
def test_a_bad_bound_is_refused_in_one_line(bound):
    proc = run_in_process(
        "presk", "run", *ATTENTION_ARGV, "--backend", "mlir", "--plan", f"tuned:{bound}"
    )
    assert "tuned:S bounds the measuring to S seconds" in assert_user_error(proc, "E0001")


def _output(argv: list[str]) -> np.ndarray:
    proc = run_in_process("presk", "run", *argv, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_presk_plan_tune_writes_a_plan_that_changes_no_bit(tmp_path):
    out = tmp_path / "tuned.json"
    argv = [*ATTENTION_ARGV, "--realize", "f32"]
    assert main.main(["plan", *argv, "--tune", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["realize"] == "f32" and written["layout"]
    tuned = _output([*argv, "--backend", "mlir", "--plan", f"@{out}"])
    default = _output([*argv, "--backend", "mlir", "--plan", "default"])
    assert tuned == default
