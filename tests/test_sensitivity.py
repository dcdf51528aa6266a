"""`presk dump --stage sensitivity`: every value's ‖∂L/∂v‖₁ from one reverse sweep on the
reference (presk/precision/sensitivity.py), checked against derivatives by hand and the
reference's gradient."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import numpy as np
from programs import REPO

import presk
from presk.api import to_numpy
from presk.cli.common import run_cli
from presk.cli.main import main
from presk.precision.sensitivity import sensitivities
from presk.runtime.inputs import arguments

REGRESSION = REPO / "tests" / "train" / "mlp_regression.psk"
F64 = (2.0**-40, 2.0**-50)  # the f64 band: |x − x̂| ≤ ε·(|x| + a)

# h runs twice, its result's cotangent is h.bwd's argument; t·t reads two calls.
HAND = """dim N = 3
fn h(v : ℝ[N]) -> ℝ[N] { tanh(v) }
fn f(x : ℝ[N], w : ℝ[N]) -> ℝ { sum(h(x) * h(x) * w) }
"""

# A zero-initialised head: nothing upstream of it has a gradient at initialisation.
HEAD = """dim N = 4
module Net {
  param w : ℝ[3, 5] = normal(scale = 1)
  param head : ℝ[5] = zeros
  fn apply(x : ℝ[N, 3]) -> ℝ[N] { tanh(x · w) · head }
  fn loss(x : ℝ[N, 3]) -> ℝ { mean(apply(x)) }
  fn total(x : ℝ[N, 3]) -> ℝ { sum(apply(x)) }
}
"""


def within(mine, exact, band=F64) -> bool:
    eps, a = band
    return bool(np.all(np.abs(mine - exact) <= eps * (np.abs(exact) + a)))


def by_key(found) -> dict:
    return {r.key: r for r in found.rows}


def drawn(core, seed: int = 0) -> list[np.ndarray]:
    """The inputs `presk run --seed` draws for the entry, as numpy."""
    return [to_numpy(v) for v in arguments(core.view, seed, None)]


def test_a_hand_checked_program_gives_its_exact_derivatives():
    core = presk.load(HAND).elaborate("f")
    x, w = drawn(core)
    t = np.tanh(x)
    rows = by_key(sensitivities(core))
    expected = {  # key: (Σ|∂L/∂v|, elements summed over runs)
        "f/%2": (1.0, 1),  # the sum: L itself
        "f/%1": (3.0, 3),  # t·t·w: ones
        "f/%0": (np.abs(w).sum(), 3),  # t·t: w
        "h/%0": (2 * np.abs(t * w).sum(), 6),  # tanh, in two calls: the other t·w each
        "x": (np.abs(2 * t * w * (1 - t * t)).sum(), 3),
        "w": ((t * t).sum(), 3),
    }
    assert rows.keys() == expected.keys()
    for key, (l1, elements) in expected.items():
        assert within(rows[key].l1, l1), (key, rows[key].l1, l1)
        assert rows[key].elements == elements, key
    assert rows["h/%0"].what == "tanh" and rows["h/%0"].source == "<text>:2"


def test_the_parameters_sensitivities_are_the_l1_norms_of_the_gradient():
    core = presk.load(REGRESSION).elaborate("Regression.loss", dims={"N": 8})
    found = by_key(sensitivities(core, seed=3))
    compiled = core.reference(bits=128)
    grad = compiled.grad(core.params(3), *drawn(core, 3))
    for path, g in grad.items():
        assert found[path].what == "parameter"
        assert within(found[path].l1, np.abs(g).sum()), path
        assert found[path].elements == g.size
    dense = found["Dense.apply/%0"]  # two layers run the site
    assert (dense.what, dense.elements) == ("dot", 2 * 8 * 16)
    ranked = [r.l1 for r in sensitivities(core, seed=3).rows]
    assert ranked == sorted(ranked, reverse=True)


def test_a_tensor_valued_entry_is_seeded_with_ones(tmp_path):
    """`apply` seeded with ones is `total` = Σ apply: the same sensitivities below the sum."""
    program = presk.load(HEAD)
    weights = tmp_path / "p.npz"  # a head that is not zero, so every value has a gradient
    np.savez(weights, w=np.linspace(-1, 1, 15).reshape(3, 5), head=np.linspace(0.5, 2, 5))
    tensor = by_key(sensitivities(program.elaborate("Net.apply"), weights=str(weights)))
    scalar = by_key(sensitivities(program.elaborate("Net.total"), weights=str(weights)))
    assert tensor["Net.apply/%2"].l1 == 4  # the output: ones over N = 4
    for key in ("w", "head", "x", "Net.apply/%0", "Net.apply/%1"):
        assert tensor[key].l1 == scalar[key].l1 != 0, key


def dump(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert run_cli(main, ["dump", "--stage", "sensitivity", *map(str, argv)]) == 0
    return out.getvalue()


def test_a_zero_initialised_head_leaves_every_other_sensitivity_0(tmp_path):
    path = tmp_path / "head.psk"
    path.write_text(HEAD)
    text = dump(path, "--entry", "loss")
    listed = [line.split()[0] for line in text.splitlines()[2:-1]]
    assert set(listed) == {"head", "Net.apply/%2", "Net.loss/%0"}  # the head and what reads it
    last = text.splitlines()[-1]
    assert last.startswith("-- every other sensitivity is exactly 0 (4 values)"), (
        last
    )  # w, x, x · w, tanh
    assert last.endswith("pass --weights with trained parameters"), last
