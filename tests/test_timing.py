"""presk.timing.timed_in_turns: each call timed `repeat` times, in turns of back-to-back
blocks, each block after an untimed call, the calls' blocks alternating."""

from __future__ import annotations

from presk.timing import timed_in_turns


def test_calls_are_timed_in_alternating_blocks_each_after_an_untimed_call():
    order: list[str] = []
    calls = {name: (lambda name=name: order.append(name)) for name in ("a", "b")}
    runs = timed_in_turns(calls, repeat=5, turns=2)
    assert {name: len(times) for name, times in runs.items()} == {"a": 5, "b": 5}
    # two turns of 2 and 3 timed calls, each block one call longer for its warm-up
    assert "".join(order) == "aaabbbaaaabbbb"
    assert all(t >= 0 for times in runs.values() for t in times)
