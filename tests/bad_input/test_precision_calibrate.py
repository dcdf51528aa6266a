"""Bad input to `presk calibrate --precision`, and envelope files that are malformed or
were measured on something else, read as every command that reads one reads it
(`envelope_for`)."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, run_in_process

from bad_input.refusal import REFUSAL, refuse
from presk import api
from presk.errors import PreskError
from presk.precision.envelope import envelope_for

MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")
ENTRY = "Regression.loss"
CALIBRATE = ["calibrate", "--precision", MLP, "--entry", ENTRY, "--dim", "N=4", "--bits", "64"]


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--samples", "0"], "--samples: '0' is not a positive whole number"),
        (["--grain", "diagonal"], "--grain: invalid choice: 'diagonal'"),
        (["--workers", "0"], "--workers: '0' is not a positive whole number"),
        (["--scheduler", "nonsense://x"], "unknown address scheme 'nonsense'"),
    ],
)
def test_a_flag_calibrate_cannot_take(tmp_path, flags, says):
    refuse([*CALIBRATE, *flags, "--out", tmp_path / "env.json"], code="E0001", says=says)


def test_an_output_path_that_is_a_directory(tmp_path):
    refuse([*CALIBRATE, "--samples", "1", "--out", tmp_path], code="E0003", says="a directory")


@pytest.fixture(scope="module")
def envelope(tmp_path_factory) -> dict:
    """A good envelope of ENTRY at N=4, as JSON."""
    out = tmp_path_factory.mktemp("envelope") / "env.json"
    proc = run_in_process("presk", *CALIBRATE, "--samples", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def core(**dims) -> api.Core:
    return api.load(MLP).elaborate(ENTRY, dims or {"N": 4})


def read_refused(path, against: api.Core, code: str, says: str) -> None:
    """`envelope_for` refuses the file with `code`, in one coded line that `says`."""
    with pytest.raises(PreskError) as refused:
        envelope_for(str(path), against)
    line = refused.value.render()
    assert refused.value.code == code and REFUSAL.match(line) and "\n" not in line, line
    assert says in line, line


def written(tmp_path, text: str):
    path = tmp_path / "env.json"
    path.write_text(text)
    return path


def test_the_good_envelope_is_read(tmp_path, envelope):
    env = envelope_for(str(written(tmp_path, json.dumps(envelope))), core())
    assert env.meta.entry == ENTRY and "Regression.loss/%2" in env.sites


def test_a_missing_envelope(tmp_path):
    read_refused(tmp_path / "none.json", core(), "E0002", "cannot read")


def test_a_truncated_envelope(tmp_path, envelope):
    text = json.dumps(envelope, indent=1)
    read_refused(written(tmp_path, text[: len(text) // 2]), core(), "E7003", "not JSON")


def edited(envelope: dict, edit) -> str:
    copy = json.loads(json.dumps(envelope))
    edit(copy)
    return json.dumps(copy)


@pytest.mark.parametrize(
    "edit, says",
    [
        (
            lambda e: e["sites"]["Regression.loss/%2"].pop("magnitude"),
            "sites Regression.loss/%2: a site's record has the fields op, magnitude,",
        ),
        (lambda e: e["meta"].pop("bits"), "meta: meta has the fields program,"),
        (
            lambda e: e["sites"]["Dense.apply/%0"]["sum"].update(abs_sum="big"),
            'abs_sum is a bound: a number from 0 or "inf", not "big"',
        ),
        (lambda e: e["meta"].update(samples="1"), 'samples is a whole number from 1, not "1"'),
        (lambda e: e["meta"].update(seed=1.0), "seed is a whole number from 0, not 1.0"),
        (
            lambda e: e["sites"]["Dense.apply/%0"].update(size=3),
            "sites Dense.apply/%0: unknown field 'size' (fields: op,",
        ),
        (
            lambda e: e["sites"]["Dense.apply/%0"]["sum"]["factors"].pop(),
            "sum has 1 factors and 2 rss_factors",
        ),
    ],
    ids=[
        "no magnitude",
        "no bits",
        "a string for a number",
        "samples a string",
        "seed 1.0",
        "an unknown field",
        "a factor short",
    ],
)
def test_a_hand_edited_envelope(tmp_path, envelope, edit, says):
    read_refused(written(tmp_path, edited(envelope, edit)), core(), "E7003", says)


def test_an_envelope_of_other_bindings(tmp_path, envelope):
    read_refused(written(tmp_path, json.dumps(envelope)), core(N=8), "E7004", "--dim N=4, not N=8")


def test_an_envelope_of_another_program(tmp_path, envelope):
    envelope = edited(envelope, lambda e: e["meta"].update(program="0" * 64))
    read_refused(written(tmp_path, envelope), core(), "E7004", "another program")


def test_samples_past_the_windows_of_the_data(tmp_path):
    data = tmp_path / "gpl.psk.d"
    text = str(REPO / "corpus" / "nlp" / "data" / "GPL-1.txt")
    assert (
        run_in_process("presk", "data", text, "--window", "8", "--out", str(data)).returncode == 0
    )
    gpt = [str(REPO / "tutorial" / "05_minigpt.psk"), "--entry", "MiniGPT{64, 16, 2, 2}.loss"]
    refuse(
        [
            "calibrate",
            "--precision",
            *gpt,
            "--dim",
            "B=2",
            "--dim",
            "T=8",
            "--data",
            data,
            "--first",
            "710",
            "--out",
            tmp_path / "env.json",
        ],
        code="E3011",
        says="sample 717 reads training windows 1434 to 1435",
    )
