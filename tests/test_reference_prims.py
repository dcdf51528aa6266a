"""Every primitive on the reference against an independent computation: mpmath at a
higher precision (or exact data movement), from the same drawn operands.

The reference runs at P bits; the gap allowed is 2^(10−P) of the largest magnitude,
a few units of roundoff at P bits."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from programs import REPO, program_of, reference_run

from presk.runtime.values import Tensor

P = 96
HIGH = 320
DIMS = {"N": 3, "M": 4, "K": 5}
PRIMS = REPO / "tests" / "data" / "prims.psk"


def mp(a: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda x: mpmath.mpf(float(x)), otypes=[object])(a)


def _gelu(x):
    return x * (1 + mpmath.erf(x / mpmath.sqrt(2))) / 2


def _softmax_rows(a, mask=None):
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(a.shape[:-1]):
        row = a[idx]
        allowed = mask[idx] if mask is not None else np.ones(len(row), bool)
        m = max(row[allowed])
        e = [mpmath.exp(x - m) if ok else mpmath.mpf(0) for x, ok in zip(row, allowed, strict=True)]
        s = mpmath.fsum(e)
        out[idx] = [v / s for v in e]
    return out


def _contract(a, b):  # a[..., K] · b[K, ...]
    return np.tensordot(a, b, axes=([-1], [0]))


EXPECT = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b[:, None],
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1),
    "neg": lambda a: -a,
    "maximum": lambda a, b: np.where(a >= b, a, b),
    "exp_": np.vectorize(mpmath.exp, otypes=[object]),
    "log_": lambda a: np.vectorize(mpmath.log, otypes=[object])(a * a + mpmath.mpf("0.5")),
    "sqrt_": lambda a: np.vectorize(mpmath.sqrt, otypes=[object])(a * a + mpmath.mpf("0.25")),
    "tanh_": np.vectorize(mpmath.tanh, otypes=[object]),
    "sin_": np.vectorize(mpmath.sin, otypes=[object]),
    "cos_": np.vectorize(mpmath.cos, otypes=[object]),
    "erf_": np.vectorize(mpmath.erf, otypes=[object]),
    "abs_": np.vectorize(abs, otypes=[object]),
    "gelu_": np.vectorize(_gelu, otypes=[object]),
    "relu_": lambda a: np.where(a > 0, a, mpmath.mpf(0)),
    "where_": lambda a, b, c: np.where(c, a, b),
    "dot_": _contract,
    "matmul_": lambda a, b: np.stack([_contract(a[i], b[i]) for i in range(2)]),
    "ein_": lambda a, b: _contract(b, a.T),
    "sum_": lambda a: a.sum(axis=-1),
    "sum_all": lambda a: a.sum(),
    "mean_": lambda a: a.sum(axis=0) / a.shape[0],
    "softmax_": _softmax_rows,
    "softmax_masked": lambda a: _softmax_rows(a, np.tril(np.ones(a.shape, bool))),
    "cross_entropy_": lambda a, t: np.array(
        [-mpmath.log(_softmax_rows(a[i : i + 1])[0][t[i]]) for i in range(a.shape[0])], dtype=object
    ),
    "sum_to_": lambda a, b: a.sum(axis=0),
    "broadcast_like_": lambda b, a: np.broadcast_to(b, a.shape),
    "sign_": np.vectorize(mpmath.sign, otypes=[object]),
    "minimum": lambda a, b: np.where(a <= b, a, b),
    "pow_": lambda a, b: np.vectorize(mpmath.power, otypes=[object])(a * a + mpmath.mpf("0.5"), b),
    "to_real_": np.vectorize(mpmath.mpf, otypes=[object]),
}

# Data movement and selections: the reference must give these bit for bit.
EXACT = {
    "max_": lambda a: a.max(axis=1),
    "argmax_": lambda a: a.shape[1] - 1 - np.argmax(a[:, ::-1], axis=1),
    "embed_": lambda table, t: table[t],
    "split_": lambda a: a.reshape(3, 2, 5).transpose(1, 0, 2),
    "merge_": lambda a: a.transpose(1, 0, 2).reshape(3, 10),
    "rename_": lambda a: a,
    "causal": lambda a: np.tril(np.ones((3, 3), bool)),
    "dropout_": lambda a: a,  # outside training, dropout is the identity
}


def _leaves(args):
    return [a.data if isinstance(a, Tensor) else a for a in args]


def test_the_table_covers_every_entry():
    from presk.front.parser import parse

    entries = set(parse(PRIMS.read_text(), str(PRIMS)).functions)
    assert entries == set(EXPECT) | set(EXACT)


@pytest.mark.parametrize("entry", sorted(EXPECT))
def test_primitive_against_mpmath(entry):
    program = program_of(PRIMS, entry, DIMS)
    _, args, out = reference_run(program, bits=P)
    with mpmath.workprec(HIGH):
        ins = [mp(a) if a.dtype.kind == "f" else a for a in _leaves(args)]
        want = np.asarray(EXPECT[entry](*ins), dtype=object)
        got = np.asarray(out.data, dtype=object)
        assert got.shape == want.shape
        scale = max(max(abs(mpmath.mpf(x)) for x in want.flat), mpmath.mpf(2) ** -20)
        gap = max(abs(mpmath.mpf(g) - w) for g, w in zip(got.flat, want.flat, strict=True))
        assert gap <= mpmath.mpf(2) ** (10 - P) * scale, (entry, gap)


@pytest.mark.parametrize("entry", sorted(EXACT))
def test_selection_and_data_movement_are_exact(entry):
    program = program_of(PRIMS, entry, DIMS)
    _, args, out = reference_run(program, bits=P)
    want = EXACT[entry](*_leaves(args))
    got = out.data
    if got.dtype == object:
        got = np.vectorize(float)(got)
    assert np.array_equal(np.asarray(got), np.asarray(want))


def test_softmax_rows_sum_to_one():
    for entry in ("softmax_", "softmax_masked"):
        _, _, out = reference_run(program_of(PRIMS, entry, DIMS), bits=P)
        with mpmath.workprec(HIGH):
            for row in out.data.reshape(-1, out.data.shape[-1]):
                total = mpmath.fsum(mpmath.mpf(x) for x in row)
                assert abs(total - 1) <= mpmath.mpf(2) ** (10 - P)


def test_dropout_in_training_keeps_or_scales():
    program = program_of(PRIMS, "dropout_", DIMS)
    _, args, out = reference_run(program, bits=P, training=True)
    x = args[0].data
    y = np.vectorize(float)(out.data)
    kept = y != 0
    assert 0 < kept.sum() < kept.size
    assert np.allclose(y[kept], 2 * x[kept], rtol=0, atol=0)
    _, _, again = reference_run(program, bits=P, training=True, step=1)
    assert not np.array_equal(np.vectorize(float)(again.data) != 0, kept), (
        "a new step draws a new mask"
    )


def test_math_module_agrees_on_gelu_at_double_precision():
    # the exact gelu rounded to float64 is math's x·Φ(x) to within a few ulps
    program = program_of(PRIMS, "gelu_", DIMS)
    _, args, out = reference_run(program, bits=P)
    x = args[0].data
    want = x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) / 2
    assert np.allclose(np.vectorize(float)(out.data), want, rtol=1e-14, atol=1e-300)
