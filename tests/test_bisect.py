"""presk bisect: a realization beside the exact reference names the site that spent the
budget (presk/precision/bisect.py)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from presk import api
from presk.cli.main import main
from presk.precision.bisect import Inputs, bisect

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests/data/bisect"
CHAIN = str(DATA / "chain.psk")
MINIGPT_FILE = str(REPO / "tutorial/05_minigpt.psk")
MINIGPT = ["--entry", "MiniGPT{64, 16, 2, 2}.loss", "--dim", "B=1", "--dim", "T=8"]


def presk(*argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(a) for a in argv]) == 0
    return out.getvalue()


def jumped(text: str) -> list[str]:
    """The printed table's rows of jumps, in the order printed."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("site "))
    return [line for line in lines[start + 1 :] if not line.startswith("--")]


def chain():
    return api.load(CHAIN).elaborate("loss")


# chain.psk's launches: %3 a, %4 a * a, %5 s, %7 n * n (the division fused), %8 m, %9, %10
@pytest.mark.parametrize(
    ("record", "site", "line"),
    [("sum_bf16.json", "loss/%5", 10), ("mul_bf16.json", "loss/%7", 12)],
)
def test_bisect_names_the_one_bf16_site_of_an_f64_program_first(record, site, line):
    found = bisect(chain(), f"@{DATA / record}", Inputs(), bits=64)
    # its inputs were f64's, its value bf16's: the first jump in program order, and the
    # largest
    first = found.jumps(5)[0]
    assert first.site == site and found.largest() == first
    assert (first.type, first.source) == ("bf16", f"{CHAIN}:{line}")
    assert 2.0**-10 < first.gap < 2.0**-6 and first.inherited < 2.0**-50
    assert all(r.type == "f64" for r in found.rows if r.site != site)
    text = presk("bisect", CHAIN, "--entry", "loss", "--realize", f"@{DATA / record}", "--bits", 64)
    rows = jumped(text)
    assert rows[0].startswith(f"{site} ") and rows[0].endswith("<- largest")


def test_bisect_on_the_mlir_backend_measures_the_same_bits():
    record = f"@{DATA / 'sum_bf16.json'}"
    kernel = bisect(chain(), record, Inputs(), "kernel", 64)
    native = bisect(chain(), record, Inputs(), "mlir", 64)
    assert kernel.rows == native.rows and kernel.output_gap == native.output_gap


def test_bisect_says_where_a_budget_was_spent():
    record = f"@{DATA / 'sum_bf16.json'}"
    args = ["bisect", CHAIN, "--entry", "loss", "--realize", record, "--bits", 64]
    past = presk(*args, "--budget", "1e-3")
    assert "output's gap is OUTSIDE it; a stored value's gap first passes it at loss/%5" in past
    inside = presk(*args, "--budget", "1e-1")
    assert "the output's gap is inside it; no stored value's gap passes it" in inside


def test_an_f64_realization_jumps_nowhere():
    found = bisect(chain(), "f64", Inputs(), bits=64)
    assert found.jumps(5) == [] and found.largest() is None
    assert 0 < found.output_gap < 2.0**-50


def test_bisect_names_the_bf16_value_of_an_f32_minigpt(tmp_path):
    record = tmp_path / "r.json"
    record.write_text('{"default": "f32", "storage": {"MLP.apply/%0": "bf16"}}')
    argv = ["bisect", MINIGPT_FILE, *MINIGPT, "--realize", f"@{record}", "--bits", 64]
    rows = jumped(presk(*argv, "--top", 3))
    assert len(rows) == 3
    (gelu,) = [r for r in rows if r.endswith("<- largest")]
    assert gelu.split()[:2] == ["MLP.apply/%0", "gelu"] and " bf16 " in gelu
