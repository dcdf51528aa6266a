"""Malformed realization records (`--realize @R.json`) and plans (`--plan @P.json`).

Each case starts from a valid record or plan for tutorial/01_linear.psk and damages one
thing: the file's bytes (not UTF-8, too large, nested too deep, not JSON), or one field,
set to each value of a table of wrong types and out-of-range values, or to whatever
hypothesis draws that the field cannot hold. Every one must be refused with a code by
`presk run` or `presk dump`, never a traceback.
"""

from __future__ import annotations

import json
import os
import resource

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bad_input.refusal import refuse, refuse_process
from presk.toolchain import default_threads

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINEAR = [
    os.path.join(REPO, "tutorial", "01_linear.psk"),
    *("--entry", "Linear{3, 2}.apply", "--dim", "batch=4"),
]
SITE = "Linear.apply/%0"  # the dot: a contraction nest, and a site of the record
HUGE = 10**25  # more digits than a realization or plan reads

RECORD = {
    "default": "f32",
    "storage": {SITE: "f32"},
    "accum": {SITE: "f32"},
    "order": {SITE: "sequential"},
    "envelope": {"rel_error": 0.001},
    "params": {"b": "bf16"},
    "quant": {"w": {"bits": 8, "over": -1, "scheme": "absmax"}},
}
PLAN = {
    "realize": "f32",
    "layout": {
        SITE: {
            "form": "tiled",
            "tile": [1, 1],
            "kblock": 0,
            "order": "IJ",
            "lanes": 1,
            "pack": "none",
            "split": {"depth": 0, "workers": default_threads()},
            "epilogue": False,
        }
    },
}
NOT_AN_OBJECT = [None, True, 8, 8.0, "x", [], ["f32"]]
NOT_A_TYPE = [None, True, 8, 8.0, "f16", "F32", "", [], {}, ["f32"], {"f32": 1}]
NOT_A_COUNT = [None, True, "8", 8.0, 1.5, -1, HUGE, [], {}]  # a whole number from 0
# field: values it cannot hold
RECORD_FIELDS = {
    "default": NOT_A_TYPE,
    "storage": NOT_AN_OBJECT + [{SITE: t} for t in NOT_A_TYPE],
    "accum": NOT_AN_OBJECT + [{SITE: t} for t in NOT_A_TYPE],
    "order": NOT_AN_OBJECT
    + [
        {SITE: o}
        for o in [
            None,
            4,
            "blocked",
            "blocked()",
            "blocked(0)",
            "blocked(04)",
            "blocked(-4)",
            "blocked(4.0)",
            "interleaved(" + "9" * 5000 + ")",
            "blocked(" + "9" * 5000 + ")",
            " sequential",
            "shuffled",
        ]
    ],
    "envelope": NOT_AN_OBJECT,
    "params": NOT_AN_OBJECT + [{"b": t} for t in [*NOT_A_TYPE, "f64"]],
    "quant": NOT_AN_OBJECT
    + [{"w": q} for q in NOT_AN_OBJECT]
    + [{"w": {"bits": b}} for b in [None, True, 8.0, "8", 6, 0, HUGE, [8]]]
    + [{"w": {"bits": 8, "over": o}} for o in [None, True, 1.0, [], {}, 7, "In"]]
    + [{"w": {"bits": 8, "scheme": s}} for s in [None, 1, "abs", ["absmax"]]]
    + [{"w": {"over": -1}}, {"w": {"bits": 8, "zero": 0}}],
}
PLAN_FIELDS = {
    "realize": [*NOT_A_TYPE, 5, "@r.json"],
    "layout": NOT_AN_OBJECT,
    "form": [None, 1, "", "tile", "TILED", ["tiled"]],
    "tile": [None, 4, "4x16", [], [4], [4, 4, 4], [0, 0], [1, 0], [-1, 8], [True, True]]
    + [[1.0, 1.0], [1, "8"], [1, HUGE], {"m": 1, "n": 8}],
    "kblock": NOT_A_COUNT,
    "order": [None, 1, "", "ij", "IJKK", ["IJ"]],
    "lanes": [*NOT_A_COUNT, 0],
    "pack": [None, 1, "", "c", ["b"]],
    "split": [None, True, 0, 2.0, "", "zz", "None", [], [0], [0, 2, 2], [0.0, 2]]
    + [[True, 2], [-1, 2], [0, 0], [0, HUGE], {}, {"depth": 0}, {"workers": 2}]
    + [{"depth": 0, "workers": 2, "more": 1}, {"depth": -1, "workers": 2}]
    + [{"depth": "0", "workers": 2}, {"depth": 0, "workers": 2.0}, {"depth": 0, "workers": 0}],
    "epilogue": [None, 0, 1, "true", [], {}],
}


def _write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return f"@{path}"


def run_realize(realize: str) -> list:
    return ["run", *LINEAR, "--backend", "kernel", "--realize", realize]


def dump_plan(plan: str) -> list:
    return ["dump", *LINEAR, "--stage", "kernel", "--plan", plan]


def _with_record_field(field: str, value) -> dict:
    return {**RECORD, field: value}


def _with_plan_field(field: str, value) -> dict:
    if field in PLAN:
        return {**PLAN, field: value}
    return {**PLAN, "layout": {SITE: {**PLAN["layout"][SITE], field: value}}}


def _says(value, where: str) -> str:
    """What the refusal of `value` in a field says: where the field is, or for a number
    of too many digits (refused as the file is read, before any field) that."""
    return f"an integer of {len(str(HUGE))} digits" if str(HUGE) in json.dumps(value) else where


def test_the_valid_record_and_plan_run(tmp_path):
    """The starting points are valid: each damage below is what is refused."""
    from presk.cli import main

    record = _write(tmp_path, "r.json", _with_record_field("default", "f32"))
    plan = _write(tmp_path, "p.json", PLAN)
    assert main.main(run_realize(record)) == 0
    assert main.main(dump_plan(plan)) == 0


@pytest.mark.parametrize(
    "field,value", [(f, v) for f, values in RECORD_FIELDS.items() for v in values]
)
def test_a_record_field_it_cannot_hold_is_refused(tmp_path, field, value):
    record = _write(tmp_path, "r.json", _with_record_field(field, value))
    refuse(run_realize(record), code="E7001", says=_says(value, f"r.json: {field}"))


@pytest.mark.parametrize(
    "field,value", [(f, v) for f, values in PLAN_FIELDS.items() for v in values]
)
def test_a_plan_field_it_cannot_hold_is_refused(tmp_path, field, value):
    plan = _write(tmp_path, "p.json", _with_plan_field(field, value))
    says = f"layout {SITE}: {field}" if field not in PLAN else f"p.json: {field}"
    refuse(dump_plan(plan), code="E7001", says=_says(value, says))


# (a record's or plan's name, its value, what its refusal says)
UNKNOWN_FIELDS = [
    ("r.json", {**RECORD, "defaults": "f32"}, "r.json: unknown field 'defaults' (fields: "),
    ("r.json", {**RECORD, "": 1}, "r.json: unknown field ''"),
    ("r.json", {**RECORD, "quant": {"w": {"bits": 8, "zero": 0}}}, "unknown field 'zero'"),
    ("p.json", {**PLAN, "plans": {}}, "p.json: unknown field 'plans' (fields: realize"),
    ("p.json", _with_plan_field("tiles", [1, 1]), f"{SITE}: unknown layout field 'tiles'"),
    (
        "p.json",
        _with_plan_field("split", {"depth": 0, "workers": 1, "width": 1}),
        f'{SITE}: split is "none", [depth, workers] or {{"depth": d, "workers": p}}',
    ),
]


@pytest.mark.parametrize("name,value,says", UNKNOWN_FIELDS)
def test_a_field_a_record_or_plan_does_not_have_is_refused(tmp_path, name, value, says):
    path = _write(tmp_path, name, value)
    refuse(run_realize(path) if name == "r.json" else dump_plan(path), code="E7001", says=says)


# the file as a whole: (its bytes, the code, what the message says)
FILES = [
    (b"\xff\xfe{}", "E0002", "not UTF-8"),
    (b'{"default": "f32\xe9"}', "E0002", "not UTF-8"),
    (b" " * (5 << 20), "E0002", "larger than 4 MiB"),
    (b"", "E7001", "not JSON"),
    (b"{", "E7001", "not JSON"),
    (b"\xef\xbb\xbf{}", "E7001", "not JSON"),
    (b'{"default": "f32"} {}', "E7001", "not JSON"),
    (b'{"default": "f32",}', "E7001", "not JSON"),
    (b"[" * 100_000, "E7001", "nested deeper than"),
    (b"[" * 100_000 + b"]" * 100_000, "E7001", "nested deeper than"),
    (b'{"envelope": ' + b'{"a": ' * 40 + b"1" + b"}" * 41, "E7001", "nested deeper than"),
    (b'"\\"' * 100_000, "E7001", "not JSON"),  # a string never closed
    (b'{"envelope": {"a": ' + b"9" * 5000 + b"}}", "E7001", "an integer of 5000 digits"),
    (b'{"envelope": {"a": -' + b"9" * 5000 + b"}}", "E7001", "an integer of 5000 digits"),
    (b'{"envelope": {"a": NaN}}', "E7001", "not JSON: NaN"),
    (b'{"envelope": {"a": -Infinity}}', "E7001", "not JSON: -Infinity"),
    (b"[]", "E7001", "a realization is a JSON object"),
    (b'"f32"', "E7001", "a realization is a JSON object"),
]


@pytest.mark.parametrize("data,code,says", FILES)
def test_a_realization_file_presk_cannot_read_is_refused(tmp_path, data, code, says):
    refuse(run_realize(_write(tmp_path, "r.json", data)), code=code, says=says)


@pytest.mark.parametrize("data,code,says", FILES[:-2])  # the last two name a realization
def test_a_plan_file_presk_cannot_read_is_refused(tmp_path, data, code, says):
    refuse(dump_plan(_write(tmp_path, "p.json", data)), code=code, says=says)


@pytest.mark.parametrize("path", ["/nonexistent/r.json", "/tmp"])
def test_a_path_that_is_no_json_file_is_refused(path):
    refuse(run_realize(f"@{path}"), code="E0002", says="cannot read")
    refuse(dump_plan(f"@{path}"), code="E0002", says="cannot read")


def _bounded_memory():
    """Run a child in 3 GiB of address space (presk runs well within it): reading all of
    /dev/zero then ends in a MemoryError there, not in the machine running out."""
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def test_an_endless_file_is_refused_before_it_is_read_to_its_end():
    for argv in (run_realize("@/dev/zero"), dump_plan("@/dev/zero")):
        refuse_process(argv, code="E0002", says="larger than 4 MiB", preexec_fn=_bounded_memory)


# whatever JSON a field cannot hold: drawn from every kind of value, kinds it can hold
# excluded by construction
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_JSON = st.recursive(
    st.one_of(_SCALARS, st.integers(-(10**18), 10**18)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
_NOT_A_TILE = st.one_of(
    _SCALARS,
    st.dictionaries(st.text(max_size=6), _JSON),
    st.lists(st.integers(1, 64), max_size=6).filter(lambda t: len(t) != 2),
    st.lists(_JSON, min_size=2, max_size=2).filter(
        lambda t: not all(type(x) is int and x >= 1 for x in t)
    ),
)
_NOT_A_SPLIT = st.one_of(
    st.text(max_size=12).filter(lambda s: s != "none"),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**18), 10**18),
    st.lists(st.integers(0, 8), max_size=5).filter(lambda s: len(s) != 2),
    st.fixed_dictionaries({"depth": st.integers(-(10**18), -1), "workers": st.integers(1, 8)}),
    st.fixed_dictionaries({"depth": st.integers(0, 8), "workers": st.integers(-(10**18), 0)}),
    st.fixed_dictionaries({"depth": _SCALARS, "workers": st.integers(1, 8)}),
    st.dictionaries(st.sampled_from(["depth", "workers", "width"]), st.integers(0, 8)).filter(
        lambda d: set(d) != {"depth", "workers"}
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(["tile", "split"]), data=st.data())
def test_whatever_a_layout_field_cannot_hold_is_refused(tmp_path, field, data):
    value = data.draw(_NOT_A_TILE if field == "tile" else _NOT_A_SPLIT)
    plan = _write(tmp_path, "p.json", _with_plan_field(field, value))
    refuse(dump_plan(plan), code="E7001", says=f"layout {SITE}: {field}")


_NOT_BITS = st.one_of(st.sampled_from([8.0, 4.0, True]), _JSON).filter(
    lambda v: not (type(v) is int and v in (8, 4))
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(bits=_NOT_BITS)
def test_whatever_a_weights_bits_cannot_be_is_refused(tmp_path, bits):
    record = _write(tmp_path, "r.json", {"quant": {"w": {"bits": bits}}})
    refuse(run_realize(record), code="E7001", says="r.json: quant w: bits is 8 or 4, not")
