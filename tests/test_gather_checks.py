"""The mlir backend checks tokens and targets read from the arguments before any launch:
a token or target out of range is refused (E8003, at its op) and no kernel has run, and
the launches between the checks stay one native segment."""

from __future__ import annotations

import numpy as np
import pytest

from presk import api
from presk.errors import RuntimeDataError

ENTRY = "MiniGPT{64, 16, 2, 2}.loss"


@pytest.fixture(scope="module")
def compiled():
    core = api.load("tutorial/05_minigpt.psk").elaborate(ENTRY, {"B": 1, "T": 8})
    return core, core.lower("f32").compile("mlir", threads=1)


@pytest.mark.parametrize(
    ("tokens", "targets", "says"),
    [
        ([1, 2, 3, 4, 5, 6, 7, 64], [1] * 8, "token 64 is outside [0, 64) (at MiniGPT.apply/%0)"),
        ([1] * 8, [0, -1, 0, 0, 0, 0, 0, 0], "target -1 is outside [0, 64) (at MiniGPT.loss/%0)"),
    ],
)
def test_an_index_out_of_range_is_refused_at_its_op(compiled, tokens, targets, says):
    core, f = compiled
    with pytest.raises(RuntimeDataError) as e:
        f(core.params(0), np.array([tokens]), np.array([targets]))
    assert e.value.code == "E8003" and says in str(e.value)


def test_the_argument_checks_run_first_and_the_launches_are_one_segment(compiled):
    core, f = compiled
    f(core.params(0), np.ones((1, 8), np.int64), np.ones((1, 8), np.int64))
    (schedule,) = f.backend.schedules.values()
    labels = [label for _, label in schedule.segments]
    checks = [x for x in labels if str(x) == "host: gather check"]
    assert len(checks) == 2 and labels[:2] == checks  # the tokens' and the targets'
    assert sum(isinstance(x, list) for x in labels) == 1  # every launch in one segment


# Targets along an axis other than the last: the check reads the row's size (T = 3), not
# the last axis's (8), so a valid target runs and one past the row is refused before any
# kernel reads by it.
ROWS_NOT_LAST = """dim B, T
fn f(x : ℝ[B, T, 8], t : nat[B, 8]) -> ℝ[B, 8] {
  cross_entropy[T](x, t)
}
"""


@pytest.mark.parametrize("backend", ["interp", "kernel", "mlir"])
def test_targets_index_the_rows_axis_wherever_it_is(tmp_path, backend):
    path = tmp_path / "rows.psk"
    path.write_text(ROWS_NOT_LAST)
    core = api.load(str(path)).elaborate("f", {"B": 1, "T": 3})
    f = core.compile(backend)
    x = np.linspace(-1, 1, 24).reshape(1, 3, 8)
    assert np.isfinite(f(x, np.full((1, 8), 2))).all()
    with pytest.raises(RuntimeDataError) as e:
        f(x, np.full((1, 8), 5))
    assert e.value.code == "E8003" and "target 5 is outside [0, 3)" in str(e.value)
