"""The primitives of PSK-Core, one family a module, each with its typing rule.

`by_name(name)` finds a primitive by its language name, `by_op(op_name)` by its
PSK-Core op. `typing_rule(op_name)` gives what `psk-verify` checks an op against.
Later issues add each primitive's reference semantics, adjoint and kernel lowering
beside its typing rule, in the same family module.
"""

from __future__ import annotations

from functools import cache

from mlir import ir

from presk.errors import VerifierError
from presk.ir.ops import psk_type
from presk.ir.types import TensorType
from presk.prims import axes, contraction, elementwise, reduction, rows, values
from presk.prims.base import Attrs, Prim, TypingError

FAMILIES = (values, elementwise, contraction, reduction, rows, axes)


@cache
def _tables() -> tuple[dict[str, Prim], dict[str, Prim]]:
    names, ops = {}, {}
    for family in FAMILIES:
        for p in family.PRIMS:
            assert p.name not in names and p.op not in ops, p
            names[p.name] = p
            ops[p.op] = p
    return names, ops


def by_name(name: str) -> Prim | None:
    return _tables()[0].get(name)


def by_op(op_name: str) -> Prim | None:
    return _tables()[1].get(op_name)


def all_prims() -> list[Prim]:
    return list(_tables()[0].values())


def read_attrs(prim: Prim, op: ir.Operation) -> Attrs:
    """The op's attributes as the typing rule reads them."""
    out: Attrs = {}
    for name, kind in prim.attr_kinds.items():
        if name not in op.attributes:
            raise TypingError(f"missing attribute {name}")
        a = op.attributes[name]
        if kind == "i64":
            out[name] = ir.IntegerAttr(a).value
        elif kind == "i64s":
            out[name] = list(ir.DenseI64ArrayAttr(a))
        elif kind == "str":
            out[name] = ir.StringAttr(a).value
        elif kind == "strs":
            out[name] = [ir.StringAttr(x).value for x in ir.ArrayAttr(a)]
    return out


def mlir_attrs(prim: Prim, attrs: Attrs) -> dict[str, ir.Attribute]:
    """The op's attributes as MLIR attributes (in the current context)."""
    out = {}
    for name, kind in prim.attr_kinds.items():
        v = attrs[name]
        if kind == "i64":
            out[name] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
        elif kind == "i64s":
            out[name] = ir.DenseI64ArrayAttr.get(list(v))
        elif kind == "str":
            out[name] = ir.StringAttr.get(v)
        elif kind == "strs":
            out[name] = ir.ArrayAttr.get([ir.StringAttr.get(x) for x in v])
    return out


class _Rule:
    def __init__(self, prim: Prim):
        self.prim = prim

    def verify(self, op: ir.Operation) -> None:
        try:
            types = [psk_type(v) for v in op.operands]
            if not all(isinstance(t, TensorType) for t in types):
                raise TypingError("operands must be tensors")
            self.prim.check_operands(types)
            want = self.prim.infer(types, read_attrs(self.prim, op))
        except TypingError as e:
            raise VerifierError(str(e), op=op) from None
        got = psk_type(op.results[0])
        if got != want:
            raise VerifierError(f"result should be {want.text()}, not {got.text()}", op=op)


def typing_rule(op_name: str) -> _Rule | None:
    prim = by_op(op_name)
    return _Rule(prim) if prim is not None else None
