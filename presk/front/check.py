"""Checks of a whole program that need no sizes: names, definitions, arities.

Run on every program after parsing, so a function the entry never reaches is still
checked: its names, the number of arguments of its calls (to primitives, to functions,
to `grad(f)` and `f.vjp`), bracket arguments given to primitives that take none, and its
aliases' form. Typing needs the consts and dims, so it happens at elaboration, on
concrete types (presk/front/elaborate.py); a module's functions are typed per instance.
It reads the language's vocabulary (presk/language.py) and loads no MLIR.
"""

from __future__ import annotations

from dataclasses import dataclass

import gmpy2

from presk.errors import SourceError, Span, source_error
from presk.front import ast
from presk.front.parser import parse
from presk.front.prelude import with_prelude
from presk.language import (
    CONSTANTS,
    INIT_KINDS,
    REDUCING,
    SIGNATURES,
    SPECIAL_FORMS,
    counted,
    named,
)

_ALIAS_FORM = "fn name = ... defines a function from grad(f) or f.vjp"
# Levels of submodules (E2019): a real model nests a few deep; each is a level of its
# parameter record, which much of presk walks recursively.
MAX_MODULE_DEPTH = 32


def _takes_statics(name: str) -> bool:
    """Whether the primitive (or `max`, then a reduction) takes arguments in [ ]."""
    if name in SPECIAL_FORMS:
        return False
    if name in REDUCING:
        return True
    return SIGNATURES[name].statics is not None


@dataclass
class _Derivative:
    """`grad(f)` or `f.vjp`, as the head of a call: what it takes follows from `f`."""

    kind: str  # "grad" | "vjp"
    of: ast.FnDef | ast.FnAlias


class _Checker:
    def __init__(self, program: ast.SourceTree):
        self.p = program
        self.dims = {n for n, _ in program.dims}
        # The module each function is defined in (None: top level), by the node's id.
        self.owner: dict[int, ast.ModuleDef | None] = {
            id(f): None for f in program.functions.values()
        }
        for m in program.modules.values():
            for mem in m.members:
                if isinstance(mem, (ast.FnDef, ast.FnAlias)):
                    self.owner[id(mem)] = m

    def err(self, code: str, message: str, span: Span) -> SourceError:
        text = self.p.source(span.file)
        return source_error(SourceError, code, message, span.file, text, span.line, span.col)

    def run(self) -> None:
        self.definitions()
        for m in self.p.modules.values():
            self.module(m)
        for f in self.p.functions.values():
            self.function(f, None)
        if self.p.precision is not None:
            self.precision(self.p.precision)
        self.module_nesting()

    def definitions(self) -> None:
        seen: dict[str, str] = {}
        for item in self.p.items:
            names = []
            if isinstance(item, ast.DimDecl):
                names = [(n, "dim", s) for n, s in zip(item.names, item.spans, strict=True)]
            elif isinstance(item, ast.ModuleDef):
                names = [(item.name, "module", item.span)]
            elif isinstance(item, (ast.FnDef, ast.FnAlias)):
                names = [(item.name, "function", item.span)]
            for n, what, span in names:
                if n in seen:
                    twice = (
                        f"{what} {n} is defined twice"
                        if seen[n] == what
                        else f"{n} is defined twice (as a {seen[n]} and as a {what})"
                    )
                    raise self.err("E2002", twice, span)
                seen[n] = what

    def module(self, m: ast.ModuleDef) -> None:
        consts = set()
        for c in m.consts:
            if c in consts:
                raise self.err("E2002", f"module {m.name} names const {c} twice", m.span)
            consts.add(c)
        members: set[str] = set()
        for mem in m.members:
            if mem.name in members or mem.name in consts:
                raise self.err("E2002", f"{mem.name} is defined twice in module {m.name}", mem.span)
            members.add(mem.name)
            if isinstance(mem, ast.SubDef):
                target = self.p.modules.get(mem.module)
                if target is None:
                    raise self.err("E2001", f"unknown module {mem.module}", mem.module_span)
                if len(mem.const_args) != len(target.consts):
                    raise self.err(
                        "E2009",
                        f"{target.name} takes {counted(len(target.consts), 'const')} "
                        f"({', '.join(target.consts) or 'none'}), not {len(mem.const_args)}",
                        mem.module_span,
                    )
                for e in mem.const_args + ([mem.stack] if mem.stack is not None else []):
                    self.size_names(e, consts)
            elif isinstance(mem, ast.ParamDef):
                if mem.init.kind not in INIT_KINDS:
                    raise self.err(
                        "E2017",
                        f"unknown initializer {mem.init.kind} (zeros, ones, normal, uniform)",
                        mem.init.span,
                    )
                self.type_names(mem.type, consts)
        for mem in m.members:
            if isinstance(mem, (ast.FnDef, ast.FnAlias)):
                self.function(mem, m)

    def size_names(self, e: ast.Expr, consts: set[str]) -> None:
        first, links = ast.chain(e)
        for part in [first, *(b.rhs for b in links)]:
            if isinstance(part, ast.Name):
                if part.id not in consts and part.id not in self.dims:
                    raise self.err(
                        "E2001", f"unknown size '{part.id}' (not a const or a dim)", part.span
                    )
            elif isinstance(part, ast.BinOp):
                self.size_names(part, consts)

    def type_names(self, t, consts: set[str]) -> None:
        if isinstance(t, ast.TensorTypeExpr):
            for a in t.axes:
                self.size_names(a.size, consts)
            if t.bound is not None:
                self.size_names(t.bound, consts)
        elif isinstance(t, ast.TupleTypeExpr):
            for i in t.items:
                self.type_names(i, consts)
        elif isinstance(t, ast.RecordTypeExpr):
            for _, f in t.fields:
                self.type_names(f, consts)

    def function(self, f, m: ast.ModuleDef | None) -> None:
        consts = set(m.consts) if m else set()
        scope: dict[str, object] = {}
        if isinstance(f, ast.FnAlias):
            self.expr(f.value, scope, m)
            if self.alias_target(f) is None:
                raise self.err("E2014", _ALIAS_FORM, f.value.span)
            return
        for p in f.params:
            if p.name in scope:
                raise self.err("E2002", f"{f.name} names its argument {p.name} twice", p.span)
            scope[p.name] = "arg"
            if p.type is not None:
                self.type_names(p.type, consts)
        if f.ret is not None:
            self.type_names(f.ret, consts)
        for let in f.lets:
            self.expr(let.value, scope, m)
            for n in let.names:
                scope[n] = "let"
        self.expr(f.result, scope, m)

    def resolve(self, ident: str, scope, m: ast.ModuleDef | None, span: Span):
        if ident in scope:
            return "value"
        if m is not None:
            member = m.member(ident)
            if member is not None:
                return member
            if ident in m.consts:
                return "value"
        if ident in self.dims:
            return "value"
        if ident in self.p.functions:
            return self.p.functions[ident]
        if ident in CONSTANTS:
            return "value"
        if ident in self.p.modules:
            return self.p.modules[ident]
        if ident in SPECIAL_FORMS or named(ident) is not None:
            return "prim"
        raise self.err("E2001", f"unknown name '{ident}'", span)

    def expr(self, e: ast.Expr, scope, m: ast.ModuleDef | None) -> object:
        """Check `e`; return what it names when that is known (a member, a module, a prim)."""
        if isinstance(e, ast.Name):
            return self.resolve(e.id, scope, m, e.span)
        if isinstance(e, ast.Field):
            obj = self.expr(e.obj, scope, m)
            if isinstance(obj, (ast.SubDef, ast.ModuleDef)):
                target = self.p.modules[obj.module] if isinstance(obj, ast.SubDef) else obj
                member = target.member(e.name)
                if member is None:
                    raise self.err("E2016", f"module {target.name} has no member {e.name}", e.span)
                return member
            if isinstance(obj, (ast.FnDef, ast.FnAlias)) and e.name == "vjp":
                return _Derivative("vjp", obj)
            return None
        if isinstance(e, ast.Static):
            head = self.expr(e.fn, scope, m)
            if head != "prim":
                raise self.err("E2010", "only a primitive takes arguments in [ ]", e.span)
            if not _takes_statics(e.fn.id):
                raise self.err("E2010", f"{e.fn.id} takes no arguments in [ ]", e.span)
            for s in e.args:
                if isinstance(s, ast.StaticAxis):
                    self.size_names(s.size, set(m.consts) if m else set())
            return ("prim", e)
        if isinstance(e, ast.Call):
            head = self.expr(e.fn, scope, m)
            for a in e.args:
                if a.name is not None:
                    raise self.err(
                        "E2003",
                        f"keyword arguments are for initializers, not calls ({a.name}=)",
                        a.span,
                    )
                if (
                    isinstance(head, str)
                    and head == "prim"
                    and isinstance(e.fn, ast.Name)
                    and e.fn.id in SPECIAL_FORMS
                ):
                    continue
                self.expr(a.value, scope, m)
            self.arity(e, head)
            if isinstance(e.fn, ast.Name) and e.fn.id in SPECIAL_FORMS:
                return self.special(e, scope, m)
            return None
        if isinstance(e, ast.BinOp):
            first, links = ast.chain(e)
            for operand in [first, *(b.rhs for b in links)]:
                self.expr(operand, scope, m)
        elif isinstance(e, ast.Neg):
            self.expr(e.x, scope, m)
        elif isinstance(e, ast.Item):
            self.expr(e.obj, scope, m)
        elif isinstance(e, ast.TupleLit):
            for i in e.items:
                self.expr(i, scope, m)
        elif isinstance(e, ast.RecordLit):
            for _, v in e.fields:
                self.expr(v, scope, m)
        return None

    def arity(self, call: ast.Call, head) -> None:
        n = len(call.args)
        if isinstance(head, (ast.FnDef, ast.FnAlias, _Derivative)):
            self.call_arity(call, head)
            return
        if head == "prim" and isinstance(call.fn, ast.Name):
            name, has_statics = call.fn.id, False
        elif (
            isinstance(head, tuple)
            and isinstance(call.fn, ast.Static)
            and isinstance(call.fn.fn, ast.Name)
        ):
            name, has_statics = call.fn.fn.id, True
        else:
            return
        if name in SPECIAL_FORMS:
            want = {"fold": (2, 2), "grad": (1, 1)}[name]
        elif name == "max":
            want = (1, 1) if has_statics else (2, 2)
        else:
            want = SIGNATURES[name].arity
        if not want[0] <= n <= want[1]:
            count = counted(want[0], "operand", want[1])
            raise self.err("E2003", f"{name} takes {count}, not {n}", call.span)

    def call_arity(self, call: ast.Call, head) -> None:
        """A call of a function, `grad(f)` or `f.vjp` with its number of arguments."""
        n = len(call.args)
        if isinstance(head, _Derivative):
            want = self.fn_arity(head.of)
            if want is None:
                return
            if head.kind == "vjp":
                name = f"{self.fn_name(head.of)}.vjp"
                if n != want + 1:
                    count = counted(want + 1, "argument")
                    raise self.err(
                        "E2003",
                        f"{name} takes {count} (its arguments, then a cotangent), not {n}",
                        call.span,
                    )
                return
            name = f"grad({self.fn_name(head.of)})"
        else:
            want = self.fn_arity(head)
            name = self.fn_name(head)
        if want is not None and n != want:
            raise self.err("E2003", f"{name} takes {counted(want, 'argument')}, not {n}", call.span)

    def fn_name(self, f: ast.FnDef | ast.FnAlias) -> str:
        """`f`, or `Module.f` for a module's function (as sites name it)."""
        m = self.owner.get(id(f))
        return f"{m.name}.{f.name}" if m is not None else f.name

    def fn_arity(self, f: ast.FnDef | ast.FnAlias) -> int | None:
        """The number of arguments `f` takes; None for an alias that does not resolve.
        An alias chain (`fn h = g.vjp`, `fn g = grad(f)`, …) is followed in a loop."""
        cotangents, seen = 0, set()
        while isinstance(f, ast.FnAlias):
            if id(f) in seen:
                return None
            seen.add(id(f))
            target = self.alias_target(f)
            if target is None:
                return None
            cotangents += target.kind == "vjp"  # f.vjp takes f's arguments and a cotangent
            f = target.of
        return len(f.params) + cotangents

    def alias_target(self, f: ast.FnAlias) -> _Derivative | None:
        """What `fn h = grad(g)` or `fn h = g.vjp` is made from; None for any other form."""
        m, v = self.owner.get(id(f)), f.value
        if (
            isinstance(v, ast.Call)
            and isinstance(v.fn, ast.Name)
            and v.fn.id == "grad"
            and len(v.args) == 1
            and v.args[0].name is None
        ):
            kind, name = "grad", v.args[0].value
        elif isinstance(v, ast.Field) and v.name == "vjp":
            kind, name = "vjp", v.obj
        else:
            return None
        if not isinstance(name, ast.Name):
            return None
        target = self.resolve(name.id, {}, m, name.span)
        return _Derivative(kind, target) if isinstance(target, (ast.FnDef, ast.FnAlias)) else None

    def special(self, call: ast.Call, scope, m) -> _Derivative | None:
        if call.fn.id == "grad":
            target = call.args[0].value
            named = self.expr(target, scope, m)
            if not isinstance(named, (ast.FnDef, ast.FnAlias)):
                raise self.err("E2014", "grad takes a function by name", target.span)
            return _Derivative("grad", named)
        f, carry = call.args[0].value, call.args[1].value
        self.expr(carry, scope, m)
        ok = False
        if isinstance(f, ast.Field) and isinstance(f.obj, ast.Name) and m is not None:
            sub = m.member(f.obj.id)
            ok = isinstance(sub, ast.SubDef) and sub.stack is not None
            if ok:
                layer = self.p.modules[sub.module].member(f.name)
                if not isinstance(layer, (ast.FnDef, ast.FnAlias)):
                    raise self.err("E2016", f"module {sub.module} has no function {f.name}", f.span)
                want = self.fn_arity(layer)
                if want is not None and want != 1:
                    raise self.err(
                        "E2003",
                        f"fold calls {sub.module}.{f.name} with one argument, the carried "
                        f"value, but it takes {want}",
                        call.span,
                    )
        if not ok:
            raise self.err(
                "E2012",
                "fold's first argument is a function of a stacked submodule (blocks.apply)",
                f.span,
            )
        return None

    def precision(self, d: ast.PrecisionDecl) -> None:
        if (
            d.kind != "budget"
            or len(d.args) != 1
            or d.args[0].name not in ("rel_error", "abs_error")
        ):
            raise self.err(
                "E2018",
                "precision is written budget(rel_error = ε) or budget(abs_error = ε)",
                d.span,
            )
        v = d.args[0].value
        if (
            not isinstance(v, (ast.FloatLit, ast.IntLit))
            or gmpy2.mpfr(getattr(v, "text", getattr(v, "value", 0))) <= 0  # 1e-400 is not 0
        ):
            raise self.err("E2018", "a precision budget is a positive number", v.span)

    def module_nesting(self) -> None:
        """No module contains itself (E2013), nor nests more than MAX_MODULE_DEPTH deep
        (E2019, at the sub one level too deep)."""
        deepest: dict[str, int] = {}  # the deepest level each module was seen at
        inside: set[str] = set()  # the modules of the path being walked

        def visit(name: str, span: Span, level: int) -> None:
            if name in inside:
                raise self.err("E2013", f"module {name} contains itself", span)
            if level > MAX_MODULE_DEPTH:
                raise self.err(
                    "E2019", f"modules nested deeper than {MAX_MODULE_DEPTH} levels", span
                )
            if deepest.get(name, 0) >= level:
                return  # what it contains was walked from a level at least as deep
            deepest[name] = level
            inside.add(name)
            for mem in self.p.modules[name].members:
                if isinstance(mem, ast.SubDef):
                    visit(mem.module, mem.module_span, level + 1)
            inside.discard(name)

        for name, m in self.p.modules.items():
            visit(name, m.span, 1)


def check_program(program: ast.SourceTree) -> None:
    """Raise the first SourceError (E2xxx) a program has without its sizes."""
    _Checker(program).run()


def checked_source(text: str, name: str) -> ast.SourceTree:
    """The program `text` (its errors located in `name`) parsed, the prelude joined, and
    checked: all that needs no sizes, and no MLIR."""
    tree = with_prelude(parse(text, name))
    check_program(tree)
    return tree
