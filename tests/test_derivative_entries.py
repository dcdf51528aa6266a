"""`--entry f.grad` and `--entry 'M{…}.f.vjp'`: a function's derivative as an entry, with
no alias in the program, computing what the alias `fn _ = grad(f)` computes."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import numpy as np
import pytest
from bad_input.refusal import refuse

from presk.cli.common import run_cli
from presk.cli.main import main

PROGRAM = """dim N
fn f(x : ℝ[N, 3], v : ℝ[3]) -> ℝ { sum(tanh(x · v)) }
fn f_grad = grad(f)
fn f_vjp = f.vjp
module Fit{K} {
  param w : ℝ[K] = normal(scale = 1)
  fn loss(x : ℝ[N, K]) -> ℝ { sum(x · w) }
  fn loss_grad = grad(loss)
  fn loss_vjp = loss.vjp
}
"""


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "d.psk"
    path.write_text(PROGRAM)
    return path


def outputs(program, entry: str, tmp_path, *flags: str) -> dict[str, np.ndarray]:
    out = tmp_path / f"{entry}.npz"
    argv = ["run", program, "--entry", entry, "--dim", "N=4", "--backend", "kernel", *flags]
    with redirect_stdout(io.StringIO()):
        assert run_cli(main, [*map(str, argv), "--out", str(out)]) == 0
    with np.load(out) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize(
    "suffixed, alias, flags",
    [
        ("f.grad", "f_grad", ()),
        ("f.vjp", "f_vjp", ()),
        ("Fit{3}.loss.grad", "Fit{3}.loss_grad", ()),
        ("Fit{3}.loss.vjp", "Fit{3}.loss_vjp", ()),
        ("loss.grad", "Fit{3}.loss_grad", ("--const", "K=3")),  # the module that has it
    ],
)
def test_a_derivative_entry_gives_the_aliass_bits(program, tmp_path, suffixed, alias, flags):
    mine = outputs(program, suffixed, tmp_path, *flags)
    theirs = outputs(program, alias, tmp_path)
    assert mine.keys() == theirs.keys()
    assert all(np.array_equal(mine[k].view(np.uint64), theirs[k].view(np.uint64)) for k in mine)


@pytest.mark.parametrize(
    "entry, code",
    [
        ("g.grad", "E3001"),  # no function g
        ("Fit{3}.loss.hessian", "E3002"),  # only grad and vjp
        ("Fit{3}.nothing.grad", "E3001"),
        ("Fit{3}.loss_grad.grad", "E2020"),  # a derivative of a derivative
    ],
)
def test_a_bad_derivative_entry_is_refused(program, entry, code):
    refuse(["run", program, "--entry", entry, "--dim", "N=4"], code=code)


@pytest.mark.parametrize("second", ["fn f2 = grad(f1)", "fn f2 = f1.vjp"])
def test_a_second_derivative_is_refused_at_its_place(tmp_path, second):
    path = tmp_path / "second.psk"
    first = "fn f1 = grad(f0)" if "grad" in second else "fn f1 = f0.vjp"
    path.write_text(f"fn f0(x : ℝ) -> ℝ {{ x * x * x }}\n{first}\n{second}\n")
    entry = "f2" if "grad" in second else "main"
    if entry == "main":
        path.write_text(path.read_text() + "fn main(x : ℝ) { f2(x, 1, (1,)) }\n")
    refuse(["run", path, "--entry", entry], code="E2020", says=f"{path}:3:")


def test_a_long_chain_of_derivative_aliases_is_refused_at_once(tmp_path):
    """Each `.vjp` of a `.vjp` doubles the types: refused before any is built."""
    path = tmp_path / "chain.psk"
    aliases = [f"fn f{i} = f{i - 1}.vjp" for i in range(1, 60)]
    path.write_text("\n".join(["fn f0(x : ℝ) -> ℝ { x * x }", *aliases]) + "\n")
    refuse(["dump", path, "--entry", "f59"], code="E2020", says="no second derivatives")
