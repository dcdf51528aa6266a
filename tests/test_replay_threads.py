"""Split launches run by the replay runtime's native workers (presk/backends/replay.c):
a split launch no longer ends a segment, and a call's bits are those of one thread and
of the pieces run from Python, in f64, f32 and bf16, forward and training step; the
pool survives a fork and concurrent callers, and a breakdown times split steps."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np
import pytest

import presk
from presk.backends.breakdown import Profile
from presk.backends.replay import Segment
from presk.backends.schedule import Launch
from presk.runtime.values import leaves

MODELS = {  # (program, entry, consts, dims)
    "tiny": ("tutorial/05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.loss", {}, {"B": 2, "T": 8}),
    "corpus": ("corpus/nlp/05_gpt.psk", "loss", {"D": 32, "H": 2, "L": 1}, {"B": 2, "T": 8}),
    # large enough that the backend's own threshold splits contractions over two threads
    "corpus-split": (
        "corpus/nlp/05_gpt.psk", "loss", {"D": 64, "H": 2, "L": 2}, {"B": 2, "T": 64}
    ),
}  # fmt: skip


@cache
def _kernels(model: str, realize: str, train: bool):
    path, entry, consts, dims = MODELS[model]
    core = presk.load(path).elaborate(entry, consts=consts, dims=dims, train_step=train)
    return core.lower(realize)


def _call(model: str, realize: str, train: bool, threads: int, split_all: bool = True):
    """A compiled call on drawn inputs and its backend, traced; with `split_all` every
    launch that may split does, however small."""
    compiled = _kernels(model, realize, train).compile("mlir", threads=threads)
    if split_all:
        compiled.backend.split_work = 0
    call = compiled.drawn(0)
    call()
    return call, compiled.backend


def _schedule(backend):
    (schedule,) = backend.schedules.values()
    return schedule


def _bits(value) -> list[tuple[str, np.ndarray]]:
    """Each leaf's path and raw bytes."""
    return [(path, np.asarray(t.data).reshape(-1).view(np.uint8)) for path, t in leaves(value)]


def _same_bits(a, b) -> bool:
    """Whether two results hold the same bits, leaf by leaf."""
    return all(
        p == q and np.array_equal(x, y) for (p, x), (q, y) in zip(_bits(a), _bits(b), strict=True)
    )


def _split_in_segments(schedule) -> int:
    """The launches the schedule's segments split in pieces."""
    return sum(
        p > 1 for step, _ in schedule.segments if isinstance(step, Segment) for p in step.pieces
    )


def _threads_of_this_process() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.parametrize("train", [False, True], ids=["forward", "train-step"])
@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("model", ["tiny", "corpus"])
def test_split_segments_give_one_threads_bits_and_the_python_workers_bits(model, realize, train):
    one, one_backend = _call(model, realize, train, threads=1)
    two, two_backend = _call(model, realize, train, threads=2)
    python, python_backend = _call(model, realize, train, threads=2)
    segmented = _schedule(two_backend)
    splittable = sum(isinstance(x, Launch) and x.kernel.split > 1 for x in segmented.labels)
    assert _split_in_segments(segmented) == splittable > 0, "every splittable launch split"
    assert len(segmented.segments) == len(_schedule(one_backend).segments), (
        "a split launch ends no segment"
    )
    # one ctypes call a launch, each split launch's pieces on Python's thread pool
    stepwise = _schedule(python_backend)
    stepwise.segments = list(zip(stepwise.steps, stepwise.labels, strict=True))
    reference = one()
    assert _same_bits(two(), reference)
    assert _same_bits(python(), reference)


def test_the_backends_threshold_splits_the_corpus_gpt_inside_its_segments():
    two, backend = _call("corpus-split", "f32", False, threads=2, split_all=False)
    one, _ = _call("corpus-split", "f32", False, threads=1, split_all=False)
    assert _split_in_segments(_schedule(backend)) > 0
    assert all(isinstance(label, list) or not isinstance(label, Launch)
               for _, label in _schedule(backend).segments), "every launch runs in a segment"  # fmt: skip
    assert _same_bits(two(), one())


def test_a_forked_child_starts_workers_of_its_own_and_gets_the_same_bits():
    call, _ = _call("tiny", "f32", False, threads=2)
    expected = call()  # the parent's pool started
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one thread, whatever the parent had
        try:
            before = _threads_of_this_process()
            same = _same_bits(call(), expected)
            started = _threads_of_this_process() > before
            os.write(write, bytes([same, started]))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as child:
        said = child.read()
    os.waitpid(pid, 0)
    assert said == bytes([True, True]), f"the child's (same bits, started workers): {said}"


def test_concurrent_callers_share_the_pool_and_keep_the_bits():
    call, _ = _call("corpus-split", "f32", False, threads=2)  # mostly native time
    expected = call()
    barrier = threading.Barrier(4)

    def calls(_):
        barrier.wait()
        return [_same_bits(call(), expected) for _ in range(10)]

    with ThreadPoolExecutor(4) as pool:
        assert all(ok for run in pool.map(calls, range(4)) for ok in run)


def test_a_breakdown_times_every_split_launch_and_keeps_the_bits():
    call, backend = _call("corpus", "f32", True, threads=2)
    schedule = _schedule(backend)
    expected = call()
    schedule.profile = profile = Profile()
    timed = call()
    schedule.profile = None
    assert _split_in_segments(schedule) > 0
    assert _same_bits(timed, expected)
    kernels = {part.name: part for part in profile.parts(schedule) if part.kind == "kernel"}
    sites = {f"{x.site} {x.kernel.name}" for x in schedule.labels if isinstance(x, Launch)}
    assert kernels.keys() == sites
    assert sum(part.count for part in kernels.values()) == schedule.launches
    assert all(part.ms >= 0 for part in kernels.values())
