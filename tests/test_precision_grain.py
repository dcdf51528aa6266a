"""presk check --precision from a `--grain row` envelope, on a mixed realization of the
corpus GPT: some sites bf16 (the attention logits, their scaling, the Linear contraction
of the attention's output and the feed-forward), the rest f32.

The parameters are the GPT's after 200 steps of `presk train` on the corpus text (D=32,
H=2, L=2, T=16), stored in f32 in tests/data/gpt_trained200.npz (140 kB); the samples are
the first training windows of the same text (`presk data`, regenerated here). Issue 15's
bar: rss from a row envelope within 100× of the measured gap, and every bound at least it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from presk import api
from presk.cli.main import main
from presk.precision.bound import Propagation, measured_gap
from presk.precision.envelope import read_envelope
from presk.precision.rules import MODELS

REPO = Path(__file__).resolve().parent.parent
GPT = str(REPO / "corpus/nlp/05_gpt.psk")
TEXTS = sorted(str(p) for p in (REPO / "corpus/nlp/data").glob("*.txt"))
WEIGHTS = str(REPO / "tests/data/gpt_trained200.npz")
CONSTS = {"D": 32, "H": 2, "L": 2}
DIMS = {"B": 1, "T": 16}
MIXED = {
    "default": "f32",
    "storage": {
        "SelfAttention.apply/%5": "bf16",  # the logits, q·k
        "SelfAttention.apply/%10": "bf16",  # the logits over √(D/H)
        "Linear.apply/%0": "bf16",  # x·w of every Linear: the feed-forward's up and down
    },
}


def _sizes() -> list[str]:
    flags = [f"--const={k}={v}" for k, v in CONSTS.items()]
    return ["--entry", "loss", *flags, *(f"--dim={k}={v}" for k, v in DIMS.items())]


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    """The GPT's Core, its mixed realization, and an envelope a grain (2 samples, 64 bits)
    measured on the trained weights and the text's first windows."""
    out = tmp_path_factory.mktemp("grain")
    core = api.load(GPT).elaborate("loss", DIMS, CONSTS)
    data = str(out / "text16.psk.d")
    assert main(["data", *TEXTS, "--window", str(DIMS["T"]), "--out", data]) == 0
    envelopes = {}
    for grain in ("site", "row"):
        envelopes[grain] = str(out / f"{grain}.json")
        argv = ["calibrate", "--precision", GPT, *_sizes(), "--weights", WEIGHTS, "--data", data]
        argv += ["--bits", "64", "--samples", "2", "--workers", "1", "--grain", grain]
        assert main([*argv, "--out", envelopes[grain]]) == 0
    realize = out / "mixed.json"
    realize.write_text(json.dumps(MIXED))
    realization = core.lower(f"@{realize}").realization
    return core, realization, {g: read_envelope(p) for g, p in envelopes.items()}


@pytest.mark.parametrize("grain", ["site", "row"])
def test_the_mixed_gpt_bound_is_at_least_the_measured_gap(gpt, grain):
    core, realization, envelopes = gpt
    envelope = envelopes[grain]
    gap = measured_gap(core, envelope, realization, "kernel")
    assert 0 < gap < math.inf
    propagation = Propagation(core, envelope, realization)
    for model in MODELS:
        bound = propagation.run(model).bound
        assert bound >= gap, (model, bound, gap)


def test_a_row_grain_reaches_the_rules(gpt):
    """The row envelope's magnitudes and roundings are the bound's, not the site's: the
    two bounds differ (a bound that ignored the grain would give the same number)."""
    core, realization, envelopes = gpt
    site, row = (Propagation(core, envelopes[g], realization).run("rss") for g in ("site", "row"))
    assert site.bound != row.bound


def test_the_row_rss_estimate_is_within_100x_of_the_measured_gap(gpt):
    """Issue 15's bar: the seed's per-site estimate was 1.1·10⁴× the measured gap."""
    core, realization, envelopes = gpt
    envelope = envelopes["row"]
    gap = measured_gap(core, envelope, realization, "kernel")
    estimate = Propagation(core, envelope, realization).run("rss").bound
    assert gap <= estimate <= 100 * gap, (estimate, gap)
