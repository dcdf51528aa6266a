"""`sum_to` over leading axes (a bias's or a LayerNorm's gradient) adds x's rows in turn to
a scratch row of sums (presk/prims/axes.py, `_sum_leading`): each output element is still
0 plus x's terms in row-major order, one rounding an addition. The bits are checked
against that chain computed by numpy in the machine type, on the kernel evaluator and
natively on one thread and two (the widest split over both), at widths that take one block, several, and a prime
that takes blocks of one element."""

from __future__ import annotations

import numpy as np
import pytest

import presk

PROGRAM = """
dim B
dim N
dim M
fn bias_grad(g : ℝ[B, N, M], b : ℝ[M]) -> ℝ[M] { sum_to(g, b) }
fn rows_grad(g : ℝ[B, N, M], w : ℝ[N, M]) -> ℝ[N, M] { sum_to(g, w) }
"""


def _chain(g: np.ndarray, lead: int) -> np.ndarray:
    """0, then each of g's rows over its `lead` leading axes added in order, in g's type."""
    acc = np.zeros(g.shape[lead:], g.dtype)
    for row in g.reshape(-1, *g.shape[lead:]):
        acc = acc + row
    return acc


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize(
    ("entry", "m", "lead"),
    [("bias_grad", 200, 2), ("bias_grad", 1536, 2), ("bias_grad", 509, 2), ("rows_grad", 48, 1)],
)
def test_a_leading_sum_is_the_in_order_chain(dtype, entry, m, lead):
    machine = np.float64 if dtype == "f64" else np.float32
    rng = np.random.default_rng(m)
    # terms of mixed sizes and signs, so that the order of the additions shows in the bits
    shape = (4, 16, m)  # 64 rows of 1536: enough work to split over two threads
    g = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)).astype(machine)
    like = np.zeros(g.shape[lead:], machine)
    expected = _chain(g, lead)
    # the terms tell the orders apart: the rows summed backwards give other bits
    assert not np.array_equal(expected, _chain(g[::-1, ::-1], lead))
    core = presk.load(PROGRAM).elaborate(entry, dims={"B": shape[0], "N": shape[1], "M": m})
    kernels = core.lower(dtype)
    for backend, threads in [("kernel", None), ("mlir", 1), ("mlir", 2)]:
        out = kernels.compile(backend, threads)(g, like)
        got = np.asarray(out, machine)
        assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), (backend, threads)
