"""The readable text of a PSK-Core module (`presk dump --stage core`).

Each function prints as a `let` chain: every op with a site is a numbered line
`%n = prim operands : type` (n is its site number), with the `let` name it was bound to
as a comment. Field reads, tuple items, records and tuples print inline where used (a
read from a record or tuple built in place as the value put there: `%0`, not
`{w = %0, b = %1}.w`); calls and folds get lines of their own, named `%c0, %c1, …`.
"""

from __future__ import annotations

from mlir import ir

from presk.ir.ops import psk_type, site_of, string_attr

_INLINE = {
    "psk.field",
    "psk.get",
    "psk.tuple_empty",
    "psk.tuple_append",
    "psk.record_empty",
    "psk.set_field",
}


def _statics(op: ir.Operation) -> str:
    """A primitive's attributes in the bracket form the language writes them in."""
    a = op.attributes
    name = op.name
    if name == "psk.ein":
        return "[" + ", ".join(ir.StringAttr(x).value for x in ir.ArrayAttr(a["axes"])) + "]"
    if name == "psk.causal_mask":
        names = [ir.StringAttr(x).value for x in ir.ArrayAttr(a["names"])]
        sizes = list(ir.DenseI64ArrayAttr(a["sizes"]))
        return "[" + ", ".join(f"{n}: {s}" for n, s in zip(names, sizes, strict=True)) + "]"
    if name == "psk.rename":
        return (
            "[" + ", ".join(ir.StringAttr(x).value or "_" for x in ir.ArrayAttr(a["names"])) + "]"
        )
    parts = []
    for key in ("axes", "axis", "heads", "rate"):
        if key in a:
            attr = a[key]
            if key == "axes":
                parts.append(", ".join(str(x) for x in ir.DenseI64ArrayAttr(attr)))
            elif key == "rate":
                parts.append(ir.StringAttr(attr).value)
            else:
                parts.append(str(ir.IntegerAttr(attr).value))
    return "[" + ", ".join(parts) + "]" if parts else ""


class _Printer:
    def __init__(self, func_op):
        self.func = func_op
        self.names: dict = {}
        self.lines: list[str] = []

    def ref(self, value: ir.Value) -> str:
        if value in self.names:
            return self.names[value]
        owner = value.owner
        op = owner.operation
        if op.name in ("psk.field", "psk.get"):
            put = self._put(op)
            if put is not None:  # a part of a record or tuple built in place: what was put
                return self.ref(put)
        if op.name == "psk.field":
            return f"{self.ref(op.operands[0])}.{string_attr(op, 'name')}"
        if op.name == "psk.get":
            return f"{self.ref(op.operands[0])}.{ir.IntegerAttr(op.attributes['index']).value}"
        if op.name in ("psk.tuple_empty", "psk.tuple_append"):
            items = self._tuple_items(op)
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if op.name in ("psk.record_empty", "psk.set_field"):
            return "{" + ", ".join(f"{n} = {v}" for n, v in self._record_fields(op)) + "}"
        raise AssertionError(f"no name for a value of {op.name}")

    def _put(self, read: ir.Operation) -> ir.Value | None:
        """The value a field read or item read finds in a record built by `psk.set_field`
        or a tuple built by `psk.tuple_append`; None when it reads any other value."""
        op = self._builder(read.operands[0])
        if read.name == "psk.field":
            name = string_attr(read, "name")
            while op is not None and op.name == "psk.set_field":  # the last set is read
                if string_attr(op, "name") == name:
                    return op.operands[1]
                op = self._builder(op.operands[0])
            return None
        parts = []
        while op is not None and op.name == "psk.tuple_append":
            parts.append(op.operands[1])
            op = self._builder(op.operands[0])
        if op is None or op.name != "psk.tuple_empty":
            return None
        index = ir.IntegerAttr(read.attributes["index"]).value
        parts.reverse()
        return parts[index] if 0 <= index < len(parts) else None

    def _builder(self, value: ir.Value) -> ir.Operation | None:
        """The op that builds `value` in place (printed inline), else None."""
        if value in self.names or isinstance(value.owner, ir.Block):
            return None
        op = value.owner.operation
        return op if op.name in _INLINE else None

    def _tuple_items(self, op) -> list[str]:
        if op.name == "psk.tuple_empty":
            return []
        return self._tuple_items(op.operands[0].owner.operation) + [self.ref(op.operands[1])]

    def _record_fields(self, op) -> list[tuple[str, str]]:
        if op.name == "psk.record_empty":
            return []
        fields = self._record_fields(op.operands[0].owner.operation)
        name = string_attr(op, "name")
        fields = [(n, v) for n, v in fields if n != name]
        return fields + [(name, self.ref(op.operands[1]))]

    def print(self) -> str:
        f = self.func
        sym = ir.StringAttr(f.attributes["sym_name"]).value
        block = f.regions[0].blocks[0]
        arg_attrs = ir.ArrayAttr(f.attributes["arg_attrs"]) if "arg_attrs" in f.attributes else None
        params = []
        for i, arg in enumerate(block.arguments):
            name = f"arg{i}"
            if arg_attrs is not None:
                name = ir.StringAttr(ir.DictAttr(arg_attrs[i])["psk.name"]).value
            self.names[arg] = name
            params.append(f"{name} : {psk_type(arg).text()}")
        results = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value).results
        head = f"fn {sym}({', '.join(params)}) -> {psk_type(results[0]).text()} {{"
        self.lines.append(head)
        for op in block.operations:
            self.op(op.operation)
        self.lines.append("}")
        return "\n".join(self.lines)

    def op(self, op: ir.Operation) -> None:
        name = op.name
        if name in _INLINE:
            return
        if name == "func.return":
            self.lines.append(f"  return {self.ref(op.operands[0])}")
            return
        callsite = string_attr(op, "psk.callsite")
        if callsite is not None:  # calls, folds and derivatives
            res = "%" + callsite.rsplit("%", 1)[1]
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            operands = list(op.operands)
            args = []
            if name in ("psk.grad", "psk.vjp"):  # their arguments come packed in a tuple
                args = self._tuple_items(operands.pop(0).owner.operation)
            args += [self.ref(v) for v in operands]
            word = {"func.call": "call"}.get(name, name.split(".", 1)[1])
            self.names[op.results[0]] = res
            result = psk_type(op.results[0]).text()
            self.lines.append(f"  {res} = {word} {callee}({', '.join(args)}) : {result}")
            return
        site = site_of(op)
        res = "%" + site.rsplit("%", 1)[1] if site else f"%v{len(self.names)}"
        self.names[op.results[0]] = res
        prim = name.split(".", 1)[1]
        if name == "psk.const":
            body = f"const {string_attr(op, 'value')}"
        else:
            body = f"{prim}{_statics(op)} " + ", ".join(self.ref(v) for v in op.operands)
        line = f"  {res} = {body.rstrip()} : {psk_type(op.results[0]).text()}"
        let = string_attr(op, "psk.name")
        if let:
            line = f"{line:<60} # {let}"
        self.lines.append(line)


def core_text(module: ir.Module) -> str:
    """Every function of a PSK-Core module as readable text, the entry first."""
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    entry = None
    if "psk.entry" in module.operation.attributes:
        entry = ir.FlatSymbolRefAttr(module.operation.attributes["psk.entry"]).value
    funcs.sort(key=lambda f: ir.StringAttr(f.attributes["sym_name"]).value != entry)
    header = []
    attrs = module.operation.attributes
    if entry:
        dims = ""
        if "psk.dims" in attrs:
            d = ir.DictAttr(attrs["psk.dims"])
            dims = " ".join(f"{d[i].name}={ir.IntegerAttr(d[i].attr).value}" for i in range(len(d)))
        header.append(f"-- entry {entry}" + (f" at {dims}" if dims else ""))
    return "\n".join(header + [_Printer(f).print() for f in funcs]) + "\n"
