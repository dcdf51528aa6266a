"""Emitting PSK-Core's structural ops through the MLIR bindings.

An `OpBuilder` emits ops at an insertion point, each compute op given the next site of
its function (`"<prefix>/%<n>"`) when asked, structural ops (fields, tuples, records,
calls) given none. It knows no primitive: presk/core/build.py adds those, typed by their
rules; the kernel layer rewrites host programs with this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.ir.types import REAL_SCALAR, PskType, RecordType, TupleType


@dataclass
class V:
    """A value of the function being built, with its PSK type."""

    value: ir.Value
    type: PskType


class OpBuilder:
    """Ops emitted at `ip` (the end of a block, or just before an op)."""

    def __init__(
        self,
        ctx: ir.Context,
        ip: ir.InsertionPoint,
        site_prefix: str,
        loc: ir.Location | None = None,
    ):
        self.ctx = ctx
        self.ip = ip
        self.prefix = site_prefix
        self.count = 0
        self.loc = loc or ir.Location.unknown(ctx)

    def mlir_type(self, t: PskType) -> ir.Type:
        return ir.Type.parse(t.mlir(), self.ctx)

    def next_site(self) -> str:
        site = f"{self.prefix}/%{self.count}"
        self.count += 1
        return site

    # ---- ops ----
    def op(
        self,
        name: str,
        operands: list[V],
        result: PskType,
        attrs: dict[str, ir.Attribute] | None = None,
        site: str | bool = False,
        loc: ir.Location | None = None,
    ) -> V:
        """One op; `site=True` gives it the next site, a string gives it that site."""
        attributes = dict(attrs or {})
        if site:
            attributes["psk.site"] = ir.StringAttr.get(
                self.next_site() if site is True else site, self.ctx
            )
        with self.ip:
            new = ir.Operation.create(
                name,
                results=[self.mlir_type(result)],
                operands=[o.value for o in operands],
                attributes=attributes,
                loc=loc or self.loc,
            )
        return V(new.result, result)

    def const(self, text: str, loc: ir.Location | None = None) -> V:
        with self.ctx:
            return self.op(
                "psk.const", [], REAL_SCALAR, {"value": ir.StringAttr.get(text)}, True, loc
            )

    def field(self, v: V, name: str, loc: ir.Location | None = None) -> V:
        assert isinstance(v.type, RecordType), v.type
        with self.ctx:
            return self.op(
                "psk.field", [v], v.type.field(name), {"name": ir.StringAttr.get(name)}, loc=loc
            )

    def get(self, v: V, index: int, loc: ir.Location | None = None) -> V:
        assert isinstance(v.type, TupleType), v.type
        with self.ctx:
            attrs = {"index": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), index)}
            return self.op("psk.get", [v], v.type.items[index], attrs, loc=loc)

    def tuple(self, vals: list[V], loc: ir.Location | None = None) -> V:
        t = self.op("psk.tuple_empty", [], TupleType(()), loc=loc)
        for v in vals:
            t = self.op("psk.tuple_append", [t, v], TupleType((*t.type.items, v.type)), loc=loc)
        return t

    def record(self, names: list[str], vals: list[V], loc: ir.Location | None = None) -> V:
        r = self.op("psk.record_empty", [], RecordType(()), loc=loc)
        for n, v in zip(names, vals, strict=True):
            with self.ctx:
                r = self.op(
                    "psk.set_field",
                    [r, v],
                    RecordType((*r.type.fields, (n, v.type))),
                    {"name": ir.StringAttr.get(n)},
                    loc=loc,
                )
        return r

    def call(
        self,
        symbol: str,
        operands: list[V],
        result: PskType,
        callsite: str,
        op: str = "func.call",
        loc: ir.Location | None = None,
    ) -> V:
        """A call (or a fold, with `op`), keyed for its callee's draws by `callsite`."""
        with self.ctx:
            attrs = {
                "callee": ir.FlatSymbolRefAttr.get(symbol),
                "psk.callsite": ir.StringAttr.get(callsite),
            }
        return self.op(op, operands, result, attrs, loc=loc)
