"""Every primitive is complete: an IRDL op, a conformance case, a ball rule (the certified
reference's semantics), and where its record says they apply, a precision rule (a result that can be real) and an entry in
tests/data/prims.psk (a program can hold it); and its record agrees with its signature
(presk/language.py), which the program check reads, and with the ops it elaborates to.

A primitive added without one of these fails here, named with what it lacks, rather than
as a KeyError in the first precision bound that meets it."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import cache

from programs import REPO

from presk.ir.ops import psk_type, walk_ops
from presk.language import REACHED, SIGNATURES, STATICS, Signature
from presk.precision.calibrate import WORK
from presk.precision.rules import RULES
from presk.prims import all_prims, by_op
from presk.prims.base import Prim
from tests.conformance.suite import ADJOINTS, PRIMS, SAMPLE, core_of, prim_cases

IRDL = REPO / "presk" / "dialects" / "psk.irdl.mlir"


@dataclass(frozen=True)
class Facts:
    """What the repository holds for primitives, by PSK-Core op (rules by name)."""

    irdl_ops: Collection[str]  # the ops the psk dialect defines
    rules: Collection[str]  # the primitives with a precision rule
    conformed: Collection[str]  # the ops a conformance case of the primitives runs
    listed: Collection[str]  # the ops an entry of tests/data/prims.psk elaborates to


def bounded(prim: Prim) -> bool:
    """Whether `prim` has an error to bound, as its record says: a result that can be
    real (presk/precision/bound.py bounds no index and no mask)."""
    return prim.result not in ("index", "bool")


def program_holds(prim: Prim) -> bool:
    """Whether an entry of prims.psk can hold `prim`, as its record says: not when only a
    derivative emits it, nor when its result is a draw (the entries are differentiated
    and compared with mpmath; tests/conformance/more_prims.psk holds those)."""
    return prim.signature.reached != "adjoint" and prim.draws != "always"


def lacks(prims: Iterable[Prim], facts: Facts) -> list[str]:
    """One line for each primitive that lacks something, naming what it lacks."""
    out = []
    for p in prims:
        missing = []
        if p.op not in facts.irdl_ops:
            missing.append(f"IRDL op (irdl.operation @{p.op[4:]} in {IRDL.relative_to(REPO)})")
        if bounded(p) and p.name not in facts.rules:
            missing.append("precision rule (presk/precision/rules.py, RULES)")
        if p.ball is None:
            missing.append("ball rule (its record's `ball`: presk/prims/balls.py's arithmetic)")
        if p.op not in facts.conformed:
            missing.append("conformance case (tests/conformance/suite.py)")
        if program_holds(p) and p.op not in facts.listed:
            missing.append(f"entry in {PRIMS}")
        if missing:
            out.append(f"primitive {p.name} has no " + ", no ".join(missing))
    return out


def irdl_ops() -> set[str]:
    return {f"psk.{n}" for n in re.findall(r"irdl\.operation @(\w+)", IRDL.read_text())}


@cache
def elaborated(cases: tuple) -> list:
    """The ops of the cases' PSK-Core modules, derivatives expanded."""
    return [op for c in cases for op in walk_ops(core_of(c).module.operation)]


PRIM_CASES = tuple(prim_cases())
MORE_CASES = (SAMPLE, *ADJOINTS)


@cache
def facts() -> Facts:
    listed = {op.name for op in elaborated(PRIM_CASES)}
    more = {op.name for op in elaborated(MORE_CASES)}
    return Facts(irdl_ops(), set(RULES), listed | more, listed)


def test_every_primitive_is_complete():
    missing = lacks(all_prims(), facts())
    assert not missing, "\n".join(missing)


def test_a_primitive_without_a_precision_rule_is_named():
    twice = Prim(Signature("twice", "psk.twice", (1, 1)), lambda types, attrs: types[0], ball=_ball)
    f = facts()
    given = Facts({*f.irdl_ops, twice.op}, f.rules, {*f.conformed, twice.op}, {*f.listed, twice.op})
    assert lacks([*all_prims(), twice], given) == [
        "primitive twice has no precision rule (presk/precision/rules.py, RULES)"
    ]


def _ball(ap, xs):
    return xs[0] * 2


def test_a_primitive_without_a_ball_rule_is_named():
    twice = Prim(Signature("twice", "psk.twice", (1, 1)), lambda types, attrs: types[0])
    f = facts()
    given = Facts(
        {*f.irdl_ops, twice.op},
        {*f.rules, "twice"},
        {*f.conformed, twice.op},
        {*f.listed, twice.op},
    )
    assert lacks([*all_prims(), twice], given) == [
        "primitive twice has no ball rule (its record's `ball`: presk/prims/balls.py's arithmetic)"
    ]


def test_every_precision_rule_names_a_primitive():
    assert set(RULES) <= {p.name for p in all_prims()}


def test_each_signature_has_one_record_built_on_it():
    built = [p.signature for p in all_prims()]
    assert sorted(s.name for s in built) == sorted(SIGNATURES)
    assert all(SIGNATURES[s.name] is s for s in built)


def test_a_record_takes_brackets_as_its_signature_says():
    """A primitive whose signature takes no brackets keeps Prim's default `bind`, which
    refuses them; every other binds its own."""
    for p in all_prims():
        assert (p.bind is Prim.bind) == (p.signature.statics is None), p.name
        assert p.signature.statics in (None, *STATICS), p.name
        assert p.signature.reached in REACHED, p.name


def test_a_records_result_is_the_kind_its_ops_have():
    for op in elaborated(PRIM_CASES) + elaborated(MORE_CASES):
        prim = by_op(op.name)
        if prim is not None and prim.result != "any":
            assert psk_type(op.results[0]).kind == prim.result, op.name


def test_a_record_names_facts_the_rest_of_presk_knows():
    for p in all_prims():
        assert p.work in WORK, p.name
        assert p.draws in (None, "training", "always"), p.name
        assert p.result in ("real", "index", "bool", "any"), p.name
        assert 0 <= p.sums <= p.arity[1], p.name
