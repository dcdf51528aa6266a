"""`--sweep f64`: the sensitivity sweep in binary64 on the kernel evaluator
(presk/precision/sensitivity.py), checked against the sweep on the reference.

The l1 norms agree within the f64 band. The weighted terms Σᵢ |∂L/∂vᵢ|·|fl_t(vᵢ) − vᵢ|
agree to a relative 1e-6 only: a forward value off by a few ulps of f64 moves its rounding
error |fl_t(v) − v| by as much, which is a large part of that error wherever v lies
close to a number of t."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import gmpy2
import numpy as np
import pytest
from programs import REPO

import presk
from presk.api import to_numpy
from presk.cli.main import main
from presk.errors import UsageError
from presk.precision.calibrate import ROUNDING_ERRORS
from presk.precision.sensitivity import sensitivities
from presk.runtime.inputs import arguments

REGRESSION = REPO / "tests" / "train" / "mlp_regression.psk"
LOSS = ["--entry", "Regression.loss", "--dim", "N=4"]
MINIGPT = REPO / "tutorial" / "05_minigpt.psk"
F64 = (2.0**-40, 2.0**-50)  # the f64 band: |x − x̂| ≤ ε·(|x| + a)
WEIGHTED = 1e-6  # relative, for the weighted terms (the module's docstring says why)


def presk_cli(*argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(a) for a in argv]) == 0
    return out.getvalue()


def assert_sweeps_agree(core, **given) -> None:
    """The f64 sweep has the reference's rows, each within the bands."""
    exact = {r.key: r for r in sensitivities(core, **given).rows}
    binary64 = {r.key: r for r in sensitivities(core, sweep="f64", **given).rows}
    assert binary64.keys() == exact.keys()
    eps, a = F64
    for key, r in exact.items():
        mine = binary64[key]
        assert mine.elements == r.elements, key
        assert abs(mine.l1 - r.l1) <= eps * (abs(r.l1) + a), (key, mine.l1, r.l1)
        assert (mine.weighted is None) == (r.weighted is None), key
        for t, w in (r.weighted or {}).items():
            assert abs(mine.weighted[t] - w) <= WEIGHTED * w, (key, t, mine.weighted[t], w)


def test_the_f64_sweep_of_an_mlp_agrees_with_the_reference():
    core = presk.load(REGRESSION).elaborate("Regression.loss", dims={"N": 8})
    assert_sweeps_agree(core, seed=3)


def test_the_f64_sweep_reads_every_site_through_calls_and_folds():
    """The tiny MiniGPT: stacked blocks in a fold, cotangents marked on tuple fields; its
    zero-initialised head drawn instead, so every value has a sensitivity."""
    core = presk.load(MINIGPT).elaborate("MiniGPT{64, 16, 2, 2}.loss", dims={"B": 1, "T": 8})
    params = core.params(0)
    params["head"] = np.random.default_rng(0).normal(scale=0.02, size=params["head"].shape)
    sample = [params] + [to_numpy(v) for v in arguments(core.view, 0, None)]
    assert_sweeps_agree(core, sample=sample)


def test_the_rounding_errors_of_doubles_are_doubles_and_exact():
    """|fl_t(x) − x| of float64 numbers in float64, equal to MPFR's: one rounding to bf16
    (numpy's cast goes through f32 and rounds 1 + 2⁻⁸ + 2⁻³⁰ to 1, not 1 + 2⁻⁷),
    subnormals, the largest finite numbers, overflow to ∞."""
    drawn = np.random.default_rng(1).standard_normal(20_000)
    scales = np.exp2(np.random.default_rng(2).integers(-160, 140, drawn.size))
    edges = [1 + 2**-8 + 2**-30, 1 + 2**-8, 1 + 3 * 2**-8, 2.0**-133, 1.5 * 2**-134]
    edges += [2.0**-150, 1.5 * 2**-150, 0.0, 5e-324, 3.4028235e38, 3.4028236e38, -1e300]
    x = np.concatenate([drawn * scales, edges])
    with gmpy2.context(precision=128), np.errstate(over="ignore"):  # MPFR's overflow to ∞
        for t, errors in ROUNDING_ERRORS.items():
            mine = errors(x)
            assert mine.dtype == np.float64, t
            exact = np.array([float(e) for e in errors(x.astype(object))])
            assert np.array_equal(mine, exact), t


def test_presk_solve_with_the_f64_sweep_ends_inside_its_budget(tmp_path):
    env = tmp_path / "env.json"
    flags = ("--bits", "64", "--samples", "2", "--workers", "1")
    presk_cli("calibrate", "--precision", REGRESSION, *LOSS, *flags, "--out", env)
    text = presk_cli(
        "solve", REGRESSION, *LOSS, "--precision", env, "--budget", "1e-3", "--sweep", "f64",
        "--workers", "1", "--out", tmp_path / "r.json",
    )  # fmt: skip
    gap = next(x for x in text.splitlines() if x.startswith("measured gap"))
    assert gap.endswith(": inside")


def test_presk_dump_says_where_its_sweep_ran():
    text = presk_cli("dump", REGRESSION, "--stage", "sensitivity", *LOSS, "--sweep", "f64")
    head = "-- sensitivity of Regression.loss: ‖∂L/∂v‖₁, one reverse sweep in binary64"
    assert text.startswith(head)


def test_an_unknown_sweep_is_refused():
    core = presk.load(REGRESSION).elaborate("Regression.loss", dims={"N": 4})
    with pytest.raises(UsageError, match="unknown sweep 'f32'"):
        sensitivities(core, sweep="f32")
