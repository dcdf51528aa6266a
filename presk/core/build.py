"""Building PSK-Core through the MLIR bindings.

A `Builder` emits ops at an insertion point: typed by the primitives' rules, each compute
op given the next site of its function (`"<prefix>/%<n>"`), structural ops (fields,
tuples, records, calls) given none. A `FuncBuilder` is a Builder of a new `func.func`.
The elaborator, the `psk-vjp` pass, the kernel lowering and the trainer build with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import func

from presk.ir.types import REAL_SCALAR, PskType, RecordType, TupleType
from presk.prims import by_name, mlir_attrs
from presk.prims.base import Attrs


@dataclass
class V:
    """A value of the function being built, with its PSK type."""

    value: ir.Value
    type: PskType


class Builder:
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

    def prim(
        self,
        name: str,
        operands: list[V],
        attrs: Attrs | None = None,
        site: str | bool = True,
        extra: dict[str, ir.Attribute] | None = None,
        loc: ir.Location | None = None,
    ) -> V:
        """A primitive with its attributes already bound, typed by its rule."""
        p = by_name(name)
        attrs = attrs or {}
        result = p.infer([o.type for o in operands], attrs)
        with self.ctx:
            mattrs = mlir_attrs(p, attrs)
        return self.op(p.op, operands, result, {**mattrs, **(extra or {})}, site, loc)

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


class FuncBuilder(Builder):
    """A Builder of a new `func.func` at the end of `module` (an ir.Module, or the
    builtin.module op a pass is given), with its arguments `inputs`."""

    def __init__(
        self,
        module,
        symbol: str,
        inputs: list[tuple[str, PskType]],
        site_prefix: str,
        loc: ir.Location | None = None,
    ):
        self.module = module
        self.symbol = symbol
        self.inputs = [t for _, t in inputs]
        ctx = module.context
        loc = loc or ir.Location.unknown(ctx)
        body = module.operation.regions[0].blocks[0]
        with ctx, loc, ir.InsertionPoint(body):
            ftype = ir.FunctionType.get([ir.Type.parse(t.mlir()) for t in self.inputs], [])
            self.func = func.FuncOp(symbol, ftype)
            self.block = self.func.add_entry_block()
        super().__init__(ctx, ir.InsertionPoint(self.block), site_prefix, loc)
        self.func.attributes["psk.function"] = ir.StringAttr.get(site_prefix, self.ctx)
        self.func.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [
                ir.DictAttr.get({"psk.name": ir.StringAttr.get(n, self.ctx)}, self.ctx)
                for n, _ in inputs
            ],
            self.ctx,
        )
        self.args = [V(a, t) for a, t in zip(self.block.arguments, self.inputs, strict=True)]

    def ret(self, v: V, loc: ir.Location | None = None) -> None:
        with ir.InsertionPoint(self.block):
            func.ReturnOp([v.value], loc=loc or self.loc)
        with self.ctx:
            self.func.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(
                    [self.mlir_type(t) for t in self.inputs], [self.mlir_type(v.type)]
                )
            )
        self.result = v.type
