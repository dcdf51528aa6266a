"""`presk margins` refuses, before the reference runs, what it cannot read: a δ or a
confidence outside (0, 1), no data file, an entry that does not take tokens and return
logits, a data file whose windows or held-out batches do not fit the entry, and
`--backend` with nothing to check."""

from __future__ import annotations

import pytest

from presk.cli.main import main
from tests.bad_input.refusal import refuse
from tests.conformance.suite import REPO

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
GPT = "MiniGPT{64, 16, 2, 2}"
# never read: every refusal here comes before the parameters are
WEIGHTS = ["--weights", "unread.npz"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """GPL-1.txt in windows of 8 tokens: 158 held-out windows."""
    out = tmp_path_factory.mktemp("margins") / "gpl8.psk.d"
    text = str(REPO / "corpus" / "nlp" / "data" / "GPL-1.txt")
    assert main(["data", text, "--window", "8", "--out", str(out)]) == 0
    return str(out)


def _margins(data: str, entry: str = f"{GPT}.apply", *flags: str) -> list[str]:
    dims = ["--dim", "B=2", "--dim", "T=8"]
    return ["margins", MINIGPT, "--entry", entry, *dims, *WEIGHTS, "--data", data, *flags]


@pytest.mark.parametrize("value", ["0", "1", "-0.1", "1.5", "nan", "inf", "x"])
@pytest.mark.parametrize("flag", ["--delta", "--confidence"])
def test_a_fraction_outside_zero_to_one(data, flag, value):
    refuse(_margins(data, f"{GPT}.apply", flag, value), code="E0001", says=flag)


def test_no_data_file():
    argv = ["margins", MINIGPT, "--entry", f"{GPT}.apply", "--dim", "B=2", "--dim", "T=8"]
    refuse([*argv, *WEIGHTS], code="E0001", says="--data")


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (f"{GPT}.next_token", "returns nat[B: 2, T: 8]"),  # decisions, not logits
        (f"{GPT}.loss", "returns ℝ:"),  # a scalar has no last axis
        ("LayerNorm{16}.apply", "takes ℝ[B: 2, T: 8, 16]"),  # logits-shaped, but from reals
    ],
)
def test_an_entry_that_does_not_read_tokens_into_logits(data, entry, says):
    refuse(_margins(data, entry), code="E3014", says=says)


def test_windows_of_another_length(data):
    argv = _margins(data)
    argv[argv.index("T=8")] = "T=4"
    refuse(argv, code="E3011", says="windows of 8 tokens, the entry reads 4")


def test_more_batches_than_the_held_out_windows_hold(data):
    refuse(_margins(data, f"{GPT}.apply", "--samples", "80"), code="E3011", says="158 held-out")


def test_a_backend_with_nothing_to_check(data):
    refuse(_margins(data, f"{GPT}.apply", "--backend", "mlir"), code="E0001", says="--check")
