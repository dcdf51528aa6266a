"""`presk dump --stage sensitivity` refuses, with a code and one line, what it cannot
differentiate and parameters that are not the entry's."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from bad_input.refusal import refuse
from presk.cli.common import run_cli
from presk.cli.main import main

PROGRAM = """dim N = 4
fn counts(k : nat{8}[N]) -> ℝ { sum(k) }
fn pick(x : ℝ[N, 3]) -> nat[N] { argmax[1](x) }
module Fit {
  param w : ℝ[3] = normal(scale = 1)
  fn loss(x : ℝ[N, 3]) -> ℝ { sum(tanh(x · w)) }
}
module Other {
  param v : ℝ[2] = zeros
  fn apply(x : ℝ[N, 2]) -> ℝ { sum(x · v) }
}
"""


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "p.psk"
    path.write_text(PROGRAM)
    return str(path)


def sensitivity(program: str, entry: str, *flags: str) -> list[str]:
    return ["dump", program, "--stage", "sensitivity", "--entry", entry, *flags]


@pytest.mark.parametrize(
    "entry, says",
    [
        ("pick", "returns nat[N: 4]: a sensitivity is of a real result"),
        ("counts", "has no real argument or parameter: nothing to differentiate"),
    ],
)
def test_an_entry_with_nothing_to_differentiate_is_refused(program, entry, says):
    refuse(sensitivity(program, entry), code="E3013", says=says)


@pytest.mark.parametrize("entry", ["Fit.loss.grad", "loss.vjp"])
def test_a_derivative_entry_is_refused(program, entry):
    refuse(sensitivity(program, entry), code="E3013", says="a second derivative")


def test_weights_of_another_program_are_refused(program, tmp_path):
    other = tmp_path / "other.npz"
    argv = ["params", program, "--entry", "Other.apply", "--out", str(other)]
    with redirect_stdout(io.StringIO()):
        assert run_cli(main, argv) == 0
    refuse(
        sensitivity(program, "Fit.loss", "--weights", str(other)),
        code="E9005",
        says="no parameter w",
    )


def test_a_module_format_is_refused(program):
    refuse(sensitivity(program, "Fit.loss", "--format", "mlir"), code="E0001", says="text only")
