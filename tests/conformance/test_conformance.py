"""The kernel backend against the reference at 256 bits, inside the seed's bands, and its
index and mask outputs equal to the reference's. A cell whose band is not asserted and
which has no selection to compare is only reported (tools/conformance.py)."""

from __future__ import annotations

import pytest

from tests.conformance.suite import TYPES, all_cases, measure

CASES = [(c, t) for c in all_cases() for t in TYPES if t in c.asserted + c.selects]


@pytest.mark.parametrize(
    "case,machine", CASES, ids=[f"{c.name}{' drawn' if c.drawn else ''}-{t}" for c, t in CASES]
)
def test_kernel_backend_within_band(case, machine):
    gap = measure(case, machine)
    # a case with index or mask outputs says in which types they are compared
    assert gap.selections == bool(case.selects), f"{case.name}: selects is {case.selects}"
    if machine in case.asserted:
        assert gap.ratio <= 1.0, f"{case.name} in {machine}: {gap.ratio:.3f} times the band"
    if machine in case.selects:
        assert gap.exact_selections, f"{case.name} in {machine}: an index or mask differs"
