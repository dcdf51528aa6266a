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
from presk.backends.mlir import MlirBackend
from presk.core.program import read_host_program
from presk.errors import RealizationError
from presk.kernel.contraction import Layout
from presk.kernel.machine import MACHINES
from presk.kernel.relayout import contraction_kernels, rebuild
from presk.runtime.values import leaves
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
