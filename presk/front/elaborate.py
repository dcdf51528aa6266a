"""Elaboration: a PSK entry at bound consts and dims, as a PSK-Core MLIR module.

Every PSK function the entry reaches becomes one `func.func`, specialised on its
module's consts and its argument types (`@"Linear{3, 2}.apply"`). A module function
takes its module's parameter record first. Each primitive application is one op with a
site `"<function>/%<n>"` (n counts the function's ops from 0) and the source location
of the expression; a `let` names its op with `psk.name`. Typing happens here, on the
concrete types, so every axis and shape error is located in the source (E2xxx).

Stacked submodules stay structural: a stack is the record of its layers' parameters
with a leading axis, read by `psk.fold` with the layer's function as callee.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import gmpy2
from mlir import ir

from presk.core.build import FuncBuilder, V
from presk.errors import BindingError, SourceError, Span, source_error
from presk.front import ast
from presk.front.bindings import (
    FLAGS,
    MAX_SIZE,
    Entry,
    Spelling,
    check_dims,
    entry_consts,
    resolve_entry,
)
from presk.front.parser import MAX_NESTING
from presk.ir.types import (
    REAL_SCALAR,
    Axis,
    PskType,
    RecordType,
    TensorType,
    TupleType,
    stacked,
)
from presk.language import (
    CONSTANTS,
    INIT_KINDS,
    REDUCING,
    SPECIAL_FORMS,
    counted,
    named,
)
from presk.prims import by_name, mlir_attrs
from presk.prims.base import AxisSpec, Number, Rename, TypingError

_BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
_INIT_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}  # initializer arguments' operators
_SIZE_FORM = "a size is a whole number made of consts, dims, + - * /"
_INIT_FORM = "initializer arguments are numbers, consts, + - * /, sqrt, exp, log"
MAX_INIT_OPERATIONS = 64  # an initializer's scale is a short formula, `1 / sqrt(D)`
# Calls an elaboration may nest (E2019): a real program nests a few tens deep.
MAX_CALL_DEPTH = 128
# The Python frames elaborating may stack at the limits: every call nested under an
# expression MAX_NESTING deep, a few frames a level (Python's own limit is 1000).
_FRAMES = 4 * (MAX_CALL_DEPTH + 1) * (MAX_NESTING + 1) + 1000


# ---- compile-time values ------------------------------------------------------------------


@dataclass
class Known:
    """A whole number known at elaboration: a const, a dim, an integer literal."""

    n: int


@dataclass
class ModInst:
    """A module at bound consts."""

    defn: ast.ModuleDef
    consts: dict[str, int]
    params: RecordType = None  # type: ignore[assignment]
    subs: dict[str, tuple[ModInst, int | None]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        if not self.defn.consts:
            return self.defn.name
        return self.defn.name + "{" + ", ".join(str(self.consts[c]) for c in self.defn.consts) + "}"


@dataclass
class FnRef:
    inst: ModInst | None
    fn: ast.FnDef | ast.FnAlias
    params: V | None  # the instance's parameter record (or stack of them)
    stack: int | None = None  # layers, when `params` is a stack read by fold


@dataclass
class SubRef:
    inst: ModInst
    params: V
    stack: int | None


@dataclass
class PrimRef:
    name: str
    statics: list | None
    span: Span


@dataclass
class GradRef:
    of: FnRef


@dataclass
class VjpRef:
    of: FnRef


Value = V | Known | FnRef | SubRef | PrimRef | GradRef | VjpRef


@dataclass
class Signature:
    symbol: str
    params: PskType | None
    args: list[PskType]
    result: PskType


# ---- the elaborator ----------------------------------------------------------------------


class Elaborator:
    def __init__(
        self,
        program: ast.SourceTree,
        dims: dict[str, int],
        ctx: ir.Context,
        spelling: Spelling = FLAGS,
    ):
        self.program = program
        self.dims = dims
        self.spelling = spelling  # how a message says to bind a dim
        self.declared_dims = {n for n, _ in program.dims}
        self.ctx = ctx
        self.loc = ir.Location.file(program.file, 1, 1, context=ctx)
        self.module = ir.Module.create(self.loc)
        self.instances: dict[str, ModInst] = {}
        self.signatures: dict[tuple, Signature] = {}
        self.symbols: set[str] = set()
        self.building: list[tuple] = []
        self._types: dict[str, ir.Type] = {}
        self._instantiating: list[str] = []

    # ---- errors and locations ----
    def error(self, code: str, message: str, span: Span) -> SourceError:
        text = self.program.source(span.file)
        return source_error(SourceError, code, message, span.file, text, span.line, span.col)

    def location(self, span: Span) -> ir.Location:
        return ir.Location.file(span.file, span.line, span.col, context=self.ctx)

    def mlir_type(self, t: PskType) -> ir.Type:
        text = t.mlir()
        if text not in self._types:
            self._types[text] = ir.Type.parse(text, self.ctx)
        return self._types[text]

    # ---- sizes and types ----
    def size(self, e: ast.Expr, consts: dict[str, int]) -> int:
        """A size expression: whole numbers, consts and dims with + - * /, each part a
        64-bit integer (as MLIR holds sizes)."""
        return self._bounded(self._size(e, consts), e.span)

    def _bounded(self, n: int, span: Span) -> int:
        if abs(n) > MAX_SIZE:
            raise self.error("E2010", f"the size {n} is too large (sizes are below 2^63)", span)
        return n

    def _size(self, e: ast.Expr, consts: dict[str, int]) -> int:
        if isinstance(e, ast.BinOp):
            first, links = ast.chain(e)
            outside = [b for b in links if b.op not in "+-*/"]
            if outside:  # the outermost, as a walk from the top would meet it
                raise self.error("E2010", _SIZE_FORM, outside[-1].span)
            n = self.size(first, consts)
            for b in links:
                n = self._bounded(self._size_op(b, n, self.size(b.rhs, consts)), b.span)
            return n
        if isinstance(e, ast.IntLit):
            return e.value
        if isinstance(e, ast.Name):
            if e.id in consts:
                return consts[e.id]
            if e.id in self.declared_dims:
                return self.dim(e.id, e.span)
            raise self.error("E2001", f"unknown size '{e.id}' (not a const or a dim)", e.span)
        raise self.error("E2010", _SIZE_FORM, e.span)

    def _size_op(self, e: ast.BinOp, a: int, b: int) -> int:
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if b == 0 or a % b:
            raise self.error("E2011", f"{a} / {b} is not a whole number", e.span)
        return a // b

    def dim(self, name: str, span: Span) -> int:
        if name not in self.dims:
            raise BindingError(
                f"dim {name} is not bound (give {self.spelling.wanted('dim', name)})",
                code="E3003",
                span=span,
                source_line=_line(self.program.source(span.file), span.line),
            )
        return self.dims[name]

    def type(self, t: ast.TypeExpr, consts: dict[str, int]) -> PskType:
        if isinstance(t, ast.TensorTypeExpr):
            axes = []
            for a in t.axes:
                size = self.size(a.size, consts)
                if size <= 0:
                    raise self.error("E2010", f"an axis needs a positive size, not {size}", a.span)
                name = a.name
                if name is None and isinstance(a.size, ast.Name) and a.size.id not in consts:
                    name = a.size.id  # a dim used as an axis names it
                if name is not None and any(b.name == name for b in axes):
                    raise self.error("E2004", f"axis {name} appears twice in one type", a.span)
                axes.append(Axis(name, size))
            if t.bound is not None:
                self.bound(t.bound, consts)
            return TensorType(t.kind, tuple(axes))
        if isinstance(t, ast.TupleTypeExpr):
            return TupleType(tuple(self.type(i, consts) for i in t.items))
        names = [n for n, _ in t.fields]
        if len(set(names)) != len(names):
            raise self.error("E2002", "a field appears twice in a record type", t.span)
        return RecordType(tuple((n, self.type(f, consts)) for n, f in t.fields))

    def bound(self, e: ast.Expr, consts: dict[str, int]) -> int:
        """The V of `nat{V}`: the values lie in [0, V), so V is at least 1."""
        v = self.size(e, consts)
        if v < 1:
            raise self.error("E2010", f"a nat{{V}} bound must be at least 1, not {v}", e.span)
        return v

    # ---- modules ----
    def instance(self, defn: ast.ModuleDef, consts: dict[str, int], span: Span) -> ModInst:
        inst = ModInst(defn, consts)
        if inst.key in self.instances:
            return self.instances[inst.key]
        if any(k == inst.key for k in self._instantiating):
            raise self.error("E2013", f"module {defn.name} contains itself", span)
        self._instantiating.append(inst.key)
        try:
            fields: list[tuple[str, PskType]] = []
            for m in defn.members:
                if isinstance(m, ast.ParamDef):
                    t = self.type(m.type, consts)
                    if not isinstance(t, TensorType) or t.kind != "real":
                        raise self.error(
                            "E2006", f"param {m.name} must be a real tensor", m.type.span
                        )
                    fields.append((m.name, t))
                elif isinstance(m, ast.SubDef):
                    sub = self.sub_instance(m, consts)
                    count = self.size(m.stack, consts) if m.stack is not None else None
                    if count is not None and count <= 0:
                        raise self.error(
                            "E2010", f"a stack needs at least one layer, not {count}", m.stack.span
                        )
                    inst.subs[m.name] = (sub, count)
                    # A stack's leaves get a leading axis of layers: a stack inside a
                    # stacked module so has two.
                    t = sub.params if count is None else stacked(sub.params, count)
                    fields.append((m.name, t))
            inst.params = RecordType(tuple(fields))
        finally:
            self._instantiating.pop()
        self.instances[inst.key] = inst
        return inst

    def sub_instance(self, m: ast.SubDef, consts: dict[str, int]) -> ModInst:
        defn = self.program.modules.get(m.module)
        if defn is None:
            raise self.error("E2001", f"unknown module {m.module}", m.module_span)
        if len(m.const_args) != len(defn.consts):
            raise self.error(
                "E2009",
                f"{defn.name} takes {counted(len(defn.consts), 'const')} "
                f"({', '.join(defn.consts) or 'none'}), "
                f"not {len(m.const_args)}",
                m.module_span,
            )
        values = {}
        for name, e in zip(defn.consts, m.const_args, strict=True):
            v = self.size(e, consts)
            if v <= 0:
                raise self.error(
                    "E2010", f"const {name} of {defn.name} must be positive, not {v}", e.span
                )
            values[name] = v
        return self.instance(defn, values, m.module_span)

    # ---- functions ----
    def site_prefix(self, ref: FnRef) -> str:
        return f"{ref.inst.defn.name}.{ref.fn.name}" if ref.inst else ref.fn.name

    def signature(self, ref: FnRef, arg_types: list[PskType], span: Span) -> Signature:
        """The func for `ref` at these argument types, elaborated on first use."""
        key = (ref.inst.key if ref.inst else None, ref.fn.name, tuple(arg_types))
        if key in self.signatures:
            return self.signatures[key]
        if key in self.building:
            raise self.error(
                "E2013", f"{self.site_prefix(ref)} calls itself (PSK has no recursion)", span
            )
        if len(self.building) > MAX_CALL_DEPTH:
            raise self.error("E2019", f"calls nested deeper than {MAX_CALL_DEPTH} levels", span)
        base = f"{ref.inst.key}.{ref.fn.name}" if ref.inst else ref.fn.name
        symbol, n = base, 2
        while symbol in self.symbols:
            symbol, n = f"{base}#{n}", n + 1
        self.symbols.add(symbol)
        self.building.append(key)
        try:
            sig = FunctionBuilder(self, ref, symbol, arg_types, span).build()
        finally:
            self.building.pop()
        self.signatures[key] = sig
        return sig

    def declared_arg_types(self, ref: FnRef, span: Span, what: str) -> list[PskType]:
        fn = ref.fn
        if isinstance(fn, ast.FnAlias):
            target = self.alias_target(ref)
            types = self.declared_arg_types(target.of, span, what)
            if isinstance(target, VjpRef):  # f.vjp takes f's arguments and a cotangent
                of = FnRef(target.of.inst, target.of.fn, None)
                types.append(self.signature(of, types, span).result)
            return types
        consts = ref.inst.consts if ref.inst else {}
        out = []
        for p in fn.params:
            if p.type is None:
                raise self.error("E3008", f"{what} needs the type of its argument {p.name}", p.span)
            out.append(self.type(p.type, consts))
        return out

    def alias_target(self, ref: FnRef) -> GradRef | VjpRef:
        fn = ref.fn
        assert isinstance(fn, ast.FnAlias)
        builder = FunctionBuilder(self, ref, "", [], fn.span, probe=True)
        target = builder.expr(fn.value)
        if not isinstance(target, (GradRef, VjpRef)):
            raise self.error(
                "E2014", "fn name = ... defines a function from grad(f) or f.vjp", fn.value.span
            )
        if isinstance(target.of.fn, ast.FnAlias):  # refused here: its types grow exponentially
            raise self.error(
                "E2020",
                f"{target.of.fn.name} is itself a derivative: no second derivatives",
                fn.value.span,
            )
        return target

    # ---- the entry ----
    def entry_ref(self, entry: Entry, consts: dict[str, int]) -> FnRef:
        if entry.module is None:
            inst, fn = None, self.program.functions[entry.function]
        else:
            defn = self.program.modules[entry.module]
            inst = self.instance(defn, consts, defn.span)
            fn = defn.member(entry.function)
        return FnRef(inst, derivative_alias(fn, entry.derivative), None)

    def param_inits(self, inst: ModInst, prefix: str = "") -> list[dict]:
        """Each parameter leaf's path, initializer and arguments, in declaration order."""
        out = []
        for m in inst.defn.members:
            path = f"{prefix}.{m.name}" if prefix else m.name
            if isinstance(m, ast.ParamDef):
                out.append({"path": path, **self.init_spec(m, inst.consts)})
            elif isinstance(m, ast.SubDef):
                sub, _ = inst.subs[m.name]
                out += self.param_inits(sub, path)
        return out

    def init_spec(self, p: ast.ParamDef, consts: dict[str, int]) -> dict:
        init = p.init
        if init.kind not in INIT_KINDS:
            raise self.error(
                "E2017",
                f"unknown initializer {init.kind} (zeros, ones, normal, uniform)",
                init.span,
            )
        allowed = INIT_KINDS[init.kind]
        if len(init.args) > len(allowed):
            if not allowed:
                raise self.error("E2017", f"{init.kind} takes no arguments", init.span)
            raise self.error("E2017", f"{init.kind} takes one argument, its scale", init.span)
        args = {}
        for i, a in enumerate(init.args):
            name = a.name or allowed[i]
            if name not in allowed:
                raise self.error("E2017", f"{init.kind} has no argument {name}", a.span)
            if _operations(a.value) > MAX_INIT_OPERATIONS:
                raise self.error(
                    "E2017",
                    f"an initializer argument has more than {MAX_INIT_OPERATIONS} operations",
                    a.span,
                )
            text, value = self.const_expr(a.value, consts)
            if not (value > 0 and gmpy2.is_finite(value)):
                message = f"{init.kind}'s {name} must be positive and finite, not {text}"
                raise self.error("E2017", message, a.value.span)
            args[name] = text
        if allowed and "scale" not in args:
            raise self.error(
                "E2017", f"{init.kind} needs its scale: {init.kind}(scale = …)", init.span
            )
        return {"init": init.kind, **args}

    def const_expr(self, e: ast.Expr, consts: dict[str, int]) -> tuple[str, gmpy2.mpfr]:
        """An initializer argument as exact text (consts substituted) and its value, an MPFR
        number: a 400-digit literal or exp(1000) is finite there, exp(1e10) infinite."""
        if isinstance(e, ast.IntLit):
            return str(e.value), gmpy2.mpfr(e.value)
        if isinstance(e, ast.FloatLit):
            return e.text, gmpy2.mpfr(e.text)
        if isinstance(e, ast.Name):
            if e.id in consts or e.id in self.declared_dims:
                n = consts[e.id] if e.id in consts else self.dim(e.id, e.span)
                return str(n), float(n)
            raise self.error(
                "E2017", f"initializer arguments use numbers and consts, not '{e.id}'", e.span
            )
        if isinstance(e, ast.Neg):
            t, v = self.const_expr(e.x, consts)
            return f"-({t})" if isinstance(e.x, ast.BinOp) else f"-{t}", -v
        if isinstance(e, ast.BinOp):
            first, links = ast.chain(e)
            outside = [b for b in links if b.op not in _INIT_PRECEDENCE]
            if outside:  # the outermost, as a walk from the top would meet it
                raise self.error("E2017", _INIT_FORM, outside[-1].span)
            left = self.const_expr(first, consts)
            for b in links:
                left = self._const_op(b, left, self.const_expr(b.rhs, consts))
            return left
        if (
            isinstance(e, ast.Call)
            and isinstance(e.fn, ast.Name)
            and e.fn.id in ("sqrt", "exp", "log")
            and len(e.args) == 1
        ):
            t, v = self.const_expr(e.args[0].value, consts)
            if (e.fn.id == "sqrt" and v < 0) or (e.fn.id == "log" and v <= 0):
                raise self.error("E2017", f"{e.fn.id}({t}) is not a real number", e.span)
            return f"{e.fn.id}({t})", getattr(gmpy2, e.fn.id)(v)
        raise self.error("E2017", _INIT_FORM, e.span)

    def _const_op(
        self, e: ast.BinOp, left: tuple[str, gmpy2.mpfr], right: tuple[str, gmpy2.mpfr]
    ) -> tuple[str, gmpy2.mpfr]:
        """`left e.op right` in an initializer argument: its text and value."""
        (ta, a), (tb, b) = left, right
        if e.op == "/" and b == 0:
            raise self.error("E2017", "division by zero in an initializer", e.span)
        v = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0.0}[e.op]
        # Parentheses only where the text would otherwise group differently: an
        # operand of looser precedence, or of equal precedence on the right.
        prec = _INIT_PRECEDENCE[e.op]
        if isinstance(e.lhs, ast.BinOp) and _INIT_PRECEDENCE[e.lhs.op] < prec:
            ta = f"({ta})"
        if isinstance(e.rhs, ast.BinOp) and _INIT_PRECEDENCE[e.rhs.op] <= prec:
            tb = f"({tb})"
        return f"{ta} {e.op} {tb}", v


def _operations(e: ast.Expr) -> int:
    """The operations of an initializer argument, whose text Python's own parser reads
    (presk/constants.py), recursing once an operation."""
    if isinstance(e, ast.BinOp):
        first, links = ast.chain(e)
        return len(links) + _operations(first) + sum(_operations(b.rhs) for b in links)
    if isinstance(e, ast.Neg):
        return 1 + _operations(e.x)
    if isinstance(e, ast.Call):
        return 1 + sum(_operations(a.value) for a in e.args)
    return 0


def _line(text: str, n: int) -> str | None:
    lines = text.splitlines()
    return lines[n - 1] if 0 < n <= len(lines) else None


# ---- building one function ------------------------------------------------------------------


class FunctionBuilder:
    def __init__(
        self,
        elab: Elaborator,
        ref: FnRef,
        symbol: str,
        arg_types: list[PskType],
        span: Span,
        probe: bool = False,
    ):
        self.elab = elab
        self.ref = ref
        self.symbol = symbol
        self.arg_types = arg_types
        self.call_span = span
        self.inst = ref.inst
        self.consts = ref.inst.consts if ref.inst else {}
        self.prefix = elab.site_prefix(ref)
        self.env: dict[str, Value] = {}
        self.calls = 0
        self.params: V | None = None
        self.fields: dict[str, V] = {}
        self.fb: FuncBuilder | None = None
        self.probe = probe  # only resolving names (an alias's target), building nothing

    def err(self, code: str, message: str, span: Span) -> SourceError:
        return self.elab.error(code, message, span)

    # ---- the func ----
    def build(self) -> Signature:
        fn = self.ref.fn
        if isinstance(fn, ast.FnAlias):
            return self.build_alias(fn)
        if len(self.arg_types) != len(fn.params):
            raise self.err(
                "E2003",
                f"{self.prefix} takes {counted(len(fn.params), 'argument')}, "
                f"not {len(self.arg_types)}",
                self.call_span,
            )
        for p, t in zip(fn.params, self.arg_types, strict=True):
            if p.type is not None:
                want = self.elab.type(p.type, self.consts)
                if want != t:
                    raise self.err(
                        "E2008",
                        f"argument {p.name} of {self.prefix} is {want.text()}, not {t.text()}",
                        self.call_span,
                    )
        args = self.begin([p.name for p in fn.params])
        for p, a in zip(fn.params, args, strict=True):
            self.env[p.name] = a
        for let in fn.lets:
            self.let(let)
        result = self.value(self.expr(fn.result), fn.result.span)
        if fn.ret is not None:
            want = self.elab.type(fn.ret, self.consts)
            if want != result.type:
                raise self.err(
                    "E2008",
                    f"{self.prefix} returns {result.type.text()}, not {want.text()}",
                    fn.ret.span,
                )
        return self.finish(result, fn.result.span)

    def build_alias(self, fn: ast.FnAlias) -> Signature:
        target = self.elab.alias_target(self.ref)
        arg_names = (
            [p.name for p in target.of.fn.params] if isinstance(target.of.fn, ast.FnDef) else []
        )
        if isinstance(target, VjpRef):
            arg_names.append("ct")
        if len(arg_names) != len(self.arg_types):
            arg_names = [f"x{i}" for i in range(len(self.arg_types))]
        vals = self.begin(arg_names)
        if self.inst:
            target = type(target)(FnRef(target.of.inst, target.of.fn, self.params, target.of.stack))
        result = self.call(target, vals, fn.value.span)
        return self.finish(result, fn.value.span)

    def begin(self, names: list[str]) -> list[V]:
        """Start the func: the parameter record (of a module function) and the arguments."""
        elab = self.elab
        inputs = list(zip(names, self.arg_types, strict=True))
        if self.inst:
            inputs.insert(0, ("params", self.inst.params))
        self.fb = FuncBuilder(
            elab.module, self.symbol, inputs, self.prefix, elab.location(self.ref.fn.span)
        )
        args = list(self.fb.args)
        if self.inst:
            self.params = args.pop(0)
        return args

    def finish(self, result: V, span: Span) -> Signature:
        self.fb.ret(result, self.elab.location(span))
        params = self.inst.params if self.inst else None
        return Signature(self.symbol, params, list(self.arg_types), result.type)

    # ---- emitting ops ----
    def emit(
        self,
        op: str,
        operands: list[V],
        result: PskType,
        attrs: dict,
        span: Span,
        site: bool = True,
    ) -> V:
        return self.fb.op(op, operands, result, attrs, site, self.elab.location(span))

    def apply(self, prim_name: str, operands: list[V], statics: list, span: Span) -> V:
        """One primitive on tensors, typed by its rule."""
        prim = by_name(prim_name)
        types = [o.type for o in operands]
        try:
            attrs, result = prim.type_of(statics, types)
        except TypingError as e:
            raise self.err("E2004", str(e), span) from None
        with self.elab.ctx:
            mattrs = mlir_attrs(prim, attrs)
        return self.emit(prim.op, operands, result, mattrs, span)

    def const(self, text: str, span: Span) -> V:
        return self.fb.const(text, self.elab.location(span))

    # ---- statements ----
    def let(self, let: ast.Let) -> None:
        value = self.expr(let.value)
        if not let.is_tuple:
            if isinstance(value, V):
                self.name_op(value, let.names[0])
            self.env[let.names[0]] = value
            return
        v = self.value(value, let.value.span)
        if not isinstance(v.type, TupleType) or len(v.type.items) != len(let.names):
            raise self.err(
                "E2015", f"cannot take {v.type.text()} apart into {len(let.names)} names", let.span
            )
        for i, n in enumerate(let.names):
            self.env[n] = self.get(v, i, let.span)

    def name_op(self, v: V, name: str) -> None:
        """Name the op a `let` binds (the first let to bind it), for dumps."""
        owner = v.value.owner
        if isinstance(owner, ir.Block):
            return
        op = owner.operation
        if "psk.site" in op.attributes and "psk.name" not in op.attributes:
            op.attributes["psk.name"] = ir.StringAttr.get(name, self.elab.ctx)

    # ---- expressions ----
    def value(self, v: Value, span: Span) -> V:
        """A run-time value: whole numbers become real constants, nullary primitives apply."""
        if isinstance(v, V):
            return v
        if isinstance(v, Known):
            return self.const(str(v.n), span)
        if isinstance(v, PrimRef):
            prim = by_name(v.name)
            if prim is not None and prim.arity[0] == 0:
                return self.apply(v.name, [], v.statics or [], span)
            raise self.err("E2014", f"{v.name} is a primitive: apply it to operands", span)
        if isinstance(v, (FnRef, GradRef, VjpRef)):
            raise self.err("E2014", "a function is not a value here: call it", span)
        if isinstance(v, SubRef):
            raise self.err(
                "E2014", f"{v.inst.defn.name} is a submodule: call one of its functions", span
            )
        raise AssertionError(v)

    def real(self, v: Value, span: Span) -> V:
        """A value as reals: nat values are injected into ℝ."""
        v = self.value(v, span)
        if isinstance(v.type, TensorType) and v.type.kind == "index":
            return self.apply("to_real", [v], [], span)
        return v

    def expr(self, e: ast.Expr) -> Value:
        if self.probe:
            return self.probe_expr(e)
        if isinstance(e, ast.IntLit):
            return Known(e.value)
        if isinstance(e, ast.FloatLit):
            return self.const(e.text, e.span)
        if isinstance(e, ast.Name):
            return self.name(e.id, e.span)
        if isinstance(e, ast.BinOp):
            return self.binop(e)
        if isinstance(e, ast.Neg):
            x = self.expr(e.x)
            if isinstance(x, Known):
                return self.const(str(-x.n), e.span)
            return self.elementwise("neg", [self.real(x, e.x.span)], e.span)
        if isinstance(e, ast.Field):
            return self.field(self.expr(e.obj), e.name, e.span)
        if isinstance(e, ast.Item):
            v = self.value(self.expr(e.obj), e.obj.span)
            return self.get(v, e.index, e.span)
        if isinstance(e, ast.Static):
            fn = self.expr(e.fn)
            if not isinstance(fn, PrimRef) or fn.statics is not None:
                raise self.err("E2010", "only a primitive takes arguments in [ ]", e.span)
            return PrimRef(fn.name, [self.static(fn.name, s) for s in e.args], e.span)
        if isinstance(e, ast.Call):
            callee = self.expr(e.fn)
            for a in e.args:
                if a.name is not None:
                    raise self.err(
                        "E2003",
                        f"keyword arguments are for initializers, not calls ({a.name}=)",
                        a.span,
                    )
            if isinstance(callee, PrimRef) and callee.name in SPECIAL_FORMS:
                return self.special(callee.name, e)
            args = [self.expr(a.value) for a in e.args]
            return self.call(callee, args, e.span, [a.value.span for a in e.args])
        if isinstance(e, ast.TupleLit):
            vals = [self.value(self.expr(i), i.span) for i in e.items]
            return self.tuple(vals, e.span)
        if isinstance(e, ast.RecordLit):
            names = [n for n, _ in e.fields]
            if len(set(names)) != len(names):
                raise self.err("E2002", "a field appears twice in a record", e.span)
            vals = [self.value(self.expr(x), x.span) for _, x in e.fields]
            return self.record(names, vals, e.span)
        raise AssertionError(e)

    def probe_expr(self, e: ast.Expr) -> Value:
        """Resolve an alias's right side (`grad(loss)`, `loss.vjp`) without building."""
        if (
            isinstance(e, ast.Call)
            and isinstance(e.fn, ast.Name)
            and e.fn.id == "grad"
            and len(e.args) == 1
        ):
            target = (
                self.name(e.args[0].value.id, e.args[0].span)
                if isinstance(e.args[0].value, ast.Name)
                else None
            )
            if not isinstance(target, FnRef):
                raise self.err("E2014", "grad takes a function by name", e.span)
            return GradRef(target)
        if isinstance(e, ast.Field) and e.name == "vjp" and isinstance(e.obj, ast.Name):
            target = self.name(e.obj.id, e.obj.span)
            if isinstance(target, FnRef):
                return VjpRef(target)
        raise self.err("E2014", "fn name = ... defines a function from grad(f) or f.vjp", e.span)

    def static(self, prim: str, s) -> object:
        """A bracket argument, resolved to what the primitive's rule takes."""
        if isinstance(s, ast.StaticAxis):
            return AxisSpec(s.name, self.elab.size(s.size, self.consts))
        if isinstance(s, ast.StaticRename):
            dst = s.dst.id if isinstance(s.dst, ast.Name) else None
            if not isinstance(s.dst, ast.Name):
                raise self.err(
                    "E2010", "rename[a → b] renames to a name (_ for positional)", s.dst.span
                )
            return Rename(self.axis_ref(s.src), None if dst == "_" else dst)
        signature = named(prim)  # None for fold and grad, whose brackets the check refuses
        if signature is not None and signature.statics == "numbers":
            if isinstance(s, ast.FloatLit):
                return Number(s.text)
            return Number(str(self.elab.size(s, self.consts)))
        return self.axis_ref(s)

    def axis_ref(self, s) -> str | int:
        if isinstance(s, ast.Name):
            return s.id
        if isinstance(s, ast.IntLit):
            return s.value
        if isinstance(s, ast.Neg) and isinstance(s.x, ast.IntLit):
            return -s.x.value
        raise self.err("E2010", "an axis is a name or a position (-1 for the last)", s.span)

    def name(self, ident: str, span: Span) -> Value:
        if ident in self.env:
            return self.env[ident]
        if self.inst is not None:
            member = self.inst.defn.member(ident)
            if isinstance(member, ast.ParamDef):
                return self.param_field(ident, span)
            if isinstance(member, ast.SubDef):
                sub, count = self.inst.subs[ident]
                return SubRef(sub, self.param_field(ident, span), count)
            if isinstance(member, (ast.FnDef, ast.FnAlias)):
                return FnRef(self.inst, member, self.params)
            if ident in self.consts:
                return Known(self.consts[ident])
        if ident in self.elab.declared_dims:
            return Known(self.elab.dim(ident, span))
        if ident in self.elab.program.functions:
            return FnRef(None, self.elab.program.functions[ident], None)
        if ident in SPECIAL_FORMS or named(ident) is not None:
            return PrimRef(ident, None, span)
        if ident in CONSTANTS:
            return self.const("pi", span)
        if ident in self.elab.program.modules:
            return self.module_ref(self.elab.program.modules[ident], span)
        raise self.err("E2001", f"unknown name '{ident}'", span)

    def module_ref(self, defn: ast.ModuleDef, span: Span) -> SubRef:
        """A module named directly (`adamw.step`): one without consts or parameters."""
        if defn.consts:
            raise self.err("E2014", f"module {defn.name} takes consts: use it through a sub", span)
        inst = self.elab.instance(defn, {}, span)
        if inst.params.fields:
            raise self.err(
                "E2014", f"module {defn.name} has parameters: use it through a sub", span
            )
        return SubRef(inst, self.record([], [], span), None)

    def param_field(self, name: str, span: Span) -> V:
        if self.probe:
            return V(None, self.inst.params.field(name))  # type: ignore[arg-type]
        if name not in self.fields:
            self.fields[name] = self.record_field(self.params, name, span)
        return self.fields[name]

    def field(self, obj: Value, name: str, span: Span) -> Value:
        if isinstance(obj, SubRef):
            member = obj.inst.defn.member(name)
            if isinstance(member, ast.ParamDef):
                return self.record_field(obj.params, name, span)
            if isinstance(member, ast.SubDef):
                sub, count = obj.inst.subs[name]
                if obj.stack is not None:
                    raise self.err("E2012", "a stack is read whole, with fold", span)
                return SubRef(sub, self.record_field(obj.params, name, span), count)
            if isinstance(member, (ast.FnDef, ast.FnAlias)):
                return FnRef(obj.inst, member, obj.params, obj.stack)
            raise self.err("E2016", f"module {obj.inst.defn.name} has no member {name}", span)
        if isinstance(obj, FnRef) and name == "vjp":
            return VjpRef(obj)
        v = self.value(obj, span)
        if not isinstance(v.type, RecordType) or name not in v.type.names:
            raise self.err("E2016", f"{v.type.text()} has no field {name}", span)
        return self.record_field(v, name, span)

    def record_field(self, v: V, name: str, span: Span) -> V:
        return self.fb.field(v, name, self.elab.location(span))

    def get(self, v: V, index: int, span: Span) -> V:
        if not isinstance(v.type, TupleType) or not 0 <= index < len(v.type.items):
            raise self.err("E2016", f"{v.type.text()} has no item {index}", span)
        return self.fb.get(v, index, self.elab.location(span))

    def tuple(self, vals: list[V], span: Span) -> V:
        return self.fb.tuple(vals, self.elab.location(span))

    def record(self, names: list[str], vals: list[V], span: Span) -> V:
        return self.fb.record(names, vals, self.elab.location(span))

    def binop(self, e: ast.BinOp) -> Value:
        """A chain `a + b · c - …`, operand after operand, in a loop."""
        first, links = ast.chain(e)
        value = self.expr(first)
        for b in links:
            value = self.operation(b, value, self.expr(b.rhs))
        return value

    def operation(self, e: ast.BinOp, lhs: Value, rhs: Value) -> Value:
        if isinstance(lhs, Known) and isinstance(rhs, Known) and e.op in "+*":
            return Known(lhs.n + rhs.n if e.op == "+" else lhs.n * rhs.n)
        if e.op == "·":  # a · b is dot(a, b), operands checked as any primitive's
            dot = PrimRef("dot", None, e.span)
            return self.call_prim(dot, [lhs, rhs], e.span, [e.lhs.span, e.rhs.span])
        a, b = self.real(lhs, e.lhs.span), self.real(rhs, e.rhs.span)
        return self.elementwise(_BINOPS[e.op], [a, b], e.span)

    def elementwise(self, prim: str, operands: list[V], span: Span) -> V:
        """An elementwise primitive, lifted over records and tuples leaf by leaf."""
        shapes = [o.type for o in operands if not isinstance(o.type, TensorType)]
        if not shapes:
            return self.apply(prim, operands, [], span)
        shape = shapes[0]
        for s in shapes[1:]:
            if _structure(s) != _structure(shape):
                raise self.err(
                    "E2006",
                    f"{prim} needs operands of one structure, not {shape.text()} and {s.text()}",
                    span,
                )
        for o in operands:
            if isinstance(o.type, TensorType) and o.type.rank != 0:
                raise self.err(
                    "E2006",
                    f"{prim} of a tree and {o.type.text()}: only a scalar repeats over a tree",
                    span,
                )
        return self._lift(prim, operands, shape, span)

    def _lift(self, prim: str, operands: list[V], shape: PskType, span: Span) -> V:
        if isinstance(shape, TensorType):
            return self.apply(prim, operands, [], span)
        if isinstance(shape, RecordType):
            parts = [
                self._lift(
                    prim,
                    [
                        o if isinstance(o.type, TensorType) else self.record_field(o, n, span)
                        for o in operands
                    ],
                    t,
                    span,
                )
                for n, t in shape.fields
            ]
            return self.record(list(shape.names), parts, span)
        parts = [
            self._lift(
                prim,
                [o if isinstance(o.type, TensorType) else self.get(o, i, span) for o in operands],
                t,
                span,
            )
            for i, t in enumerate(shape.items)
        ]
        return self.tuple(parts, span)

    def total(self, prim: str, v: V, span: Span) -> V:
        """sum(x) over every axis, and over every leaf of a tree, in leaf order."""
        if isinstance(v.type, TensorType):
            return self.apply(prim, [v], [], span)
        if prim != "sum":
            raise self.err("E2006", f"{prim} of {v.type.text()}: only sum adds up a tree", span)
        acc = None
        for part in self._parts(v, span):
            s = self.total("sum", part, span)
            acc = s if acc is None else self.apply("add", [acc, s], [], span)
        return acc if acc is not None else self.const("0", span)

    def _parts(self, v: V, span: Span) -> list[V]:
        if isinstance(v.type, RecordType):
            return [self.record_field(v, n, span) for n in v.type.names]
        return [self.get(v, i, span) for i in range(len(v.type.items))]

    # ---- calls ----
    def call(
        self, callee: Value, args: list[Value], span: Span, spans: list[Span] | None = None
    ) -> V:
        spans = spans or [span] * len(args)
        if isinstance(callee, PrimRef):
            return self.call_prim(callee, args, span, spans)
        if isinstance(callee, FnRef):
            if callee.stack is not None:
                raise self.err("E2012", "a stacked submodule is read with fold(stack.fn, x)", span)
            vals = [self.value(a, s) for a, s in zip(args, spans, strict=True)]
            sig = self.elab.signature(callee, [v.type for v in vals], span)
            operands = ([callee.params] if callee.inst else []) + vals
            return self.fb.call(
                sig.symbol, operands, sig.result, self.callsite(), loc=self.elab.location(span)
            )
        if isinstance(callee, (GradRef, VjpRef)):
            return self.call_derivative(
                callee, [self.value(a, s) for a, s in zip(args, spans, strict=True)], span
            )
        raise self.err("E2014", "only functions and primitives can be called", span)

    def callsite(self) -> str:
        """The next call of this function: it keys the draws of what the call runs."""
        site = f"{self.prefix}/%c{self.calls}"
        self.calls += 1
        return site

    def call_prim(self, ref: PrimRef, args: list[Value], span: Span, spans: list[Span]) -> V:
        name = ref.name
        statics = ref.statics or []
        if name in REDUCING and ref.statics is not None:
            name = REDUCING[name]
        prim = by_name(name)
        if name in ("sum", "mean") and ref.statics is None and len(args) == 1:
            return self.total(name, self.real(args[0], spans[0]), span)
        vals = []
        for i, (a, s) in enumerate(zip(args, spans, strict=True)):
            kind = prim.operand_kind(i) if i < prim.arity[1] else "real"
            vals.append(self.real(a, s) if kind == "real" else self.value(a, s))
        if prim.elementwise and not statics:
            lo, hi = prim.arity
            if not lo <= len(vals) <= hi:
                count = counted(lo, "operand", hi)
                raise self.err("E2003", f"{name} takes {count}, not {len(vals)}", span)
            return self.elementwise(name, vals, span)
        for v, s in zip(vals, spans, strict=True):
            if not isinstance(v.type, TensorType):
                raise self.err("E2006", f"{name} takes tensors, not {v.type.text()}", s)
        return self.apply(name, vals, statics, span)

    def special(self, form: str, e: ast.Call) -> Value:
        if form == "grad":
            if len(e.args) != 1:
                raise self.err("E2003", "grad takes one function", e.span)
            target = self.expr(e.args[0].value)
            if not isinstance(target, FnRef):
                raise self.err("E2014", "grad takes a function", e.args[0].span)
            return GradRef(target)
        # fold(stack.fn, carry)
        if len(e.args) != 2:
            raise self.err(
                "E2003", "fold takes a stacked module's function and the carried value", e.span
            )
        f = self.expr(e.args[0].value)
        if not isinstance(f, FnRef) or f.stack is None:
            raise self.err(
                "E2012",
                "fold's first argument is a function of a stacked submodule (blocks.apply)",
                e.args[0].span,
            )
        carry = self.value(self.expr(e.args[1].value), e.args[1].span)
        layer = FnRef(f.inst, f.fn, None)
        sig = self.elab.signature(layer, [carry.type], e.span)
        if sig.result != carry.type:
            raise self.err(
                "E2008",
                f"fold needs {self.elab.site_prefix(layer)} to return its argument's type "
                f"{carry.type.text()}, not {sig.result.text()}",
                e.span,
            )
        loc = self.elab.location(e.span)
        return self.fb.call(
            sig.symbol, [f.params, carry], carry.type, self.callsite(), "psk.fold", loc
        )

    def call_derivative(self, ref: GradRef | VjpRef, vals: list[V], span: Span) -> V:
        f = ref.of
        if isinstance(ref, VjpRef):
            if not vals:
                raise self.err("E2003", "f.vjp(x…, ct) takes f's arguments and a cotangent", span)
            *args, ct = vals
        else:
            args, ct = vals, None
        sig = self.elab.signature(FnRef(f.inst, f.fn, None), [v.type for v in args], span)
        inputs = ([f.params] if f.inst else []) + args
        packed = self.tuple(inputs, span)
        loc, callsite = self.elab.location(span), self.callsite()
        if isinstance(ref, GradRef):
            if sig.result != REAL_SCALAR:
                raise self.err(
                    "E2006",
                    f"grad needs a function with a scalar result, not {sig.result.text()}",
                    span,
                )
            if f.inst is None and not args:
                raise self.err(
                    "E2003", "grad of a function without parameters needs an argument", span
                )
            result = f.inst.params if f.inst else args[0].type
            return self.fb.call(sig.symbol, [packed], result, callsite, "psk.grad", loc)
        if ct.type != sig.result:
            raise self.err(
                "E2008", f"the cotangent must be {sig.result.text()}, not {ct.type.text()}", span
            )
        result = TupleType(tuple(v.type for v in inputs))
        return self.fb.call(sig.symbol, [packed, ct], result, callsite, "psk.vjp", loc)


def _structure(t: PskType):
    if isinstance(t, TensorType):
        return None
    if isinstance(t, RecordType):
        return ("record", tuple((n, _structure(f)) for n, f in t.fields))
    return ("tuple", tuple(_structure(f) for f in t.items))


def derivative_alias(fn: ast.FnDef | ast.FnAlias, derivative: str | None):
    """`fn` itself, or the alias `grad(fn)` / `fn.vjp` an entry such as `loss.grad` names,
    placed at `fn`'s definition and named so no program function can clash with it."""
    if derivative is None:
        return fn
    name = ast.Name(fn.span, fn.name)
    if derivative == "grad":
        value = ast.Call(fn.span, ast.Name(fn.span, "grad"), [ast.Arg(fn.span, None, name)])
    else:
        value = ast.Field(fn.span, name, "vjp")
    return ast.FnAlias(fn.span, f"{derivative}({fn.name})", value)


# ---- the public entry point ---------------------------------------------------------------------


@dataclass
class Elaborated:
    module: ir.Module
    entry_symbol: str
    signature: Signature
    params: list[dict]  # one per parameter leaf: path, init, its arguments
    arg_bounds: dict[str, int]
    elaborator: Elaborator

    def instantiate(self, module: str, fn: str, arg_types: list[PskType]) -> Signature:
        """Elaborate `module.fn` (a module without consts, such as the prelude's `adamw`)
        at these argument types into the same PSK-Core module."""
        elab = self.elaborator
        defn = elab.program.modules[module]
        with elab.ctx, elab.loc:
            inst = elab.instance(defn, {}, defn.span)
            return elab.signature(FnRef(inst, defn.member(fn), None), arg_types, defn.span)


def elaborate(
    program: ast.SourceTree,
    entry: Entry,
    dims: dict[str, int],
    consts: dict[str, int],
    ctx: ir.Context,
    spelling: Spelling = FLAGS,
) -> Elaborated:
    """Elaborate `entry` of `program` into a PSK-Core module at the given bindings (a
    refusal names them as `spelling` does)."""
    elab, entry, ref = _entry(program, entry, dims, consts, ctx, spelling)
    with ctx, elab.loc, _frames_for_the_limits():
        arg_types = elab.declared_arg_types(ref, ref.fn.span, f"entry {entry}")
        sig = elab.signature(ref, arg_types, ref.fn.span)
        inits = elab.param_inits(ref.inst) if ref.inst else []
        bounds = _arg_bounds(elab, ref)
        _annotate(elab, entry, sig, inits, bounds)
    if not elab.module.operation.verify():
        raise AssertionError("elaboration produced a module that does not verify")
    return Elaborated(elab.module, sig.symbol, sig, inits, bounds, elab)


@contextmanager
def _frames_for_the_limits():
    """Python's recursion limit raised to _FRAMES while elaborating, then restored.

    The limits bound each nesting apart (an expression in the parser, calls here), but
    elaborating recurses through both at once. Python (3.11 on) runs a call of Python
    code without a C frame, so these frames cost the heap, not the thread's stack."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _FRAMES))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def parameter_type(*bindings) -> PskType | None:
    """The parameter record of the entry's module (None for a plain function), from the
    arguments `elaborate` takes, needing only the dims the parameters' types use."""
    _, _, ref = _entry(*bindings)
    return ref.inst.params if ref.inst else None


def _entry(
    program: ast.SourceTree,
    entry: Entry,
    dims: dict,
    consts: dict,
    ctx: ir.Context,
    spelling: Spelling = FLAGS,
):
    """(the elaborator, the resolved entry, its function's reference): the entry's module
    instantiated, its functions not yet elaborated."""
    check_dims(program, dims, spelling)
    elab = Elaborator(program, {**program.dim_defaults, **dims}, ctx, spelling)
    entry = resolve_entry(program, entry, consts)
    with ctx, elab.loc:
        ref = elab.entry_ref(entry, entry_consts(program, entry, consts, spelling))
    return elab, entry, ref


def _arg_bounds(elab: Elaborator, ref: FnRef) -> dict[str, int]:
    while isinstance(ref.fn, ast.FnAlias):  # an alias takes its target's arguments first
        ref = elab.alias_target(ref).of
    out = {}
    consts = ref.inst.consts if ref.inst else {}
    for p in ref.fn.params:
        if isinstance(p.type, ast.TensorTypeExpr) and p.type.bound is not None:
            out[p.name] = elab.bound(p.type.bound, consts)
    return out


def _annotate(
    elab: Elaborator, entry: Entry, sig: Signature, inits: list[dict], bounds: dict[str, int]
) -> None:
    s = ir.StringAttr.get
    mod = elab.module.operation
    mod.attributes["psk.program"] = s(elab.program.file)
    mod.attributes["psk.entry"] = ir.FlatSymbolRefAttr.get(sig.symbol)
    if sig.params is not None:  # the entry takes its module's parameter record first
        mod.attributes["psk.module"] = s(sig.symbol.rsplit(".", 1)[0])
    mod.attributes["psk.dims"] = ir.DictAttr.get(
        {k: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v) for k, v in elab.dims.items()}
    )
    mod.attributes["psk.params"] = ir.ArrayAttr.get(
        [ir.DictAttr.get({k: s(v) for k, v in spec.items()}) for spec in inits]
    )
    if bounds:
        mod.attributes["psk.bounds"] = ir.DictAttr.get(
            {k: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v) for k, v in bounds.items()}
        )
    prec = elab.program.precision
    if prec is not None:
        args = {}
        for a in prec.args:
            text, _ = elab.const_expr(a.value, {})
            args[a.name or "value"] = s(text)
        mod.attributes["psk.precision"] = ir.DictAttr.get({"kind": s(prec.kind), **args})
