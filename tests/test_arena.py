"""presk/backends/arena.py: buffers share the arena's bytes only where their lives do not
overlap, and a schedule that shares them gives the bits of one that does not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import presk
from presk.backends.arena import BEFORE, FOREVER, Bump, Shared, aligned
from presk.backends.schedule import Schedule
from presk.runtime.values import leaves


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 5000),  # bytes
            st.integers(0, 6),  # steps from its making to its last use
            st.sampled_from(["plain", "plain", "plain", "result", "before"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_no_two_buffers_alive_at_once_share_a_byte(buffers):
    # a trace: buffer i made at step i // 2, used until then + span; some outlive the call
    # (a result), some are written before every step (dropout's key)
    made = [i // 2 for i in range(len(buffers))]
    bump = Bump()
    for (nbytes, span, kind), step in zip(buffers, made, strict=True):
        offset = bump.place(nbytes, step)
        bump.used(offset, step + span)
        if kind == "result":
            bump.used(offset, FOREVER)
        if kind == "before":
            bump.used(offset, BEFORE)
    lives = bump.lives()
    shared = Shared(lives)
    places = [shared.place(n, step) for (n, _, _), step in zip(buffers, made, strict=True)]
    assert shared.size <= aligned(bump.size)
    spans = [
        (lives.first[i], lives.last[i], (places[i], max(buffers[i][0], 1)))
        for i in range(len(buffers))
    ]
    for i, (first_i, last_i, bytes_i) in enumerate(spans):
        for first_j, last_j, bytes_j in spans[:i]:
            alive_together = first_i <= last_j and first_j <= last_i
            assert not (alive_together and _overlap(bytes_i, bytes_j)), (i, spans)


def _step(share: bool):
    core = presk.load("corpus/nlp/05_gpt.psk").elaborate(
        "loss", consts={"D": 16, "H": 2, "L": 2}, dims={"B": 2, "T": 8}, train_step=True
    )
    native = core.lower("f32").compile("mlir", threads=2)
    step = native.drawn(0)
    step()  # traced: the schedule's key known
    ((key, schedule),) = native.backend.schedules.items()
    if not share:
        schedule = native.backend.schedules[key] = Schedule(native.backend, *key, share=False)
    out = [step(), step(), step()]  # each from the same inputs; the arenas alternate
    return [[np.asarray(t.data).tobytes() for _, t in leaves(o)] for o in out], schedule.arena


def test_a_training_step_sharing_its_arena_gives_the_bits_of_one_that_does_not():
    shared, shared_bytes = _step(share=True)
    own, own_bytes = _step(share=False)
    assert shared == own
    # the optimizer's and the gradient's intermediates live a step or two: the arena
    # shrinks to well under half (0.65 GB to 0.14 at GPT-2-small's width, one layer)
    assert shared_bytes < own_bytes / 2
