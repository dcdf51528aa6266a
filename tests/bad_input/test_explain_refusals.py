"""presk explain refuses what it cannot explain: one coded line, exit 1, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bad_input.refusal import refuse

PROGRAM = str(Path(__file__).resolve().parent.parent / "data" / "widening" / "std.psk")
ENTRY = ["--entry", "loss"]
MOVES = {  # a moves file that explains an all-f64 record: nothing offered
    "realization": "r.json",
    "moves": [],
    "budget": 1e-3,
    "target": 1e-3,
    "estimate": 0.0,
    "gap": 0.0,
    "threshold": None,
    "all_f64": 0,
    "min_gain": 1e-3,
    "priced": {},
    "offered": [],
    "left_out": {"rule 1": [], "rule 2": [], "unreached": []},
}


@pytest.fixture
def record(tmp_path) -> Path:
    r = tmp_path / "r.json"
    r.write_text('{"default": "f64"}')
    return r


def explain(record: Path, *flags) -> list[str]:
    return ["explain", PROGRAM, *ENTRY, "--realize", f"@{record}", *flags]


def test_a_moves_file_presk_cannot_read(record):
    (record.parent / "r.moves.json").mkdir()  # a missing one is no refusal: explain says so
    refuse(explain(record), code="E0002", says="r.moves.json")


def test_a_record_checked_on_an_envelope_it_cannot_read(record, tmp_path):
    flags = ("--precision", str(tmp_path / "env.json"))  # the bound and the gap asked for
    refuse(explain(record, *flags), code="E0002", says="env.json")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not JSON"),
        (json.dumps({"realization": "r.json", "moves": []}), "has the fields"),  # before explain
        (json.dumps({**MOVES, "gap": "wide"}), 'gap is the final measured gap: a number or "inf"'),
        (json.dumps({**MOVES, "left_out": {"rule 3": []}}), "unknown rule 'rule 3'"),
        (json.dumps({**MOVES, "moves": [{"move": "narrow"}]}), "moves 0: a move has the fields"),
    ],
)
def test_a_broken_moves_file(record, text, says):
    (record.parent / "r.moves.json").write_text(text)
    refuse(explain(record), code="E7001", says=says)


def test_moves_of_another_program(record):
    moves = {**MOVES, "priced": {"Other.f/%3": {"kind": "value", "elements": 4, "term": 0.0}}}
    (record.parent / "r.moves.json").write_text(json.dumps(moves))
    refuse(explain(record), code="E7001", says="'Other.f/%3' is neither a stored value")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["explain", PROGRAM, *ENTRY, "--realize", "f32"], "explain reads a record"),
        (["explain", PROGRAM, *ENTRY, "--budget", "1e-3"], "--budget needs --precision"),
        (["explain", PROGRAM, *ENTRY], "one of the arguments --realize --budget --budget-abs"),
        (["explain", PROGRAM, *ENTRY, "--realize", "@r.json", "--budget", "1e-3"], "not allowed"),
        (["explain", PROGRAM, *ENTRY, "--realize", "@r.json", "--format", "pdf"], "--format"),
    ],
)
def test_flags_explain_cannot_take(argv, says):
    refuse(argv, code="E0001", says=says)


def test_a_site_the_entry_does_not_have(record):
    (record.parent / "r.moves.json").write_text(json.dumps(MOVES))
    refuse(explain(record, "--site", "loss/%99"), code="E0001", says="--site 'loss/%99'")


def test_an_output_presk_will_not_write(record, tmp_path):
    (record.parent / "r.moves.json").write_text(json.dumps(MOVES))
    refuse(explain(record, "--out", tmp_path), code="E0003")
