"""presk check --precision: the first-order bound is sound, its sum order matters as the
realization says, a measured gap counts an overflow as +∞, and a value exact in its type
(or already rounded to it by its own rule) is charged no rounding at its store.

Soundness is checked exactly: the reference supplies the exact value, so on each case
(an entry of the conformance suite, a realization) the bound of every model must be at
least the largest gap the kernels actually make over the envelope's samples, from an
envelope of one magnitude a site and from one of a magnitude a row (`--grain row`).
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest

from presk import api
from presk.cli.main import main
from presk.kernel.functions import RELATIVE_ERROR
from presk.precision.bound import Propagation, measured_gap
from presk.precision.envelope import read_envelope
from presk.precision.rules import LIBM, MODELS, UNIT, gamma
from presk.realize import Realization

REPO = Path(__file__).resolve().parent.parent
PRIMS = "tests/data/prims.psk"
PRIM_DIMS = {"N": 3, "M": 4, "K": 16}  # eight interleaved partials of two terms each

# name -> (program, entry, dims, consts, a contraction site to interleave, or None)
ENTRIES = {
    "dot": (PRIMS, "dot_", PRIM_DIMS, {}, "dot_/%0"),
    "ein": (PRIMS, "ein_", PRIM_DIMS, {}, "ein_/%0"),
    "matmul": (PRIMS, "matmul_", PRIM_DIMS, {}, "matmul_/%0"),
    "sum": (PRIMS, "sum_", PRIM_DIMS, {}, None),
    "mean": (PRIMS, "mean_", PRIM_DIMS, {}, None),
    "softmax": (PRIMS, "softmax_", PRIM_DIMS, {}, None),
    "cross_entropy": (PRIMS, "cross_entropy_", PRIM_DIMS, {}, None),
    "exp": (PRIMS, "exp_", PRIM_DIMS, {}, None),
    "gelu": (PRIMS, "gelu_", PRIM_DIMS, {}, None),
    "LayerNorm{8}.apply": (
        "tutorial/04_norms.psk",
        "LayerNorm{8}.apply",
        {"B": 2, "T": 4},
        {},
        None,
    ),
    "RMSNorm{8}.apply": ("tutorial/04_norms.psk", "RMSNorm{8}.apply", {"B": 2, "T": 4}, {}, None),
    "mse": ("tutorial/02_regression.psk", "MLP{4, 8, 1}.mse", {"N": 16}, {}, None),
}
UNIFORM = ("f64", "f32", "bf16")
CASES = [(e, r) for e in ENTRIES for r in UNIFORM] + [
    (e, "interleaved(8)") for e, spec in ENTRIES.items() if spec[4]
]
GRAINS = ("site", "row")


def _flags(dims: dict, consts: dict) -> list[str]:
    out = []
    for flag, sizes in (("--dim", dims), ("--const", consts)):
        for k, v in sizes.items():
            out += [flag, f"{k}={v}"]
    return out


@pytest.fixture(scope="module")
def envelope_of(tmp_path_factory):
    """Each entry calibrated once a grain, at 64 bits over two samples: its envelope's
    path."""
    out = tmp_path_factory.mktemp("envelopes")

    @cache
    def calibrated(name: str, grain: str = "site") -> str:
        path, entry, dims, consts, _ = ENTRIES[name]
        env = out / f"{len(list(out.iterdir()))}.json"
        argv = ["calibrate", "--precision", str(REPO / path), "--entry", entry]
        argv += [*_flags(dims, consts), "--bits", "64", "--samples", "2", "--workers", "1"]
        assert main([*argv, "--grain", grain, "--out", str(env)]) == 0
        return str(env)

    return calibrated


def _core(name: str) -> api.Core:
    path, entry, dims, consts, _ = ENTRIES[name]
    return api.load(REPO / path).elaborate(entry, dims, consts)


def _realization(name: str, realize: str) -> Realization:
    if realize in UNIFORM:
        return Realization(realize, spelling=realize)
    site = ENTRIES[name][4]
    return Realization("f32", order={site: realize}, spelling=f"@{realize}")


@pytest.mark.parametrize("grain", GRAINS)
@pytest.mark.parametrize(("name", "realize"), CASES, ids=[f"{e}-{r}" for e, r in CASES])
def test_bound_is_at_least_the_measured_gap(name, realize, grain, envelope_of):
    core = _core(name)
    envelope = read_envelope(envelope_of(name, grain))
    r = _realization(name, realize)
    gap = measured_gap(core, envelope, r, "kernel")
    propagation = Propagation(core, envelope, r)
    for model in MODELS:
        bound = propagation.run(model).bound
        assert math.isfinite(bound) and bound >= gap, (model, bound, gap)


def test_soundness_cases_are_enough():
    assert len(CASES) >= 24


def _cond_bound(name: str, r: Realization, envelope_of) -> float:
    core = _core(name)
    return Propagation(core, read_envelope(envelope_of(name)), r).run("cond").bound


def test_a_blocked_order_leaves_the_bound_and_interleaved_changes_it(envelope_of):
    sequential = _cond_bound("dot", Realization("f32"), envelope_of)
    blocked = _cond_bound("dot", Realization("f32", order={"dot_/%0": "blocked(4)"}), envelope_of)
    interleaved = _cond_bound("dot", _realization("dot", "interleaved(8)"), envelope_of)
    assert blocked == sequential
    assert interleaved != sequential


def test_an_overflow_measures_infinity(tmp_path, capsys):
    program = str(REPO / "tests/data/overflow.psk")
    sizes = ["--entry", "loss", "--dim", "N=64"]
    env = str(tmp_path / "env.json")
    assert main(["calibrate", "--precision", program, *sizes, "--bits", "64", "--out", env]) == 0
    core = api.load(program).elaborate("loss", {"N": 64})
    assert measured_gap(core, read_envelope(env), Realization("f32"), "kernel") == math.inf
    capsys.readouterr()
    argv = ["check", "--precision", env, program, *sizes, "--realize", "f32", "--measure"]
    assert main([*argv, "--backend", "kernel"]) == 0
    printed = capsys.readouterr().out
    assert "measured gap (kernel, max over the samples): inf" in printed


NEAR_ONE = str(REPO / "tests/data/edge/near_one.psk")  # x * 0.001 + 1


def _near_one(tmp_path) -> tuple[api.Core, str]:
    env = str(tmp_path / "env.json")
    argv = ["calibrate", "--precision", NEAR_ONE, "--entry", "near_one", "--bits", "64"]
    assert main([*argv, "--samples", "2", "--workers", "1", "--out", env]) == 0
    return api.load(NEAR_ONE).elaborate("near_one"), env


def test_the_envelope_records_the_types_a_site_is_exact_in(tmp_path):
    _, env = _near_one(tmp_path)
    sites = read_envelope(env).sites
    assert sites["near_one/%2"].exact == ("f64", "f32", "bf16")  # the constant 1
    assert sites["near_one/%0"].exact == ()  # 0.001 is no binary number
    assert sites["near_one/%3"].exact == ()
    # a file from before `exact` was recorded: the types its roundings say
    text = json.loads(Path(env).read_text())
    for record in text["sites"].values():
        del record["exact"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(text))
    assert read_envelope(str(older)).sites["near_one/%2"].exact == ("f64", "f32", "bf16")


def test_a_value_exact_in_its_type_is_charged_no_rounding(tmp_path):
    core, env = _near_one(tmp_path)
    parts = Propagation(core, read_envelope(env), Realization("f32")).run("cond").parts
    assert "near_one/%2" not in parts  # the constant 1, stored in f32
    assert parts["near_one/%0"] > 0  # 0.001, rounded


def test_a_sum_is_rounded_once_by_its_additions_not_again_at_its_store(envelope_of):
    envelope = read_envelope(envelope_of("sum"))
    site = envelope.sites["sum_/%0"]
    parts = Propagation(_core("sum"), envelope, Realization("f32")).run("cond").parts
    k = site.sum.terms
    assert parts["sum_/%0"] == pytest.approx(gamma(k - 1, UNIT["f32"]) * site.sum.abs_sum)


@pytest.mark.parametrize(("functions", "beyond"), [("presk", RELATIVE_ERROR), ("libm", None)])
def test_exp_in_f32_is_charged_its_own_functions_error(envelope_of, functions, beyond):
    envelope = read_envelope(envelope_of("exp"))
    r = Realization("f32", functions=functions)
    parts = Propagation(_core("exp"), envelope, r).run("cond").parts
    u = UNIT["f32"]
    beyond = LIBM * u if beyond is None else beyond  # a C library's ulps, or presk's own
    assert parts["exp_/%0"] == pytest.approx((beyond + u) * envelope.sites["exp_/%0"].magnitude)
