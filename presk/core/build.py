"""Building PSK-Core through the MLIR bindings, primitives included.

A `Builder` is an `OpBuilder` (presk/ir/build.py: sites, structural ops, calls) that also
emits primitives, typed by their rules. A `FuncBuilder` is a Builder of a new
`func.func`. The elaborator, the `psk-vjp` pass, the kernel lowering and the trainer build
with them.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from presk.ir.build import OpBuilder, V
from presk.ir.types import PskType
from presk.prims import by_name, mlir_attrs
from presk.prims.base import Attrs

__all__ = ["Builder", "FuncBuilder", "V"]


class Builder(OpBuilder):
    """Ops emitted at `ip`, primitives among them."""

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
