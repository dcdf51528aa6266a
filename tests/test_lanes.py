"""Vector lanes change no bit: whole entries compiled natively in 2, 4 and the register's
width of lanes give the scalar code's bits (1 lane), in f64, f32 and bf16. Lanes go to
every contiguous elementwise loop (psk-vectorize, whose `bytes` are the lanes times the
arithmetic type's size) and to every contraction whose nest can take them (psk-lanes'
field, with a tile of that many columns, b packed, where the default's tile has fewer)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from presk import plans, stages
from presk.backends.host import CallContext
from presk.backends.kernel import KernelBackend
from presk.backends.mlir import MlirBackend
from presk.core.program import read_host_program
from presk.errors import RealizationError
from presk.kernel.contraction import Layout
from presk.kernel.machine import MACHINES
from presk.kernel.relayout import contraction_kernels, layout_kernels, rebuild
from presk.runtime.values import Tensor, leaves
from presk.toolchain import vector_bytes
from tests.conformance.suite import TYPES, Case, inputs, module_of

# contractions of every kind a training step has: dot, ein and their adjoints
LOSS_GRAD = Case(
    "MiniGPT loss_grad (tiny)",
    "tutorial/05_minigpt.psk",
    "MiniGPT{64, 16, 2, 2}.loss_grad",
    ("B=2", "T=8"),
)
ROWS = Case("elementwise and softmax rows", "tests/data/lanes.psk", "rows", ("N=3", "M=37"))


def _lane_counts(machine: str) -> list[int]:
    """2, 4 and the register's width for the machine type's arithmetic."""
    return sorted({2, 4, vector_bytes() // MACHINES[machine].arith.itemsize})


def _points(layout: Layout, lanes: int) -> list[Layout]:
    """The layouts to try for `lanes`, the least change first."""
    points = [replace(layout, lanes=lanes)]
    if layout.form == "tiled":
        wider = replace(layout, lanes=lanes, tile=(layout.tile[0], lanes))
        points += [wider, replace(wider, pack="b")]
    return points


def _contractions_in_lanes(module, lanes: int) -> int:
    """Every contraction kernel moved to the first of its `_points` it can take; the
    number moved."""
    moved = 0
    for f in contraction_kernels(module.operation).values():
        for point in _points(Layout.read(f.attributes["psk_kernel.layout"]), lanes):
            try:
                rebuild(f, lambda _old, point=point: point)
            except RealizationError:  # E7002: this nest cannot take that point
                continue
            moved += 1
            break
    return moved


def _native(case: Case, machine: str, lanes: int):
    """The case's output compiled natively in `lanes` lanes (1: scalar code), on one
    thread; the contraction kernels it put in lanes, and the affine stage's text."""
    module = module_of(case)
    lowering = stages.Lowering.of(machine, plans.DEFAULT)
    lowering.lower(module)  # every layout scalar
    realization = lowering.realization
    moved = _contractions_in_lanes(module, lanes) if lanes > 1 else 0
    stages.affine(module, lanes * MACHINES[machine].arith.itemsize)
    text = str(module)
    backend = MlirBackend(read_host_program(module), module, MACHINES[machine], realization, 1)
    return backend.call(inputs(case), CallContext()), moved, text


def _bits(value) -> list[tuple[str, np.ndarray]]:
    return [(path, np.asarray(t.data).reshape(-1).view(np.uint8)) for path, t in leaves(value)]


@pytest.mark.parametrize("machine", TYPES)
@pytest.mark.parametrize("case", [LOSS_GRAD, ROWS], ids=lambda c: c.name)
def test_every_count_of_lanes_gives_the_scalar_bits(case, machine):
    scalar, _, text = _native(case, machine, 1)
    assert "vector<" not in text, "the scalar build has no vectors"
    for lanes in _lane_counts(machine):
        out, moved, text = _native(case, machine, lanes)
        assert f"vector<{lanes}x" in text, f"{lanes} lanes: no vector of {lanes}"
        if case is LOSS_GRAD:
            assert moved, f"{lanes} lanes: no contraction took them"
        for (path, want), (_, got) in zip(_bits(scalar), _bits(out), strict=True):
            assert np.array_equal(want, got), f"{case.name} {machine}, {lanes} lanes: {path}"


# softmax (plain and masked), cross-entropy and its derivative, whose rows' maxima run in
# lanes, and max, whose maximum stays a loop an element at a time
MAXIMA = Case("rows' maxima", "tests/data/maxima.psk", "rows", ("N=8", "M=32", "K=37"))
NAN, INF = float("nan"), float("inf")


def _awkward_rows() -> list:
    """MAXIMA's inputs with rows whose maximum is a tie of −0 and +0 (whose first
    zero each count of lanes meets in another place), NaN first, NaN later, +inf, −inf but
    one, all −inf; in the masked softmax also NaN where the mask refuses."""
    x, s, t, ct = inputs(MAXIMA)
    xs = np.array(x.data)
    xs[1] = -1.0
    xs[1, [3, 17]], xs[1, [6, 30]] = -0.0, 0.0
    xs[2] = -5.0
    xs[2, [4, 5]], xs[2, 20] = -0.0, 0.0
    xs[3, 0] = NAN
    xs[4, 9] = NAN
    xs[5, [11, 27]] = INF
    xs[6] = -INF
    xs[6, 13] = 2.5
    xs[7] = -INF
    ss = np.array(s.data)
    ss[0, 0], ss[0, 1:] = -0.0, NAN
    ss[5, :6], ss[5, 20] = [-1.0, -0.0, 0.0, -2.0, -0.0, 0.0], NAN
    ss[20, 7] = NAN
    ss[30, 30], ss[30, 2] = INF, -INF
    ss[35, :] = -INF
    ss[36, :] = -3.0
    ss[36, [1, 17]], ss[36, 33] = -0.0, 0.0
    ts = np.array(t.data)
    ts[1], ts[2] = 3, 20  # a target at a zero maximum: x_t − m is a zero
    return [
        Tensor(x.type, xs),
        Tensor(s.type, ss),
        Tensor(t.type, ts),
        Tensor(ct.type, np.array(ct.data)),
    ]


def _lowered(machine: str, form: str):
    """MAXIMA's kernel stage in `machine`, every softmax in `form`; its realization."""
    module = module_of(MAXIMA)
    lowering = stages.Lowering.of(machine, plans.DEFAULT)
    lowering.lower(module)
    for f in layout_kernels(module.operation).values():
        rebuild(f, lambda old: replace(old, form=form))
    return module, lowering.realization


def _same(want, got) -> bool:
    """Bit for bit, but for the sign of a NaN in bf16: the evaluator's rounding to bf16
    (ml_dtypes) keeps it, native code's (arith-expand) makes every NaN positive."""
    w, g = np.asarray(want.data), np.asarray(got.data)
    if w.dtype == MACHINES["bf16"].storage:
        nan = np.isnan(w.astype(np.float32))
        if not np.array_equal(nan, np.isnan(g.astype(np.float32))):
            return False
        w, g = w[~nan], g[~nan]
    return np.array_equal(w.view(np.uint8), g.view(np.uint8))


@pytest.mark.parametrize("form", ["three-pass", "two-pass"])
@pytest.mark.parametrize("machine", TYPES)
def test_maxima_in_lanes_give_the_evaluators_bits(machine, form):
    args = _awkward_rows()
    module, realization = _lowered(machine, form)
    evaluator = KernelBackend(read_host_program(module), module, MACHINES[machine], realization)
    want = leaves(evaluator.call(args, CallContext()))
    scalar = None
    for lanes in [1, *_lane_counts(machine)]:
        module, realization = _lowered(machine, form)
        stages.affine(module, lanes * MACHINES[machine].arith.itemsize)
        if lanes > 1:  # the maxima's loops carry vectors, combined after them
            assert "vector.extract_strided_slice" in str(module), f"{lanes} lanes: no maxima"
        native = MlirBackend(read_host_program(module), module, MACHINES[machine], realization, 1)
        out = native.call(args, CallContext())
        scalar = scalar or _bits(out)
        for (path, s), (_, o) in zip(scalar, _bits(out), strict=True):
            assert np.array_equal(s, o), f"{machine} {form}, {lanes} lanes: {path} not 1 lane's"
        for (path, w), (_, o) in zip(want, leaves(out), strict=True):
            assert _same(w, o), f"{machine} {form}, {lanes} lanes: {path} not the evaluator's"
