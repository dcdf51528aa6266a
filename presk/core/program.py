"""A PSK-Core module read once into plain Python, for the executors.

Walking MLIR through the bindings costs microseconds an access; an executor runs a
function many times, so it reads each `func.func` once into a list of `Op`s over
numbered slots. The MLIR module stays the program of record: this is a read-only view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from presk.errors import Span
from presk.ir.ops import psk_type, python_value, site_of, string_attr
from presk.ir.types import PskType
from presk.prims import by_op, read_attrs
from presk.prims.base import Attrs, Prim


@dataclass(frozen=True)
class Op:
    name: str  # the MLIR op name, e.g. "psk.add", "func.call"
    ins: tuple[int, ...]  # operand slots
    out: int  # result slot
    type: PskType
    attrs: Attrs
    prim: Prim | None = None
    site: str | None = None
    callee: str | None = None
    callsite: str | None = None  # a call's or fold's key in its function (draws inside it)
    key: str | None = None  # the site whose draws a derivative's dropout repeats
    let: str | None = None  # the `let` name the op was bound to, if any
    loc: Span | None = None  # the source expression's position


@dataclass(frozen=True)
class Function:
    name: str
    site_prefix: str  # "Linear.apply": what sites in this function start with
    arg_names: tuple[str, ...]
    arg_types: tuple[PskType, ...]
    result_type: PskType
    ops: tuple[Op, ...]
    result: int  # slot of the returned value
    slots: int  # number of slots (arguments first)


@dataclass
class HostProgram:
    functions: dict[str, Function]  # the host functions (kernels are read by their backend)
    entry: str
    attrs: dict = field(default_factory=dict)  # psk.program, psk.dims, psk.params, psk.bounds

    @property
    def entry_function(self) -> Function:
        return self.functions[self.entry]

    @property
    def param_specs(self) -> list[dict]:
        return self.attrs.get("psk.params", [])


def _location(loc: ir.Location) -> Span | None:
    """A file location's position, read from the location (None for any other kind)."""
    try:
        if loc.is_a_file():
            return Span(loc.filename, loc.start_line, loc.start_col)
    except Exception:  # noqa: BLE001 - a location kind the bindings cannot describe
        pass
    return None


def _read_function(f) -> Function:
    block = f.regions[0].blocks[0]
    slots: dict = {}
    for arg in block.arguments:
        slots[arg] = len(slots)
    names = []
    if "arg_attrs" in f.attributes:
        for d in ir.ArrayAttr(f.attributes["arg_attrs"]):
            names.append(ir.StringAttr(ir.DictAttr(d)["psk.name"]).value)
    else:
        names = [f"arg{i}" for i in range(len(slots))]
    ops, result = [], None
    for op in block.operations:
        op = op.operation
        ins = tuple(slots[v] for v in op.operands)
        if op.name == "func.return":
            result = ins[0]
            continue
        out = len(slots)
        slots[op.results[0]] = out
        prim = by_op(op.name)
        attrs = read_attrs(prim, op) if prim is not None else {}
        callee = None
        if "callee" in op.attributes:
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        if op.name == "psk_kernel.launch":
            attrs = {
                "kernel": ir.FlatSymbolRefAttr(op.attributes["kernel"]).value,
                "draw": string_attr(op, "psk_kernel.draw"),
                "rate": string_attr(op, "rate"),
            }
        elif op.name in ("psk.field", "psk.set_field"):
            attrs = {"name": string_attr(op, "name")}
        elif op.name == "psk.get":
            attrs = {"index": ir.IntegerAttr(op.attributes["index"]).value}
        ops.append(
            Op(
                name=op.name,
                ins=ins,
                out=out,
                type=psk_type(op.results[0]),
                attrs=attrs,
                prim=prim,
                site=site_of(op),
                callee=callee,
                callsite=string_attr(op, "psk.callsite"),
                key=string_attr(op, "psk.key"),
                let=string_attr(op, "psk.name"),
                loc=_location(op.location),
            )
        )
    ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    prefix = string_attr(f, "psk.function") or ir.StringAttr(f.attributes["sym_name"]).value
    return Function(
        name=ir.StringAttr(f.attributes["sym_name"]).value,
        site_prefix=prefix,
        arg_names=tuple(names),
        arg_types=tuple(psk_type(t) for t in ftype.inputs),
        result_type=psk_type(ftype.results[0]),
        ops=tuple(ops),
        result=result,
        slots=len(slots),
    )


def read_host_program(module) -> HostProgram:
    """Every function of a PSK-Core module (an `ir.Module` or its `builtin.module` op),
    and its entry and module attributes."""
    module_op = module.operation
    functions = {}
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and "psk_kernel.kernel" not in op.attributes:
            fn = _read_function(op)
            functions[fn.name] = fn
    attrs = {}
    mod_attrs = module_op.attributes
    for i in range(len(mod_attrs)):
        named = mod_attrs[i]
        if named.name.startswith("psk."):
            attrs[named.name] = python_value(named.attr)
    entry = attrs.get("psk.entry") or next(iter(functions))
    return HostProgram(functions, entry, attrs)
