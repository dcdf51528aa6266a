"""Parsing PSK source into the AST, with lark (LALR) and located syntax errors (E1xxx).

Neither step recurses once a level of the source: lark's LALR parser keeps its own
stack, and the tree becomes the AST bottom-up without recursion. What reads the AST
afterwards does recurse, so an expression or type nested deeper than MAX_NESTING is
refused here (E1004). The left operand of `+ - * / ·` does not nest: `x + x + … + x`
is a chain, as long as one likes, which the AST's readers walk in a loop.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from lark import Lark, Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from presk.errors import PreskError, SourceError, Span, source_error
from presk.front import ast

# Digits a whole number may have: far past any size or count, and below the 640 to 4300
# past which Python refuses to convert between an int and its text.
MAX_DIGITS = 500
# Levels an expression or type may nest: a real program nests a few tens deep, and the
# elaborator's recursion must stay far from Python's limit.
MAX_NESTING = 128
# The rules that are one level of nesting: expressions and types that hold others.
_NESTING = {
    "binop": "expression",
    "neg": "expression",
    "field": "expression",
    "item": "expression",
    "call": "expression",
    "static": "expression",
    "tuple_lit": "expression",
    "record_lit": "expression",
    "tuple_type": "type",
    "record_type": "type",
}

_OPEN = {"LPAR", "LSQB"}
_CLOSE = {"RPAR", "RSQB"}


class _NewlinePostLexer:
    """Drop newlines inside ( ) and [ ], and merge runs of newlines into one."""

    always_accept = ("_NL",)  # the contextual lexer must produce it everywhere, for us to drop

    def process(self, stream):
        depth = 0
        last_nl = True  # no newline token at the very start
        for tok in stream:
            if tok.type in _OPEN:
                depth += 1
            elif tok.type in _CLOSE:
                depth = max(0, depth - 1)
            if tok.type == "_NL":
                if depth > 0 or last_nl:
                    continue
                last_nl = True
            else:
                last_nl = False
            yield tok


@cache
def _parser() -> Lark:
    grammar = resources.files("presk.front").joinpath("psk.lark").read_text()
    return Lark(
        grammar,
        parser="lalr",
        postlex=_NewlinePostLexer(),
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,  # the LALR tables, kept in the temporary directory between runs
    )


# How an error names the terminals that are not one fixed string (those show as written).
_TOKEN_WORDS = {
    "_NL": "a newline",
    "$END": "the end of the file",
    "NAME": "a name",
    "INT": "a number",
    "FLOAT": "a number",
    "ARROW": "'->'",
    "MINUS": "'-'",
    "TIMES": "'*'",
    "DIVIDE": "'/'",
    "DOT": "'·'",
}


@cache
def _literals() -> dict[str, str]:
    """Each terminal that is one fixed string (keywords, punctuation), by its name."""
    return {t.name: t.pattern.value for t in _parser().terminals if t.pattern.type == "str"}


def _word(name: str) -> str:
    if name in _TOKEN_WORDS:
        return _TOKEN_WORDS[name]
    literal = _literals().get(name)
    return repr(literal) if literal is not None else name


def _describe(tok: Token | None) -> str:
    if tok is None or tok.type == "$END":
        return "end of the file"
    if tok.type == "_NL":
        return "end of the line"
    return repr(str(tok))


def _expected(e: UnexpectedToken) -> str:
    """The tokens the parser would have taken instead, when they are few."""
    parser = e.interactive_parser
    # accepts() tries each token on the parser's state: exact, where e.expected is LALR's
    # superset (lookaheads of every context the state was merged from).
    names = parser.accepts() if parser is not None else e.expected
    words = sorted({_word(n) for n in names})
    if not words or len(words) > 6:
        return ""
    return " (expected " + ", ".join(words) + ")"


def _syntax_error(e: UnexpectedInput, file: str, text: str) -> SourceError:
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "?"
        return source_error(
            SourceError, "E1001", f"unexpected character {ch!r}", file, text, e.line, e.column
        )
    if isinstance(e, UnexpectedEOF):
        lines = text.splitlines() or [""]
        return source_error(
            SourceError,
            "E1003",
            "unexpected end of the file",
            file,
            text,
            len(lines),
            len(lines[-1]) + 1,
        )
    assert isinstance(e, UnexpectedToken)
    tok = e.token
    if tok.type == "$END":
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
        return source_error(
            SourceError, "E1003", "unexpected end of the file" + _expected(e), file, text, line, col
        )
    return source_error(
        SourceError,
        "E1002",
        f"unexpected {_describe(tok)}" + _expected(e),
        file,
        text,
        tok.line,
        tok.column,
    )


def parse(text: str, file: str) -> ast.SourceTree:
    """Parse a whole PSK program. Raises SourceError (E1xxx) on bad syntax."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, file, text) from None
    deep = _too_deep(tree)
    if deep is not None:
        line, col = _position(deep)
        message = f"{_NESTING[deep.data]} nested deeper than {MAX_NESTING} levels"
        raise source_error(SourceError, "E1004", message, file, text, line, col)
    try:
        return _Build(file, text).transform(tree)
    except VisitError as e:  # lark wraps what a transformer method raises
        if isinstance(e.orig_exc, PreskError):
            raise e.orig_exc from None
        raise


def _too_deep(tree: Tree) -> Tree | None:
    """The first node, in source order, nested deeper than MAX_NESTING levels; None if
    there is none. A chain's left operand is a binop of the chain's own level."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data in _NESTING:
            depth += 1
            if depth > MAX_NESTING:
                return node
        children = [c for c in node.children if isinstance(c, Tree)]
        for child in reversed(children):
            chained = node.data == child.data == "binop" and child is node.children[0]
            stack.append((child, depth - 1 if chained else depth))
    return None


def _position(node: Tree) -> tuple[int, int]:
    """Where a node is written: a binop at its operator, as the AST places it."""
    if node.data == "binop":
        op = node.children[1]
        return op.line, op.column
    return node.meta.line, node.meta.column


class _Build(Transformer_NonRecursive):
    """Lark's tree to presk's AST."""

    def __init__(self, file: str, text: str):
        super().__init__()
        self.file = file
        self.text = text

    def _span(self, meta) -> Span:
        return Span(self.file, getattr(meta, "line", 1), getattr(meta, "column", 1))

    def _tspan(self, tok: Token) -> Span:
        return Span(self.file, tok.line, tok.column)

    def _err(self, code: str, message: str, span: Span) -> SourceError:
        return source_error(SourceError, code, message, self.file, self.text, span.line, span.col)

    def _int(self, tok: Token) -> int:
        """A whole number as written, of at most MAX_DIGITS digits (E1005)."""
        if len(tok) > MAX_DIGITS:
            message = f"a whole number of {len(tok)} digits (at most {MAX_DIGITS})"
            raise self._err("E1005", message, self._tspan(tok))
        return int(tok)

    # ---- program ----
    def start(self, items):
        prog = ast.SourceTree(self.file, self.text)
        for it in items:
            if it is None:
                continue
            prog.items.append(it)
            if isinstance(it, ast.DimDecl):
                prog.dims.extend(zip(it.names, it.spans, strict=True))
                prog.dim_defaults.update(it.defaults)
            elif isinstance(it, ast.ModuleDef):
                prog.modules.setdefault(it.name, it)
            elif isinstance(it, (ast.FnDef, ast.FnAlias)):
                prog.functions.setdefault(it.name, it)
            elif isinstance(it, ast.PrecisionDecl):
                if prog.precision is not None:
                    raise self._err("E2002", "the program declares its precision twice", it.span)
                prog.precision = it
        return prog

    @v_args(meta=True)
    def dim_decl(self, meta, items):
        names = [n for n, _ in items]
        spans = [self._tspan(n) for n in names]
        defaults = {str(n): self._int(v) for n, v in items if v is not None}
        return ast.DimDecl(self._span(meta), [str(n) for n in names], spans, defaults)

    def dim_item(self, children):
        name, value = children
        return name, value

    @v_args(meta=True)
    def precision_decl(self, meta, children):
        kind, args = children
        return ast.PrecisionDecl(self._span(meta), str(kind), args or [])

    @v_args(meta=True)
    def module_def(self, meta, children):
        name, *rest = children
        consts = []
        if rest and isinstance(rest[0], list) and all(isinstance(c, str) for c in rest[0]):
            consts = rest.pop(0)
        return ast.ModuleDef(
            self._span(meta), str(name), consts, [m for m in rest if m is not None]
        )

    def const_names(self, names):
        return [str(n) for n in names]

    @v_args(meta=True)
    def param_def(self, meta, children):
        name, typ, init = children
        return ast.ParamDef(self._span(meta), str(name), typ, init)

    @v_args(meta=True)
    def init(self, meta, children):
        kind, args = children
        return ast.Init(self._span(meta), str(kind), args or [])

    @v_args(meta=True)
    def sub_def(self, meta, children):
        name, *rest = children
        stack = None
        if isinstance(rest[0], tuple) and rest[0][0] == "stack":
            stack = rest.pop(0)[1]
        module = rest[0]
        const_args = rest[1] if len(rest) > 1 and rest[1] is not None else []
        return ast.SubDef(
            self._span(meta), str(name), str(module), const_args, stack, self._tspan(module)
        )

    def stack_count(self, children):
        return ("stack", children[0])

    def const_args(self, children):
        return list(children)

    # ---- functions ----
    @v_args(meta=True)
    def fn_body(self, meta, children):
        name, params, _arrow, ret, body = children
        lets, result = body
        return ast.FnDef(self._span(meta), str(name), params or [], ret, lets, result)

    @v_args(meta=True)
    def fn_alias(self, meta, children):
        name, value = children
        return ast.FnAlias(self._span(meta), str(name), value)

    def fn_params(self, params):
        return list(params)

    @v_args(meta=True)
    def fn_param(self, meta, children):
        name, typ = children
        return ast.FnParam(self._tspan(name), str(name), typ)

    def body(self, children):
        return list(children[:-1]), children[-1]

    @v_args(meta=True)
    def let_stmt(self, meta, children):
        (names, is_tuple), value = children
        return ast.Let(self._span(meta), names, is_tuple, value)

    def bind_name(self, children):
        return [str(children[0])], False

    def bind_tuple(self, children):
        return [str(c) for c in children], True

    # ---- types ----
    @v_args(meta=True)
    def real_type(self, meta, children):
        (axes,) = children
        return ast.TensorTypeExpr(self._span(meta), "real", axes or [])

    @v_args(meta=True)
    def nat_type(self, meta, children):
        bound, axes = children
        if bound is not None and len(bound) != 1:
            raise self._err("E2010", "nat{V} takes one bound", self._span(meta))
        return ast.TensorTypeExpr(
            self._span(meta), "index", axes or [], bound[0] if bound else None
        )

    @v_args(meta=True)
    def bool_type(self, meta, children):
        (axes,) = children
        return ast.TensorTypeExpr(self._span(meta), "bool", axes)

    @v_args(meta=True)
    def tuple_type(self, meta, items):
        return ast.TupleTypeExpr(self._span(meta), [i for i in items if i is not None])

    @v_args(meta=True)
    def record_type(self, meta, children):
        fields = [(str(children[i]), children[i + 1]) for i in range(0, len(children), 2)]
        return ast.RecordTypeExpr(self._span(meta), fields)

    def axis_list(self, axes):
        return list(axes)

    @v_args(meta=True)
    def named_axis(self, meta, children):
        name, size = children
        return ast.AxisExpr(self._tspan(name), str(name), size)

    @v_args(meta=True)
    def plain_axis(self, meta, children):
        return ast.AxisExpr(self._span(meta), None, children[0])

    # ---- expressions ----
    @v_args(meta=True)
    def binop(self, meta, children):
        lhs, op, rhs = children
        sym = {"−": "-", "×": "*", "÷": "/", "@": "·"}.get(str(op), str(op))
        return ast.BinOp(self._tspan(op), sym, lhs, rhs)

    @v_args(meta=True)
    def neg(self, meta, children):
        return ast.Neg(self._span(meta), children[1])

    @v_args(meta=True)
    def field(self, meta, children):
        obj, name = children
        return ast.Field(self._tspan(name), obj, str(name))

    @v_args(meta=True)
    def item(self, meta, children):
        obj, idx = children
        return ast.Item(self._tspan(idx), obj, self._int(idx))

    @v_args(meta=True)
    def call(self, meta, children):
        fn, args = children
        return ast.Call(self._span(meta), fn, args or [])

    @v_args(meta=True)
    def static(self, meta, children):
        fn, args = children
        return ast.Static(self._span(meta), fn, args)

    def static_list(self, args):
        return list(args)

    @v_args(meta=True)
    def static_axis(self, meta, children):
        name, size = children
        return ast.StaticAxis(self._tspan(name), str(name), size)

    @v_args(meta=True)
    def static_rename(self, meta, children):
        src, _arrow, dst = children
        return ast.StaticRename(self._span(meta), src, dst)

    def int_lit(self, children):
        tok = children[0]
        return ast.IntLit(self._tspan(tok), self._int(tok))

    def float_lit(self, children):
        tok = children[0]
        return ast.FloatLit(self._tspan(tok), str(tok))

    def name(self, children):
        tok = children[0]
        return ast.Name(self._tspan(tok), str(tok))

    @v_args(meta=True)
    def tuple_lit(self, meta, children):
        return ast.TupleLit(self._span(meta), [c for c in children if c is not None])

    @v_args(meta=True)
    def record_lit(self, meta, children):
        fields = [(str(children[i]), children[i + 1]) for i in range(0, len(children), 2)]
        return ast.RecordLit(self._span(meta), fields)

    def arg_list(self, args):
        return [a if isinstance(a, ast.Arg) else ast.Arg(a.span, None, a) for a in args]

    @v_args(meta=True)
    def kwarg(self, meta, children):
        name, value = children
        return ast.Arg(self._tspan(name), str(name), value)
