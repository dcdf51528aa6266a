"""The host's `sample` (the kernel and mlir backends'): an index a row from the softmax,
the first whose running sum passes the draw, and the last where rounding leaves the
whole sum at or below it, as the reference picks."""

from __future__ import annotations

import numpy as np

from presk.backends.kernel import sample


class Fixed:
    def __init__(self, u: float):
        self.u = u

    def random(self, shape):
        return np.full(shape, self.u)


def test_the_first_index_whose_running_sum_passes_the_draw():
    logits = np.log(np.array([[0.25, 0.25, 0.5], [0.5, 0.25, 0.25]]))
    assert sample(logits, 1, lambda: Fixed(0.3)).tolist() == [1, 0]


def test_a_draw_past_the_rounded_sum_picks_the_last_index():
    logits = np.zeros((2, 3))
    assert sample(logits, 1, lambda: Fixed(1.0)).tolist() == [2, 2]
