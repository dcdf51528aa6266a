"""bench/envelope_slices.py: its table's numbers are those of envelopes calibrated directly
with `presk calibrate --precision --first I --samples N`, compared here site by site."""

from __future__ import annotations

import argparse
import re

import pytest
from conftest import REPO, bench_script, run_in_process

from presk.precision.envelope import Envelope, Meta, SiteEnvelope, read_envelope

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
ENTRY = "MiniGPT{64, 16, 2, 2}.loss"  # its zero-initialised head is zero in every slice
SIZES = ["--dim", "B=1", "--dim", "T=8"]
ROW = re.compile(
    r"^\| samples (\d+)–(\d+) \| (\d+)–(\d+) \| (\S+)× \| (\S+) \| (\d+) \| (\d+) \| (\d+) \|$"
)


slices = bench_script("envelope_slices")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "gpl8.psk.d"
    text = str(REPO / "corpus" / "nlp" / "data" / "GPL-1.txt")
    proc = run_in_process("presk", "data", text, "--window", "8", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return str(out)


def calibrated(tmp_path, data: str, first: int, samples: int) -> Envelope:
    out = tmp_path / f"env{first}.json"
    proc = run_in_process(
        "presk",
        "calibrate",
        "--precision",
        MINIGPT,
        "--entry",
        ENTRY,
        *SIZES,
        "--data",
        data,
        "--bits",
        "64",
        "--first",
        str(first),
        "--samples",
        str(samples),
        "--workers",
        "1",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    return read_envelope(str(out))


def expected_row(first: Envelope, later: Envelope) -> tuple:
    """(worst ratio to 3 decimals, its site, compared, zero in both, zero in one)."""
    pairs = {site: (s.magnitude, later.sites[site].magnitude) for site, s in first.sites.items()}
    ratios = {site: max(a / b, b / a) for site, (a, b) in pairs.items() if a and b}
    worst = max(ratios, key=ratios.get)
    zero_in_both = sum(a == 0 and b == 0 for a, b in pairs.values())
    return (
        f"{ratios[worst]:.3f}",
        worst,
        len(ratios),
        zero_in_both,
        len(pairs) - len(ratios) - zero_in_both,
    )


def test_the_table_compares_the_envelopes_of_each_slice(tmp_path, data, capsys):
    argv = [MINIGPT, "--entry", ENTRY, *SIZES, "--data", data, "--bits", "64", "--workers", "1"]
    assert slices.main([*argv, "--slices", "0-1,2-2,6-6"]) == 0
    rows = [ROW.match(line) for line in capsys.readouterr().out.splitlines()]
    printed = [m.groups() for m in rows if m]
    first = calibrated(tmp_path, data, 0, 2)
    for (a, b), row in zip([(2, 2), (6, 6)], printed, strict=True):
        later = calibrated(tmp_path, data, a, b - a + 1)
        worst, site, compared, zero_in_both, zero_in_one = expected_row(first, later)
        assert row == (
            str(a),
            str(b),
            "0",
            "1",
            worst,
            site,
            *map(str, (compared, zero_in_both, zero_in_one)),
        )
        assert int(row[7]) >= 1  # the zero head, in both


def site(magnitude: float) -> SiteEnvelope:
    return SiteEnvelope("dot", magnitude, {"f32": 0.0, "bf16": 0.0}, 1, 1)


def envelope(**magnitudes: float) -> Envelope:
    meta = Meta("0" * 64, "f", {}, {}, None, None, 0, 1, 0, 64, "site", "2026-01-01")
    return Envelope(meta, {name: site(m) for name, m in magnitudes.items()})


def test_a_site_zero_in_one_slice_is_counted_not_compared():
    first = envelope(a=0.5, b=0.0, c=0.0, d=1.0, e=float("inf"))
    later = envelope(a=2.0, b=0.0, c=3.0, d=1.5, e=float("inf"))
    assert slices.compare(first, later) == slices.Comparison(4.0, "a", 3, 1, 1)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0-7,4-11", "overlap"),
        ("0-7", "at least two"),
        ("3-1,8-9", "'3-1' is not a range"),
        ("0-x,8-9", "'0-x' is not FIRST-LAST"),
    ],
)
def test_overlapping_or_malformed_slices_are_refused(text, says):
    with pytest.raises(argparse.ArgumentTypeError, match=says):
        slices.parse_slices(text)
