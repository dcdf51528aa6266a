"""The one table of machine types (presk/kernel/machine.py's MACHINES): each type's bytes,
unit roundoff and largest value, and no other module of presk stating them again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from presk.kernel.machine import MACHINES, TYPES

REPO = Path(__file__).resolve().parent.parent

# What a copy of the table looks like: a type's bytes or bits by name, a unit roundoff as a
# power of two, a type's arithmetic by name.
COPIES = re.compile(
    r'"(f64|f32|bf16)":\s*(8|4|2|64|32|16)\b'
    r"|\b2(\.0)?\s*\*\*\s*-\s*(53|24|8)\b"
    r'|"bf16":\s*"f32"'
)


@pytest.mark.parametrize(
    "name, size, unit, largest, arith",
    [
        ("f64", 8, 2.0**-53, (2 - 2.0**-52) * 2.0**1023, "f64"),
        ("f32", 4, 2.0**-24, (2 - 2.0**-23) * 2.0**127, "f32"),
        ("bf16", 2, 2.0**-8, (2 - 2.0**-7) * 2.0**127, "f32"),
    ],
)
def test_each_machine_type_states_its_facts(name, size, unit, largest, arith):
    m = MACHINES[name]
    assert (m.bytes, m.unit_roundoff, m.largest, m.arith_name) == (size, unit, largest, arith)


def test_the_types_run_widest_first():
    # the solver's ladder (offers.RUNGS) and the profile's tables are TYPES in this order
    assert TYPES == ("f64", "f32", "bf16")
    assert [MACHINES[t].bytes for t in TYPES] == sorted(
        (m.bytes for m in MACHINES.values()), reverse=True
    )


def test_no_other_module_copies_the_table():
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in sorted((REPO / "presk").rglob("*.py"))
        if path != REPO / "presk/kernel/machine.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if COPIES.search(line)
    ]
    assert not found, "read these from presk.kernel.machine.MACHINES:\n" + "\n".join(found)
