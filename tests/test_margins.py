"""`presk margins`: the tiny MiniGPT trained 30 steps natively, ε*(10⁻³) on held-out
windows, a realization solved on the logits at `--budget-abs ε*`, and `--check` counting
the decisions it changes against what the margins allow; the bound's rank against the
binomial tail summed directly, and the counts on logits made to flip."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from presk.cli.main import main
from presk.precision.margins import (
    certified_rank,
    compare,
    epsilon_star,
    margins_of,
    needed_positions,
)
from tests.conformance.suite import REPO, corpus

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
APPLY = ["--entry", "MiniGPT{64, 16, 2, 2}.apply", "--dim", "T=8"]
# 2 batches of 188 held-out windows of 8 positions: 3008, past the 2995 that certify
# ε*(10⁻³) at 95 % confidence. GPL-1.txt alone holds 158 held-out windows (1264
# positions), so the data is the whole corpus.
HELD_OUT = [*APPLY, "--dim", "B=188", "--samples", "2", "--bits", "64"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(data file, checkpoint) of the MiniGPT's loss trained 30 steps on the mlir backend."""
    base = tmp_path_factory.mktemp("margins")
    data = corpus(base / "corpus8.psk.d")
    entry = ["--entry", "MiniGPT{64, 16, 2, 2}.loss", "--dim", "B=1", "--dim", "T=8"]
    flags = ["--data", data, "--steps", "30", "--backend", "mlir", "--quiet"]
    assert main(["train", MINIGPT, *entry, *flags, "--out", str(base / "run")]) == 0
    return data, str(base / "run" / "checkpoint.psk.d")


def _presk(argv: list, capsys) -> str:
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


def test_a_realization_solved_at_epsilon_star_changes_no_more_than_the_margins_allow(
    trained, tmp_path, capsys
):
    data, weights = trained
    margins = ["margins", MINIGPT, *HELD_OUT, "--weights", weights, "--data", data]
    out = _presk([*margins, "--workers", "2"], capsys)
    assert "on 3008 held-out positions" in out and "at 64 bits" in out
    epsilon = float(re.search(r"ε\*\(δ = 0\.001\) at confidence 0\.95: (\S+),", out)[1])
    budget = re.search(r"presk solve .* --budget-abs (\S+) --out R\.json", out)[1]
    assert 0 < float(budget) <= epsilon

    env, record = tmp_path / "env.json", tmp_path / "r.json"
    logits_at_one = [*APPLY, "--dim", "B=1", "--weights", weights, "--workers", "1"]
    calibrate = ["calibrate", "--precision", MINIGPT, *logits_at_one, "--samples", "2"]
    _presk([*calibrate, "--bits", "64", "--out", env], capsys)
    solve = ["solve", MINIGPT, *logits_at_one, "--precision", env, "--budget-abs", budget]
    assert "inside" in _presk([*solve, "--out", record], capsys)

    out = _presk([*margins, "--workers", "1", "--check", f"@{record}"], capsys)
    found = re.search(r"decisions changed: (\d+) of 3008; the margins allow (\d+)", out)
    changed, allowed = found.groups()
    assert int(changed) <= int(allowed), out


def _tail_at_least(n: int, k: int, p: float) -> float:
    """P(Binomial(n, p) ≥ k), summed directly."""
    return 1.0 - sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k))


@pytest.mark.parametrize(
    ("n", "delta", "confidence"), [(50, 0.1, 0.9), (400, 0.02, 0.95), (1000, 0.3, 0.5)]
)
def test_the_certified_rank_is_the_largest_the_binomial_tail_allows(n, delta, confidence):
    k = certified_rank(n, delta, confidence)
    assert _tail_at_least(n, k, delta) >= confidence
    assert _tail_at_least(n, k + 1, delta) < confidence


def test_the_fewest_positions_certify_rank_one_and_one_fewer_none():
    need = needed_positions(1e-3, 0.95)
    assert need == 2995
    assert certified_rank(need, 1e-3, 0.95) == 1
    assert certified_rank(need - 1, 1e-3, 0.95) is None
    assert epsilon_star(np.ones(need - 1), 1e-3, 0.95).epsilon == 0


def test_epsilon_star_is_just_below_half_the_ranked_margin():
    margins = np.random.default_rng(0).permutation(np.arange(1, 3001) / 1000)
    bound = epsilon_star(margins, 1e-3, 0.95)
    assert bound.rank == 1
    assert bound.epsilon == np.nextafter(0.001 / 2, 0) < 0.001 / 2


def test_margins_and_the_decisions_a_perturbation_changes():
    exact = [np.array([[[0.0, 1.0, 0.9], [0.0, 5.0, 0.0], [2.0, 2.0, 0.0]]])]
    assert margins_of(exact).tolist() == pytest.approx([0.1, 5.0, 0.0])
    # the first position flips (0.96 against 0.94); the tie at the third stays with argmax
    ran = [exact[0] + np.array([[[0.0, -0.06, 0.06], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])]
    c = compare(exact, ran)
    assert (c.gap, c.changed, c.allowed) == (pytest.approx(0.06), 1, 2)
    assert compare(exact, [exact[0] + np.nan]).gap == math.inf
