"""presk bisect refuses a missing --realize (E0001), a record naming sites the program
lacks (E7001, as every command taking a realization does), and a budget, a count of
sites or a backend it cannot take (E0001), each before it runs anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from bad_input.refusal import refuse

REPO = Path(__file__).resolve().parent.parent.parent
CHAIN = str(REPO / "tests/data/bisect/chain.psk")
BISECT = ["bisect", CHAIN, "--entry", "loss", "--bits", "64"]
RECORD = f"@{REPO / 'tests/data/bisect/sum_bf16.json'}"


def test_no_realization():
    refuse(BISECT, code="E0001", says="the following arguments are required: --realize")


def test_a_record_of_sites_the_program_lacks(tmp_path):
    record = tmp_path / "r.json"
    record.write_text('{"default": "f64", "storage": {"loss/%99": "bf16"}}')
    refuse([*BISECT, "--realize", f"@{record}"], code="E7001", says="unknown site 'loss/%99'")


@pytest.mark.parametrize("budget", ["0", "-1e-3", "nan", "inf"])
def test_a_budget_that_is_not_a_positive_number(budget):
    says = f"argument --budget: {budget!r} is not a positive number"
    refuse([*BISECT, "--realize", RECORD, f"--budget={budget}"], code="E0001", says=says)


def test_no_sites_to_print():
    says = "argument --top: '0' is not a positive whole number"
    refuse([*BISECT, "--realize", RECORD, "--top", "0"], code="E0001", says=says)


def test_the_reference_is_not_a_backend_to_bisect():
    refuse([*BISECT, "--realize", RECORD, "--backend", "interp"], code="E0001", says="--backend")
