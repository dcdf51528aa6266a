"""`presk calibrate --precision`: the magnitude envelope, checked against the reference
and against numbers computed here by hand (docs/precision.md)."""

from __future__ import annotations

from fractions import Fraction
from fractions import Fraction as F  # noqa: N817

import numpy as np
import pytest
from conftest import REPO, run_in_process

from presk import api
from presk.precision.envelope import envelope_for, read_envelope
from presk.precision.samples import sample_arguments

MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")
PRIMS = str(REPO / "tests" / "data" / "prims.psk")
SIZES = ("--dim", "N=3", "--dim", "M=2", "--dim", "K=4")
LOSS = "Regression.loss"


def calibrate(tmp_path, program: str, entry: str, *flags: str, name: str = "env.json"):
    """The envelope `presk calibrate` writes (at 64 bits), its file and its output."""
    out = tmp_path / name
    argv = ["calibrate", "--precision", program, "--entry", entry, "--bits", "64"]
    proc = run_in_process("presk", *argv, *flags, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return read_envelope(str(out)), out, proc.stdout


def prims_samples(env, entry: str) -> list[list[np.ndarray]]:
    """The arguments of each of the envelope's samples of a prims.psk entry."""
    core = api.load(PRIMS).elaborate(entry, env.meta.dims)
    first = env.meta.first
    return [sample_arguments(core, env.meta, i) for i in range(first, first + env.meta.samples)]


def test_the_file_records_the_run_and_the_reference_magnitude(tmp_path):
    env, out, shown = calibrate(
        tmp_path, MLP, LOSS, "--dim", "N=4", "--samples", "2", "--workers", "1", "--seed", "5"
    )
    meta = env.meta
    assert (meta.entry, meta.dims, meta.consts, meta.seed) == (LOSS, {"N": 4}, {}, 5)
    assert (meta.samples, meta.first, meta.bits, meta.grain) == (2, 0, 64, "site")
    assert (meta.weights, meta.data) == (None, None)
    assert len(meta.program) == 64 and len(meta.date) == 10
    # the loss is the mean's value: its magnitude is the largest |loss| of the two samples,
    # rounded up (the reference's value rounded to nearest is at most an ulp below)
    core = api.load(MLP).elaborate(LOSS, {"N": 4})
    reference = core.reference(bits=64)
    loss = max(abs(float(reference(*sample_arguments(core, meta, i)))) for i in (0, 1))
    site = env.sites["Regression.loss/%2"]
    assert site.op == "mean" and site.count == 1 and site.work == 4
    assert loss <= site.magnitude <= np.nextafter(loss, np.inf)
    # Dense.apply runs twice a sample, in two shapes: its dot counts both calls' elements,
    # and its terms are the larger call's (Dense{16, 16}'s, not Dense{3, 16}'s)
    dense = env.sites["Dense.apply/%0"]
    assert dense.count == 4 * 16 * 2 and dense.sum.terms == dense.work == 16
    envelope_for(str(out), core)  # the envelope of this program, entry and bindings
    assert shown.startswith(f"presk calibrate: {len(env.sites)} sites over 2 samples of `{LOSS}`")
    assert "… and 5 more" in shown
    assert shown.endswith("every bound from this file holds over these samples only\n")


def test_sums_of_a_dot_product_are_those_computed_by_hand(tmp_path):
    env, _, _ = calibrate(tmp_path, PRIMS, "dot_", *SIZES, "--samples", "2", "--workers", "1")
    site = env.sites["dot_/%0"]
    s = site.sum
    assert s.terms == site.work == 4
    samples = prims_samples(env, "dot_")  # a : [N, K], b : [K, M]
    terms = [
        [F(x) * F(w) for x, w in zip(a[i], b[:, j], strict=True)]
        for a, b in samples
        for i in range(3)
        for j in range(2)
    ]
    # every bound is the exact value rounded up to float64
    assert_rounded_up(s.abs_sum, max(sum(map(abs, t)) for t in terms))
    assert_rounded_up(s.rss**2, max(sum(x * x for x in t) for t in terms), 4)
    assert_rounded_up(s.factors[0], most(np.abs(b).T for _, b in samples))  # a's: Σ|w|
    assert_rounded_up(s.factors[1], most(np.abs(a) for a, _ in samples))  # b's: Σ|x|
    assert_rounded_up(s.rss_factors[0] ** 2, most(b.T**2 for _, b in samples), 4)
    assert_rounded_up(s.rss_factors[1] ** 2, most(a**2 for a, _ in samples), 4)
    # a plain sum's operand: its factor is k, its rss factor √k
    env, _, _ = calibrate(tmp_path, PRIMS, "sum_", *SIZES, "--samples", "1", name="sum.json")
    (factor,), (rss_factor,) = (
        env.sites["sum_/%0"].sum.factors,
        env.sites["sum_/%0"].sum.rss_factors,
    )
    assert factor == 2.0
    assert_rounded_up(rss_factor**2, F(2), 4)


def test_a_large_sum_over_balls_is_bounded_in_float64_and_still_from_above(tmp_path, monkeypatch):
    # every sum taken as large: the statistics come from float64 over the balls' bounds,
    # at least the exact ones and within the relative 4(k + 2)·2⁻⁵³ the docstring gives
    monkeypatch.setattr("presk.precision.calibrate.FLOAT64_STATS_WORK", 0)
    env, _, _ = calibrate(tmp_path, PRIMS, "dot_", *SIZES, "--samples", "2", "--workers", "1")
    s = env.sites["dot_/%0"].sum
    samples = prims_samples(env, "dot_")
    terms = [
        [F(x) * F(w) for x, w in zip(a[i], b[:, j], strict=True)]
        for a, b in samples
        for i in range(3)
        for j in range(2)
    ]
    loose = 4 * (s.terms + 2) + 2  # ulps: the rounding's allowance, two steps up
    assert_rounded_up(s.abs_sum, max(sum(map(abs, t)) for t in terms), loose)
    assert_rounded_up(s.rss**2, max(sum(x * x for x in t) for t in terms), 2 * loose + 4)
    assert_rounded_up(s.factors[0], most(np.abs(b).T for _, b in samples), loose)
    assert_rounded_up(s.rss_factors[1] ** 2, most(a**2 for a, _ in samples), 2 * loose + 4)


def test_the_float64_bound_covers_a_sum_whose_roundings_all_fall_below():
    # 1 + 2⁻⁵³ + 2⁻⁵³ rounds to 1 at each addition (ties to even); the exact sum is
    # 1 + 2⁻⁵²: the bound must reach it, and stay within the allowance above it
    from presk.precision.calibrate import _float64_sum_bound

    exact = 1 + F(2) ** -52
    computed = 1.0 + 2.0**-53 + 2.0**-53
    assert computed == 1.0 and F(computed) < exact
    bound = _float64_sum_bound(computed, 3)
    assert exact <= F(bound) <= exact * (1 + F(4 * 5 + 2, 2**52))
    assert _float64_sum_bound(0.0, 3) > 0  # a sum that underflowed to 0 is bounded above 0


def most(groups) -> Fraction:
    """The largest exact sum of a row, over the rows of each array of `groups`."""
    return max(sum(map(F, row), F(0)) for rows in groups for row in rows)


def assert_rounded_up(bound: float, exact: Fraction, ulps: int = 1) -> None:
    """`bound` is at least `exact` and within `ulps` float64 ulps above it."""
    assert Fraction(bound) >= exact
    assert Fraction(bound) <= exact * (1 + Fraction(ulps, 2**52))


def test_f32_rounding_is_numpys(tmp_path):
    # neg's values are the drawn float64 inputs negated: exact in float64, so numpy's
    # float32 rounding of them is the correctly rounded one, and the error is exact
    env, _, _ = calibrate(tmp_path, PRIMS, "neg", *SIZES, "--samples", "2", "--workers", "1")
    values = np.concatenate([-a.ravel() for (a,) in prims_samples(env, "neg")])
    error = np.max(np.abs(values.astype(np.float32).astype(np.float64) - values))
    assert error > 0 and env.sites["neg/%0"].rounding["f32"] == error
    assert env.sites["neg/%0"].magnitude == np.max(np.abs(values))
    assert env.sites["neg/%0"].rounding["bf16"] > error


@pytest.mark.parametrize("grain", ["row", "channel"])
def test_a_grain_keeps_a_magnitude_a_row_or_channel(tmp_path, grain):
    env, _, _ = calibrate(
        tmp_path, PRIMS, "neg", *SIZES, "--samples", "2", "--grain", grain, "--workers", "1"
    )
    site = env.sites["neg/%0"]
    magnitudes = np.max([np.abs(a) for (a,) in prims_samples(env, "neg")], axis=0)  # [N, M]
    want = magnitudes.max(axis=1 if grain == "row" else 0)
    assert site.grain.kind == grain and site.grain.magnitude == tuple(want)
    assert max(site.grain.magnitude) == site.magnitude
    assert max(site.grain.rounding["f32"]) == site.rounding["f32"]


def test_serial_local_workers_and_dask_write_the_same_bytes(tmp_path, monkeypatch):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    flags = ("--dim", "N=4", "--samples", "3", "--grain", "row")
    _, serial, _ = calibrate(tmp_path, MLP, LOSS, *flags, "--workers", "1", name="serial.json")
    _, local, _ = calibrate(tmp_path, MLP, LOSS, *flags, "--workers", "2", name="local.json")
    with distributed.LocalCluster(processes=False, n_workers=1, dashboard_address=None) as c:
        _, dask, _ = calibrate(
            tmp_path, MLP, LOSS, *flags, "--scheduler", c.scheduler_address, name="dask.json"
        )
    assert serial.read_bytes() == local.read_bytes() == dask.read_bytes()
    assert read_envelope(str(serial)).meta.date == "2023-11-14"
