"""The time objective of `presk solve` (presk/precision/offers.py's `Time`, solve.py):
predicted time from a hand-written profile, never a timing. It prefers f32 to bf16 where
bf16 computes no faster (presk computes bf16 in f32), and charges a conversion at each
kernel's edge where a value stored in one type is read by a kernel of another. It starts
from all-f32 where all-f32 measures inside the budget, the values the rules leave out
following it, and a record that ran slower than a uniform realization inside the budget
becomes that one (the timings given, not taken). This machine's own profile is fitted once
and kept in the cache, read back verified."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from presk import api
from presk.cli.main import main
from presk.kernel.machine import MACHINES
from presk.precision.calibrate import Job
from presk.precision.envelope import envelope_for
from presk.precision.explain import explain, moves_record
from presk.precision.offers import TRAFFIC, Menu, Priced, Time, envelope_menu
from presk.precision.profile import (
    PAIRS,
    TIMED,
    TINY,
    TYPES,
    calibrate,
    machine_profile,
    read_profile,
)
from presk.precision.solve import Gauge, Options, baseline, by_next_saving, propose, settle, solve
from presk.precision.solve_text import _versus
from presk.precision.versus import Run, Versus, answered
from presk.toolchain import host_cpu

MLP = str(Path(__file__).resolve().parent / "train/mlp_regression.psk")

TERMS = {"f64": 0.0, "f32": 1e-9, "bf16": 1e-6}  # every value's term: tiny against the target


def profile_file(tmp_path, bf16_work_rate=1e9, convert_element=1e-9, convert_fixed=0.0):
    """A profile where f32 computes and streams twice as fast as f64, and bf16 streams
    twice as fast as f32 but computes at `bf16_work_rate`."""
    rates = {"f64": (5e8, 1e9), "f32": (1e9, 2e9), "bf16": (bf16_work_rate, 4e9)}
    record = {
        "machine": {"cpu": "test-cpu", "threads": 1},
        "date": "2026-12-01",
        "types": {
            t: {"latency": 1e-6, "work_rate": rates[t][0], "byte_rate": rates[t][1]} for t in TYPES
        },
        "conversions": dict.fromkeys(PAIRS, {"fixed": convert_fixed, "element": convert_element}),
    }
    path = tmp_path / "P.json"
    path.write_text(json.dumps(record))
    return read_profile(str(path))


def chain_menu(profile, offered, work=1) -> Menu:
    """Three stored values a -> b -> c, each read by the next kernel, of 1000 elements."""
    readers = {"a": ("b",), "b": ("c",), "c": ()}
    values = {k: Priced(k, "value", 1000, dict(TERMS), readers[k]) for k in "abc"}
    time = Time(profile, work=dict.fromkeys("abc", work * 1000), launches=dict.fromkeys("abc", 1))
    return Menu(values, {}, tuple(offered), {}, 3 * 8000, 0.0, time)


def solved(menu: Menu) -> dict[str, str]:
    moves = []
    assignment = propose(menu, target=1.0, how="sum", moves=moves)
    settle(menu, assignment, "sum", moves)
    return assignment


def test_the_time_objective_prefers_f32_to_bf16_where_bf16_computes_no_faster(tmp_path):
    # compute-bound kernels (work 1000 an element): bf16 at f32's rate saves no time
    menu = chain_menu(profile_file(tmp_path, bf16_work_rate=1e9), "abc", work=1000)
    assert solved(menu) == dict.fromkeys("abc", "f32")


@pytest.mark.parametrize("work", [1000, 1])  # compute-bound, memory-bound
def test_bf16_is_no_faster_than_f32_whatever_its_fit_says(tmp_path, work):
    # bf16's product fitted twice as fast as f32's, and it streams its half of f32's bytes
    # at twice f32's rate: presk computes bf16 in f32, so it is priced no faster than f32,
    # and not taken for a speed it cannot have
    profile = profile_file(tmp_path, bf16_work_rate=2e9)
    assert profile.roofline("bf16").work_rate == profile.roofline("f32").work_rate
    menu = chain_menu(profile, "abc", work=work)
    assert menu.saving(dict.fromkeys("abc", "f32"), "b", "bf16", edges=False) == 0
    assert solved(menu) == dict.fromkeys("abc", "f32")


def test_a_value_narrowed_alone_between_two_f64_kernels_costs_a_conversion_each_side(tmp_path):
    # each in its reader's loads, an element at a time: no host step, so no fixed cost
    profile = profile_file(tmp_path, convert_element=1e-9, convert_fixed=2e-6)
    menu = chain_menu(profile, "b")
    own = menu.saving({}, "b", "f32", edges=False)
    edges = profile.load("f64", "f32", 1000) + profile.load("f32", "f64", 1000)
    assert edges == pytest.approx(2 * 1000 * 1e-9)
    assert menu.cost({}) - menu.cost({"b": "f32"}) == pytest.approx(own - edges)
    assert menu.saving({}, "b", "f32") == pytest.approx(own - edges)


def test_the_solver_leaves_a_lone_value_wide_when_its_conversions_cost_more_than_it_saves(
    tmp_path,
):
    menu = chain_menu(profile_file(tmp_path, convert_element=1e-6), "b")
    moves = []
    assignment = propose(menu, target=1.0, how="sum", moves=moves)
    assert assignment["b"] != "f64"  # its own kernel is faster narrowed
    settle(menu, assignment, "sum", moves)
    assert assignment == {"b": "f64"}
    widened = [m for m in moves if m.move == "widen"]
    assert [(m.to, m.outcome) for m in widened] == [("f64", "slower")]


def test_a_chain_narrowed_together_pays_no_conversion_inside_it(tmp_path):
    menu = chain_menu(profile_file(tmp_path, convert_element=1e-6), "abc")
    assert solved(menu) == dict.fromkeys("abc", "f32")


def test_rule_2_counts_time_under_a_profile(tmp_path):
    # a value whose first narrowing saves too few bytes (θ·B = 10⁶, it saves 4000) but
    # whose kernel computes much saves time in f32: with a profile it is offered; a kernel
    # computing little is not, and by traffic neither is
    few_bytes = {"all_f64": 10**9}
    heavy = replace(chain_menu(profile_file(tmp_path), "abc", work=1000), **few_bytes)
    light = replace(chain_menu(profile_file(tmp_path), "abc", work=1), **few_bytes)

    def offered(menu: Menu, min_gain: float) -> bool:
        menu = replace(menu, min_gain=min_gain)
        return menu.objective.offers(menu, menu.item("b"))

    assert offered(heavy, 1e-3)
    assert not offered(light, 0.5)
    assert not offered(replace(heavy, objective=TRAFFIC), 1e-3)


def test_narrowing_by_measurement_tries_the_largest_saving_of_time_first(tmp_path):
    # a saves the most bytes; b, a tenth of a's elements but computing much, the most time
    values = {k: Priced(k, "value", n, dict(TERMS)) for k, n in (("a", 1000), ("b", 100))}
    time = Time(profile_file(tmp_path), work={"a": 1000, "b": 100_000}, launches={"a": 1, "b": 1})
    menu = Menu(values, {}, ("a", "b"), {}, 1100 * 8, 0.0, time)
    f64 = dict.fromkeys("ab", "f64")
    assert by_next_saving(menu, f64) == ["b", "a"]
    assert by_next_saving(replace(menu, objective=TRAFFIC), f64) == ["a", "b"]


def test_this_machines_profile_is_fitted_once_and_read_back_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    fits = []

    def fit(threads: int):  # a fit without timing: the hand-written profile, of this CPU
        fits.append(threads)
        return replace(profile_file(tmp_path), cpu=host_cpu()[0], threads=threads)

    first = machine_profile(2, fit)
    assert machine_profile(2, fit) == first and fits == [2]  # read back
    kept = next((tmp_path / "cache" / "profiles").glob("*.json"))
    kept.write_text(kept.read_text().replace("2026-12-01", "2026-12-02"))
    assert machine_profile(2, fit) == first and fits == [2, 2]  # its digest disagreed
    machine_profile(1, fit)
    assert fits == [2, 2, 1]  # another number of threads, another profile


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """The training tests' MLP regression at N = 4: its entry, envelope and job."""
    path = tmp_path_factory.mktemp("env") / "mlp.json"
    flags = ["--bits", "64", "--samples", "2", "--workers", "1", "--out", str(path)]
    main(["calibrate", "--precision", MLP, "--entry", "Regression.loss", "--dim", "N=4", *flags])
    core = api.load(MLP).elaborate("Regression.loss", {"N": 4})
    envelope = envelope_for(str(path), core)
    job = Job(Path(MLP).read_text(), MLP, "store", envelope.meta)
    return core, envelope, job


def solved_mlp(mlp, tmp_path, budget: float, objective: str = "time"):
    """The MLP solved at `budget` with θ = 0.05: rule 2 leaves out 12 of its 17 values."""
    core, envelope, job = mlp
    profile = profile_file(tmp_path, convert_element=1e-8) if objective == "time" else None
    m = envelope_menu(core, envelope, min_gain=0.05, profile=profile)
    return m, solve(m, Options(budget), Gauge(core, envelope, job, m))


def test_the_default_solve_starts_from_all_f32_where_all_f32_is_inside_the_budget(mlp, tmp_path):
    # before: the values rule 2 left out stayed f64 beside f32 kernels, a record predicted
    # (2.11e-5 s) slower than all-f32 (1.64e-5 s) by the objective that chose it
    m, s = solved_mlp(mlp, tmp_path, 1e-3)
    assert len(m.left_out["rule 2"]) >= 10
    every_f32 = {k: "f32" for k in (*m.values, *m.params)}
    assert s.menu.cost(s.assignment) <= m.cost(every_f32)
    assert s.realization.default == "f32" and s.inside
    assert s.base.rung == "f32" and s.base.gaps["f32"] <= s.budget
    # each value left out is rounded to f32 by the record, and charged its f32 term
    terms = s.menu.terms(s.assignment)
    left = [*m.left_out["rule 1"], *m.left_out["rule 2"]]
    assert all(terms[k] == m.item(k).terms["f32"] > 0 for k in left if k in m.values)
    ex = explain(mlp[0], s.realization, moves_record(s, ""), "solved")
    why = {d.key: d.why(ex.figures) for d in ex.decisions}
    assert why[m.left_out["rule 2"][0]][0].endswith("; kept f32")


def test_a_budget_all_f32_misses_keeps_the_default_f64_and_bytes_has_no_base(mlp, tmp_path):
    m, s = solved_mlp(mlp, tmp_path, 1e-12)
    assert s.base.rung == "f64" and s.base.gaps["f32"] > s.budget
    assert s.realization.default == "f64" and s.menu.default == "f64"
    assert all(s.menu.item(k).ladder[0] == "f64" for k in m.offered)
    m, s = solved_mlp(mlp, tmp_path, 1e-3, objective="bytes")
    assert s.base is None and s.realization.default == "f64"
    assert s.realization.storage or s.realization.params


def test_a_value_the_sweep_did_not_reach_is_charged_0_where_exact_and_else_counted(mlp, tmp_path):
    m, _ = solved_mlp(mlp, tmp_path, 1e-3)
    key = m.left_out["rule 2"][0]
    for exact, term, uncharged in ((("f64", "f32"), 0.0, 0), (("f64",), None, 1)):
        blind = replace(m.values[key], terms=None, exact=exact)  # as if the sweep missed it
        unreached = replace(m, values={**m.values, key: blind})
        base = baseline(unreached, Gauge(*mlp, unreached), budget=1.0)
        assert (base.rung, base.uncharged) == ("f32", uncharged)
        # rounding nothing in a type it is exact in; else unknown, not zero
        assert unreached.based("f32").terms({}).get(key) == term


def test_a_record_slower_than_all_f32_inside_the_budget_becomes_all_f32(mlp, tmp_path):
    _, s = solved_mlp(mlp, tmp_path, 1e-3)
    key = next(k for k in s.assignment if s.menu.item(k).kind == "value")
    mixed = replace(s, assignment={**s.assignment, key: "bf16"})
    timed = Versus(
        Run("the solved record", 300, 1e-4, 2.0),
        Run("all-f32", 400, s.base.gaps["f32"], 1.0),
        Run("all-f64", 800, 0.0, 4.0),
        "mlir",
        20,
    )
    gauge = Gauge(*mlp, s.menu)
    r, v = answered(mixed, timed, "sum", gauge)
    assert r.realization.default == "f32" and not r.realization.storage
    assert (r.moves[-1].rung, r.moves[-1].to, r.moves[-1].outcome) == ("bf16", "f32", "slower")
    assert v.own.ms == 2.0 and v.solved.ms == 1.0 and v.same_as == "all-f32"
    said = _versus(v, s.budget, based=True)[-1]
    assert said.startswith("the solved record is all-f32, the fastest inside the budget here")
    # faster than all-f32, or under an objective without bases (bytes), it stays
    faster = replace(timed, solved=replace(timed.solved, ms=0.5))
    assert answered(mixed, faster, "sum", gauge)[0] is mixed
    assert answered(replace(mixed, base=None), timed, "sum", gauge)[0].assignment[key] == "bf16"


def test_the_fit_times_the_three_types_of_each_kernel_in_turns(monkeypatch):
    # timed one type after another, a load drifting during the fit skewed their ratios
    # (this machine's kept fit had f32 streaming at a fifth of f64's rate). Made-up
    # timings, no clock: every type streams 10⁹ bytes a second and works 10¹⁰ a second
    # over a call of 2 µs, of which the host's is 1
    turns = []

    def in_turns(calls, repeat, rounds):
        turns.append(tuple(calls))
        entry, n = TIMED[len(turns) - 1]

        def seconds(t: str) -> float:
            if entry == "same":
                return 1e-6  # a call that launches nothing: the host's
            if n == TINY:
                return 2e-6  # the tiny chain: the host's and one launch
            work = n * MACHINES[t].bytes / 1e9 if entry == "chain" else n**3 / 1e10
            return 2e-6 + work

        return {t: [seconds(t) * 1e3] * repeat for t in calls}

    monkeypatch.setattr("presk.precision.profile._call", lambda core, t, threads: None)
    monkeypatch.setattr("presk.precision.profile.timed_in_turns", in_turns)
    fitted = calibrate(repeat=2)
    assert turns == [TYPES] * len(TIMED)
    for t in TYPES:
        assert fitted.types[t].byte_rate == pytest.approx(1e9)
        assert fitted.types[t].work_rate == pytest.approx(1e10)
        assert fitted.types[t].latency == pytest.approx(1e-6)
