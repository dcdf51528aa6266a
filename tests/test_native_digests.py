"""Every tutorial entry's output (and a tiny corpus GPT's), on the kernel and mlir
backends in f64, f32 and bf16, has the bits recorded in tests/data/native_digests.json
(written by tools/native_digests.py before the kernel stage moved into
presk/stages.py): a change to the lowering that keeps the programs' meaning keeps
every bit, and native code gives the kernel evaluator's bits."""

from __future__ import annotations

import json

import pytest

from tools.native_digests import DIGESTS, case_digests, cases

RECORDED = json.loads(DIGESTS.read_text())
CASES = cases()


def test_every_case_is_recorded():
    assert sorted(RECORDED) == sorted(c.name for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_outputs_keep_their_recorded_bits(case):
    now = case_digests(case)
    for machine, by in now.items():
        assert by["kernel"] == by["mlir"], f"{case.name} {machine}: mlir differs from kernel"
    assert now == RECORDED[case.name]
