"""The AST printed back as PSK source, every operation in parentheses (`--stage ast`).

What the parser understood, in the language's own spelling: precedence is made visible,
and the output parses again to the same tree.
"""

from __future__ import annotations

from presk.front import ast

_KIND = {"real": "ℝ", "index": "nat", "bool": "bool"}


def expr(e: ast.Expr) -> str:
    if isinstance(e, ast.IntLit):
        return str(e.value)
    if isinstance(e, ast.FloatLit):
        return e.text
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.BinOp):  # a chain in a loop, each operation in its parentheses
        first, links = ast.chain(e)
        return "(" * len(links) + expr(first) + "".join(f" {b.op} {expr(b.rhs)})" for b in links)
    if isinstance(e, ast.Neg):
        return f"(-{expr(e.x)})"
    if isinstance(e, ast.Field):
        return f"{expr(e.obj)}.{e.name}"
    if isinstance(e, ast.Item):
        return f"{expr(e.obj)}.{e.index}"
    if isinstance(e, ast.Call):
        return f"{expr(e.fn)}({', '.join(_arg(a) for a in e.args)})"
    if isinstance(e, ast.Static):
        return f"{expr(e.fn)}[{', '.join(_static(s) for s in e.args)}]"
    if isinstance(e, ast.TupleLit):
        inner = ", ".join(expr(i) for i in e.items)
        return f"({inner},)" if len(e.items) == 1 else f"({inner})"
    if isinstance(e, ast.RecordLit):
        return "{" + ", ".join(f"{n} = {expr(v)}" for n, v in e.fields) + "}"
    raise AssertionError(e)


def _arg(a: ast.Arg) -> str:
    return f"{a.name} = {expr(a.value)}" if a.name else expr(a.value)


def _static(s) -> str:
    if isinstance(s, ast.StaticAxis):
        return f"{s.name}: {expr(s.size)}"
    if isinstance(s, ast.StaticRename):
        return f"{expr(s.src)} → {expr(s.dst)}"
    return expr(s)


def type_(t: ast.TypeExpr) -> str:
    if isinstance(t, ast.TensorTypeExpr):
        head = _KIND[t.kind] + (f"{{{expr(t.bound)}}}" if t.bound is not None else "")
        if not t.axes and t.kind != "bool":
            return head
        axes = ", ".join(f"{a.name}: {expr(a.size)}" if a.name else expr(a.size) for a in t.axes)
        return f"{head}[{axes}]"
    if isinstance(t, ast.TupleTypeExpr):
        inner = ", ".join(type_(i) for i in t.items)
        return f"({inner},)" if len(t.items) == 1 else f"({inner})"
    return "{" + ", ".join(f"{n}: {type_(f)}" for n, f in t.fields) + "}"


def _fn(f, indent: str) -> list[str]:
    if isinstance(f, ast.FnAlias):
        return [f"{indent}fn {f.name} = {expr(f.value)}"]
    params = ", ".join(f"{p.name} : {type_(p.type)}" if p.type else p.name for p in f.params)
    ret = f" -> {type_(f.ret)}" if f.ret else ""
    out = [f"{indent}fn {f.name}({params}){ret} {{"]
    for let in f.lets:
        target = let.names[0] if not let.is_tuple else "(" + ", ".join(let.names) + ")"
        out.append(f"{indent}  let {target} = {expr(let.value)}")
    out.append(f"{indent}  {expr(f.result)}")
    out.append(f"{indent}}}")
    return out


def program(p: ast.SourceTree) -> str:
    out: list[str] = []
    for item in p.items:
        if isinstance(item, ast.DimDecl):
            out.append(
                "dim "
                + ", ".join(
                    f"{n} = {item.defaults[n]}" if n in item.defaults else n for n in item.names
                )
            )
        elif isinstance(item, ast.PrecisionDecl):
            out.append(f"precision = {item.kind}({', '.join(_arg(a) for a in item.args)})")
        elif isinstance(item, (ast.FnDef, ast.FnAlias)):
            out += _fn(item, "")
        elif isinstance(item, ast.ModuleDef):
            consts = "{" + ", ".join(item.consts) + "}" if item.consts else ""
            out.append(f"module {item.name}{consts} {{")
            for m in item.members:
                if isinstance(m, ast.ParamDef):
                    args = ", ".join(_arg(a) for a in m.init.args)
                    init = f"{m.init.kind}({args})" if m.init.args else m.init.kind
                    out.append(f"  param {m.name} : {type_(m.type)} = {init}")
                elif isinstance(m, ast.SubDef):
                    stack = f"stack{{{expr(m.stack)}}} " if m.stack is not None else ""
                    consts = (
                        "{" + ", ".join(expr(c) for c in m.const_args) + "}" if m.const_args else ""
                    )
                    out.append(f"  sub {m.name} = {stack}{m.module}{consts}")
                else:
                    out += _fn(m, "  ")
            out.append("}")
    return "\n".join(out) + "\n"
