"""What a schedule keeps from one call for the next (presk/backends/schedule.py): its arena,
once no result lies over it (a reused arena, whatever it holds, gives the bits of a new
one, and a result still alive is never written over), and the arguments it took as given
(a parameter changed in place or replaced is read again)."""

from __future__ import annotations

import numpy as np
import pytest

import presk
from presk.backends.schedule import KEPT_ARENAS
from presk.runtime.values import leaves

MINIGPT = "tutorial/05_minigpt.psk"
ENTRY = "MiniGPT{64, 16, 2, 2}.loss"


def _bits(value) -> list[tuple[str, bytes]]:
    return [(path, np.asarray(t.data).tobytes()) for path, t in leaves(value)]


def _step(realize: str, train_step: bool):
    core = presk.load(MINIGPT).elaborate(ENTRY, dims={"B": 2, "T": 8}, train_step=train_step)
    compiled = core.lower(realize).compile("mlir", threads=1)
    call = compiled.drawn(0)
    call()  # traces the schedule
    (schedule,) = compiled.backend.schedules.values()
    return call, schedule


@pytest.mark.parametrize("realize, train_step", [("f64", False), ("f32", True), ("bf16", True)])
def test_a_reused_arena_full_of_nans_gives_a_new_arenas_bits(realize, train_step):
    call, schedule = _step(realize, train_step)
    fresh = _bits(call())
    arena = schedule._arenas[0]  # the one `fresh` was over, free again
    arena[...] = 0xFF  # every float a NaN, every integer -1: what a kernel must not read
    again = call()
    assert any(a is arena for a in schedule._arenas), "the call took a new arena"
    assert _bits(again) == fresh


def test_a_result_still_alive_keeps_its_arena_and_its_bits():
    call, schedule = _step("f32", True)
    kept = [call() for _ in range(KEPT_ARENAS + 3)]
    bits = [_bits(r) for r in kept]
    assert all(b == bits[0] for b in bits)
    assert len(schedule._arenas) <= KEPT_ARENAS, "the arenas kept are bounded"
    bases = {id(np.asarray(t.data).base) for r in kept for _, t in leaves(r)}
    assert len(bases) >= len(kept), "two live results share an arena"
    del kept
    before = list(schedule._arenas)
    call()
    assert any(a is b for a in schedule._arenas for b in before), "a freed arena was not reused"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_parameter_changed_or_replaced_between_calls_is_read_again(dtype):
    """A call takes a leaf it was given before without converting it again (f32 given to
    an f32 entry), but reads its memory each call: changed in place, replaced by another
    array, or (f64, converted each call) either, the call sees it."""
    core = presk.load(MINIGPT).elaborate("MiniGPT{64, 16, 2, 2}.apply", dims={"B": 2, "T": 8})
    native, evaluator = (core.lower("f32").compile(b) for b in ("mlir", "kernel"))
    params = {k: v.astype(dtype) for k, v in core.params(seed=0).items()}
    params["head"] = np.random.default_rng(1).normal(size=params["head"].shape).astype(dtype)
    tokens = np.arange(16).reshape(2, 8) % 64

    def same_as_evaluator():
        return np.array_equal(native(params, tokens), evaluator(params, tokens))

    assert same_as_evaluator()
    for change in [
        lambda: params["head"].__imul__(2),  # in place
        lambda: params.update(head=params["head"] / 4),  # another array
        lambda: params["tok"][3].__iadd__(1),  # a row the tokens read
    ]:
        before = native(params, tokens)
        change()
        assert not np.array_equal(native(params, tokens), before) and same_as_evaluator()
