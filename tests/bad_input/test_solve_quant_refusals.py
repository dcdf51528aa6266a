"""presk solve refuses a --menu it cannot offer (an unknown or repeated rung, a menu
without f64 and f32), --quant beside --menu's integers, and --scheme without --quant:
E0001, one line, before the sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from bad_input.refusal import refuse

REPO = Path(__file__).resolve().parent.parent.parent
MLP = str(REPO / "tests/train/mlp_regression.psk")
LOSS = ["--entry", "Regression.loss", "--dim", "N=4"]


def solve(tmp_path: Path, *flags: str) -> list[str]:
    env = str(tmp_path / "never-read.json")  # refused before the envelope is read
    out = str(tmp_path / "r.json")
    return ["solve", MLP, *LOSS, "--precision", env, "--budget", "1e-3", "--out", out, *flags]


@pytest.mark.parametrize(
    ("menu", "says"),
    [
        ("f64,f32,int2", "'int2' is not a rung"),
        ("f64,f32,f32", "a rung named twice"),
        ("f64,bf16,int8", "needs f64 and f32"),
    ],
)
def test_a_menu_it_cannot_offer(tmp_path, menu, says):
    refuse(solve(tmp_path, "--menu", menu), code="E0001", says=says)


def test_quant_beside_the_menus_integers(tmp_path):
    argv = solve(tmp_path, "--quant", "--menu", "f64,f32,bf16,int8")
    refuse(argv, code="E0001", says="give one")


def test_a_scheme_without_quant(tmp_path):
    refuse(solve(tmp_path, "--scheme", "pow2"), code="E0001", says="give --quant")
