"""The time objective of `presk solve --profile` (presk/precision/offers.py's `Time`,
solve.py): predicted time from a hand-written profile, never a timing. It prefers f32 to bf16 where
bf16 computes no faster, and charges a conversion at each kernel's edge where a value
stored in one type is read by a kernel of another."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from presk.precision.offers import TRAFFIC, Menu, Priced, Time
from presk.precision.profile import PAIRS, TYPES, read_profile
from presk.precision.solve import by_next_saving, propose, settle

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


def test_bf16_is_taken_where_the_profile_says_it_is_faster(tmp_path):
    # the same kernels, bf16 computing twice as fast as f32: the objective follows the profile
    menu = chain_menu(profile_file(tmp_path, bf16_work_rate=2e9), "abc", work=1000)
    assert solved(menu) == dict.fromkeys("abc", "bf16")


def test_a_value_narrowed_alone_between_two_f64_kernels_costs_a_conversion_each_side(tmp_path):
    profile = profile_file(tmp_path, convert_element=1e-9, convert_fixed=2e-6)
    menu = chain_menu(profile, "b")
    own = menu.saving({}, "b", "f32", edges=False)
    edges = profile.convert("f64", "f32", 1000) + profile.convert("f32", "f64", 1000)
    assert edges == pytest.approx(2 * (2e-6 + 1000 * 1e-9))
    assert menu.cost({}) - menu.cost({"b": "f32"}) == pytest.approx(own - edges)
    assert menu.saving({}, "b", "f32") == pytest.approx(own - edges)


def test_the_solver_leaves_a_lone_value_wide_when_its_conversions_cost_more_than_it_saves(
    tmp_path,
):
    menu = chain_menu(profile_file(tmp_path, convert_fixed=1e-3), "b")
    moves = []
    assignment = propose(menu, target=1.0, how="sum", moves=moves)
    assert assignment["b"] != "f64"  # its own kernel is faster narrowed
    settle(menu, assignment, "sum", moves)
    assert assignment == {"b": "f64"}
    widened = [m for m in moves if m.move == "widen"]
    assert [(m.to, m.outcome) for m in widened] == [("f64", "slower")]


def test_a_chain_narrowed_together_pays_no_conversion_inside_it(tmp_path):
    menu = chain_menu(profile_file(tmp_path, convert_fixed=1e-3), "abc")
    assert solved(menu) == dict.fromkeys("abc", "bf16")


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
