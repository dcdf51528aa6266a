"""The solver's objective is a seam (presk/precision/offers.py's `Objective`): the proposal,
the settling, rule 2 and the summary ask the menu's objective what a candidate costs, what
a move saves and how to say both, never which objective it is. An objective of the test's
own, which none of them knows, drives them all."""

from __future__ import annotations

from dataclasses import dataclass

from presk.precision.offers import RULES, TRAFFIC, Menu, Priced
from presk.precision.solve import Options, solve
from presk.precision.solve_text import summary

TERMS = {"f64": 0.0, "f32": 1e-9, "bf16": 1e-6}  # every value's term: tiny against the budget


@dataclass(frozen=True)
class Tolls:
    """A made-up price an element in each rung (bf16 dearer than f32, as on a machine
    that converts it), and a toll at every edge between two rungs."""

    price: dict[str, float]
    toll: float

    def cost(self, menu: Menu, assignment: dict[str, str]) -> float:
        def rung(key: str) -> str:
            return assignment.get(key, "f64")

        return sum(
            p.elements * self.price[rung(k)]
            + sum(self.toll for r in p.readers if rung(r) != rung(k))
            for k, p in menu.values.items()
        )

    def saving(self, menu, assignment, key, to, edges=True) -> float:
        if not edges:
            rung = assignment.get(key, "f64")
            return menu.item(key).elements * (self.price[rung] - self.price[to])
        return self.cost(menu, assignment) - self.cost(menu, {**assignment, key: to})

    def offers(self, menu: Menu, p: Priced) -> bool:
        return True

    def rule_2(self, menu: Menu) -> str:
        return "nothing: the tolls offer every value"

    def report(self, menu: Menu, assignment: dict[str, str]) -> list[str]:
        return [f"tolls: {self.cost(menu, assignment):g} against {self.cost(menu, {}):g} all-f64"]

    def bases(self, menu: Menu) -> tuple[str, ...]:
        return ()  # the record's default f64


class Inside:
    """A gauge whose every candidate measures inside the budget."""

    runs = 0

    def gap(self, assignment: dict[str, str]) -> float:
        self.runs += 1
        return 0.0


def chain(objective, offered: str) -> Menu:
    """Three stored values a -> b -> c, each read by the next kernel, of 1000 elements."""
    readers = {"a": ("b",), "b": ("c",), "c": ()}
    values = {k: Priced(k, "value", 1000, dict(TERMS), readers[k]) for k in "abc"}
    left_out = {rule: [] for rule in RULES}
    return Menu(values, {}, tuple(offered), left_out, 3 * 8000, 1e-3, objective)


def test_an_objective_the_solver_does_not_know_drives_it_and_its_summary():
    # narrowing b alone saves 2000 at its kernel but pays a toll of 5000 at each edge
    tolls = Tolls({"f64": 3.0, "f32": 1.0, "bf16": 2.0}, toll=5000.0)
    options = Options(budget=1.0, absolute=True)
    s = solve(chain(tolls, "b"), options, Inside())
    moves = [(m.move, m.rung, m.to, m.outcome) for m in s.moves]
    assert moves == [
        ("narrow", "f64", "f32", "taken"),  # its own kernel saves
        ("narrow", "f32", "bf16", "slower"),  # dearer at its kernel: the objective says so
        ("widen", "f32", "f64", "slower"),  # the settling: the tolls cost more than it saves
    ]
    assert s.assignment == {"b": "f64"}
    text = summary(s, options, "kernel", "chain", "chain.psk", "r.json", "r.moves.json")
    assert "rule 2 (first narrowing saves nothing: the tolls offer every value)" in text
    assert "\ntolls: 9000 against 9000 all-f64\n" in text


def test_a_chain_narrowed_together_pays_no_toll():
    tolls = Tolls({"f64": 3.0, "f32": 1.0, "bf16": 2.0}, toll=5000.0)
    s = solve(chain(tolls, "abc"), Options(budget=1.0, absolute=True), Inside())
    assert s.assignment == dict.fromkeys("abc", "f32")
    assert s.menu.cost(s.assignment) == 3000.0


def test_traffic_says_nothing_past_the_traffic_line_and_settles_nothing():
    options = Options(budget=1.0, absolute=True)
    s = solve(chain(TRAFFIC, "b"), options, Inside())
    assert s.assignment == {"b": "bf16"} and all(m.move == "narrow" for m in s.moves)
    text = summary(s, options, "kernel", "chain", "chain.psk", "r.json", "r.moves.json")
    assert "rule 2 (first narrowing saves < θ·B = 24 bytes)" in text
    # b's term in bf16, and a's, rounded again where b's kernel reads it
    assert text.splitlines()[4] == "estimate (sum): 2e-06 against a target of 1"
