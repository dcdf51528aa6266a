"""Dropout's keep mask drawn in C by the replay runtime (presk/backends/draws.c): numpy's
Philox stream bit for bit, in any pieces, and so the kernel evaluator's bits on a
training step with dropout, on one thread and two."""

from __future__ import annotations

import numpy as np
import pytest

import presk
from presk.backends.native import Compiler
from presk.backends.replay import replay_for
from presk.backends.schedule import Launch
from presk.runtime import rng
from presk.runtime.values import leaves

RATES = [0.1, 0.5, 1 / 3, 0.0, 1.0, 5e-324, 1 - 2**-53, 2**-53, -1.0, 2.0, float("nan")]


def _bits(value) -> list[tuple[str, bytes]]:
    return [(path, np.asarray(t.data).tobytes()) for path, t in leaves(value)]


@pytest.fixture(scope="module")
def keep(tmp_path_factory):
    return replay_for(Compiler(tmp_path_factory.mktemp("cache"))).dropout_keep


@pytest.mark.parametrize("rate", RATES)
def test_the_runtimes_mask_is_numpys_in_any_pieces(keep, rate):
    draws = np.random.default_rng(7)
    for n in [1, 3, 4, 5, 8, 9, 63, 4099]:
        seed, path = int(draws.integers(2**31)), f"dropout/{n}/Block.apply/%2"
        expected = rng.generator(seed, path).random(n) >= rate
        k = rng.key(seed, path)
        key = np.array([k & (2**64 - 1), k >> 64, np.float64(rate).view(np.uint64)], np.uint64)
        mask = np.full(n, 7, np.int8)
        cuts = sorted({0, n, *draws.integers(0, n + 1, size=3).tolist()})
        for lo, hi in reversed(list(zip(cuts, cuts[1:], strict=False))):  # last piece first
            keep(key.ctypes.data, mask.ctypes.data, lo, hi)
        assert np.array_equal(mask, expected.astype(np.int8)), (rate, n, cuts)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_a_training_step_with_dropout_gives_the_kernel_evaluators_bits(realize, threads):
    core = presk.load("corpus/nlp/05_gpt.psk").elaborate(
        "loss", consts={"D": 16, "H": 2, "L": 1}, dims={"B": 2, "T": 8}, train_step=True
    )
    kernels = core.lower(realize)
    native = kernels.compile("mlir", threads=threads)
    native.backend.split_work = 0  # every splittable launch, the draws included, split
    expected = _bits(kernels.compile("kernel").drawn(0)())
    step = native.drawn(0)
    assert _bits(step()) == expected
    assert _bits(step()) == expected, "a second call, on the first's arena"
    (schedule,) = native.backend.schedules.values()
    kinds = {x.kernel.kind for x in schedule.labels if isinstance(x, Launch)}
    assert "dropout_keep" in kinds, "the masks were drawn by the runtime"
