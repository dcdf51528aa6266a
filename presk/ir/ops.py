"""Reading PSK-Core ops through the MLIR bindings, and copying a module."""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Iterator

from mlir import ir

from presk.ir.types import PskType, TupleType, parse_mlir_type


def clone_module(module: ir.Module) -> ir.Module:
    """A copy of `module`, its attributes and locations kept, for a lowering to change in
    place: its ops cloned (printing and parsing it again took 0.2 s for a training
    step)."""
    source = module.operation
    copied = ir.Module.create(source.location)
    for name in source.attributes:
        copied.operation.attributes[name] = source.attributes[name]
    with ir.InsertionPoint(copied.body):
        for op in module.body.operations:
            op.operation.clone()
    return copied


# Ops that move values around without computing: they carry no site.
STRUCTURAL_OPS = frozenset(
    {
        "psk.record_empty",
        "psk.set_field",
        "psk.field",
        "psk.tuple_empty",
        "psk.tuple_append",
        "psk.get",
        "psk.fold",
        "psk.fold_fwd",
        "psk.fold_bwd",
        "psk.grad",
        "psk.vjp",
    }
)


def walk_ops(root: ir.Operation, prefix: str = "psk.") -> Iterator[ir.Operation]:
    """Every op under `root` (in pre-order) whose name starts with `prefix`."""
    found: list[ir.Operation] = []

    def visit(op):
        if op.name.startswith(prefix):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return iter(found)


def module_functions(module) -> list[ir.Operation]:
    """The `func.func`s of a module (an `ir.Module` or its op), in order. They are its
    top-level ops: read so, not walked, since a walk visits every op of every body (a
    kernel module's loops and arithmetic), tens of thousands for a training step."""
    op = getattr(module, "operation", module)
    tops = [f.operation for f in op.regions[0].blocks[0].operations]
    return [f for f in tops if f.name == "func.func"]  # an OpView's `name` may be its symbol


def module_launches(module) -> list[ir.Operation]:
    """The `psk_kernel.launch` ops of a module, in order: walked in its host functions
    alone, since no kernel launches another."""
    return [
        launch
        for f in module_functions(module)
        if "psk_kernel.kernel" not in f.attributes
        for launch in walk_ops(f, "psk_kernel.launch")
    ]


# PskType by MLIR type for each live context: MLIR uniques a context's types, and printing
# a big one (a derivative's residual tuple) is slow. A type is keyed by the address of its
# uniqued storage, not by the ir.Type, which holds its context and so would never let the
# context, and everything it uniqued, be freed.
_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


def _type_address(t: ir.Type) -> int:
    return _capsule_pointer(t._CAPIPtr, b"mlir.ir.Type._CAPIPtr")


def psk_type(value_or_type) -> PskType:
    """The PSK type of an MLIR value or type."""
    t = value_or_type.type if hasattr(value_or_type, "type") else value_or_type
    cache = _TYPES.setdefault(t.context, {})
    key = _type_address(t)
    found = cache.get(key)
    if found is None:
        if isinstance(t, ir.TupleType):  # by its parts, never printing the whole
            found = TupleType(tuple(psk_type(t.get_type(i)) for i in range(t.num_types)))
        else:
            found = parse_mlir_type(str(t))
        cache[key] = found
    return found


def string_attr(op: ir.Operation, name: str) -> str | None:
    if name not in op.attributes:
        return None
    return ir.StringAttr(op.attributes[name]).value


def site_of(op: ir.Operation) -> str | None:
    return string_attr(op, "psk.site")


def python_value(attr: ir.Attribute):
    """A builtin attribute (the bindings give it downcast) as a plain Python value."""
    if isinstance(attr, (ir.StringAttr, ir.IntegerAttr, ir.FlatSymbolRefAttr)):
        return attr.value
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return list(attr)
    if isinstance(attr, ir.ArrayAttr):
        return [python_value(x) for x in attr]
    if isinstance(attr, ir.DictAttr):
        return {attr[i].name: python_value(attr[i].attr) for i in range(len(attr))}
    return str(attr)
