"""psk-verify: check what IRDL cannot state about PSK-Core.

IRDL checks arity and operand kinds. This pass checks that every `psk` type is
well formed (one name per axis, no name twice, sizes positive), that every compute op
carries a `psk.site` unique in its function, and each op's typing rule from
`presk.prims`: the result type the rule gives for the operands must be the one written.
It changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.errors import VerifierError
from presk.ir.ops import STRUCTURAL_OPS, module_functions, psk_type, site_of, walk_ops
from presk.ir.types import RecordType, TensorType, TupleType
from presk.passes import Pass
from presk.prims import typing_rule


def check_type(t) -> str | None:
    """Why a PSK type is malformed, or None."""
    if isinstance(t, TensorType):
        names = [a.name for a in t.axes if a.name]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            return f"axis name '{sorted(dup)[0]}' appears twice in {t.text()}"
        if any(a.size <= 0 for a in t.axes):
            return f"an axis of {t.text()} has no elements"
        return None
    if isinstance(t, RecordType):
        names = t.names
        if len(set(names)) != len(names):
            return f"a field name appears twice in {t.text()}"
        return next((w for w in (check_type(f) for _, f in t.fields) if w), None)
    if isinstance(t, TupleType):
        return next((w for w in (check_type(f) for f in t.items) if w), None)
    return None


@dataclass(frozen=True)
class PskVerify(Pass):
    name = "psk-verify"
    description = "check PSK-Core's named axes, sites and typing rules (changes nothing)"

    def run(self, module) -> None:
        # why each type is malformed, by the id of its PskType: `psk_type` makes one object
        # per MLIR type, and a training step's residual tuples are read thousands of times
        known: dict[int, tuple[object, str | None]] = {}
        for func in module_functions(module):
            self.verify_function(func, typing_rule, known)

    def verify_function(self, func, typing_rule, known) -> None:
        sites: dict[str, object] = {}
        for op in walk_ops(func, "psk."):
            types = []
            for v in list(op.operands) + list(op.results):
                try:
                    t = psk_type(v)
                except ValueError:
                    if str(v.type).startswith("!psk."):
                        raise VerifierError(f"malformed type {v.type}", op=op) from None
                    continue
                if id(t) not in known:
                    known[id(t)] = (t, check_type(t))  # t held: its id stays its own
                why = known[id(t)][1]
                if why:
                    raise VerifierError(why, op=op)
                types.append(t)
            if op.name in STRUCTURAL_OPS:
                continue
            site = site_of(op)
            if site is None:
                raise VerifierError(f"'{op.name}' has no psk.site", op=op)
            if site in sites:
                raise VerifierError(f"site {site} is used twice", op=op)
            sites[site] = op
            rule = typing_rule(op.name)
            if rule is not None:
                rule.verify(op)


PASS = PskVerify
