"""Malformed PSK programs and bad bindings: each is refused with its code, at its place.

Every case is a small program written to a file and given to `presk dump` as a user
would (in this process, through tests/bad_input/refusal.py): the run must exit 1 without
a traceback, and the first line of stderr must begin with `FILE:LINE:COL: error[CODE]:`
(or `error[CODE]:` for a binding with no place in the source). Lines and columns are
1-based, columns counted in characters.
"""

from __future__ import annotations

import pytest
from bad_input.refusal import refuse

AST = ("--stage", "ast")


def case(name, text, args, code, where=None, says=None):
    """One refused input; `where` is "line:col" (None: no position), `says` part of the message."""
    return pytest.param(name, text, tuple(args), code, where, says, id=name)


# A layer with a typed function, for the cases about submodules.
LAYER = """dim B
module L {
  param w : ℝ[3, 3] = zeros
  fn apply(x : ℝ[B, 3]) -> ℝ[B, 3] { x · w }
}
"""

# A module with consts, an untyped function and a typed one, for the binding cases.
BIND = """dim B
module L{In, Out} {
  param w : ℝ[In, Out] = zeros
  fn apply(x : ℝ[B, In]) -> ℝ[B, Out] {
    x · w
  }
}
fn id(x) {
  x
}
"""
L32 = ("--entry", "L{3, 2}.apply")
F = ("--entry", "f")

# One case a line: name, program, arguments, code, "line:col", part of the message.
# fmt: off
SYNTAX = [
    case("stray_character", "dim B\nfn f(x : ℝ[B]) -> ℝ[B] {\n  x $ x\n}\n", AST, "E1001", "3:5", "'$'"),
    case("unclosed_paren", "fn f(x : ℝ) -> ℝ {\n  exp((x)\n}\n", AST, "E1002", "3:1", "expected ')', ','"),
    case("extra_close_paren", "fn f(x : ℝ) -> ℝ {\n  exp(x))\n}\n", AST, "E1002", "2:9", "unexpected ')'"),
    case("unclosed_bracket", "fn f(x : ℝ[3) -> ℝ {\n  x\n}\n", AST, "E1002", "1:13"),
    case("param_without_eq", "module M {\n  param w : ℝ[3] zeros\n}\n", AST, "E1002", "2:18", "(expected '=')"),
    case("let_without_value", "fn f(x : ℝ) -> ℝ {\n  let y =\n  y\n}\n", AST, "E1002", "2:10", "unexpected end of the line"),
    case("let_without_eq", "fn f(x : ℝ) -> ℝ {\n  let y\n  y\n}\n", AST, "E1002", "2:8", "(expected '=')"),
    case("body_without_result", "fn f(x : ℝ) -> ℝ {\n  let y = x\n}\n", AST, "E1002", "3:1", "unexpected '}'"),
    case("fn_without_body", "fn f(x : ℝ) -> ℝ\n", AST, "E1002", "1:17", "(expected '[', '{')"),
    case("missing_comma", "fn f(x : ℝ, y : ℝ) -> ℝ {\n  max(x y)\n}\n", AST, "E1002", "2:9", "unexpected 'y'"),
    case("eof_inside_module", "module M {\n  param w : ℝ[3] = zeros\n", AST, "E1003", "2:25", "'fn', 'param', 'sub', '}'"),
    case("eof_inside_expression", "fn f(x : ℝ) -> ℝ {\n  x -", AST, "E1003", "2:6", "'(', '-', '{', a name, a number"),
    # Past the digits Python converts to an int (found by tests/bad_input/test_fuzz_programs.py).
    case("number_too_long", "fn f(x : ℝ) -> ℝ {\n  x * " + "9" * 5000 + "\n}\n", AST, "E1005", "2:7", "5000 digits (at most 500)"),
    case("dim_default_too_long", "dim N = " + "9" * 501 + "\n", AST, "E1005", "1:9", "501 digits"),
    # Refused while the syntax tree is built (errors raised inside lark's transformer).
    case("nat_with_two_bounds", "fn f(x : nat{3, 4}[2]) -> ℝ { 1 }\n", AST, "E2010", "1:10"),
    case("precision_twice", "precision = budget(rel_error = 0.1)\nprecision = budget(rel_error = 0.1)\n", AST, "E2002", "2:1"),
]

NAMES = [
    case("unknown_name", "fn f(x : ℝ) -> ℝ {\n  x + z\n}\n", AST, "E2001", "2:7", "'z'"),
    case("unknown_size", "fn f(x : ℝ[Q]) -> ℝ {\n  sum(x)\n}\n", AST, "E2001", "1:12", "'Q'"),
    case("unknown_module", "module M {\n  sub l = Lin{3}\n}\n", AST, "E2001", "2:11", "unknown module Lin"),
    # the adjoints' PSK-Core ops have no name in the language (docs/language.md 8.1)
    *(
        case(f"adjoint_{op}", f"fn f(x : ℝ[3], y : ℝ[3]) -> ℝ[3] {{\n  {op}(x, y)\n}}\n", ("--entry", "f"), "E2001", "2:3", f"'{op}'")
        for op in ("expand", "dot_vjp_l", "dot_vjp_r", "reduce_max_vjp", "cross_entropy_vjp", "embed_vjp")
    ),
    case("duplicate_dim", "dim B, T, B\n", AST, "E2002", "1:11", "dim B is defined twice"),
    case("duplicate_function", "fn f() -> ℝ { 1 }\nfn f() -> ℝ { 2 }\n", AST, "E2002", "2:1", "function f"),
    case("dim_and_function", "dim f\nfn f() -> ℝ { 1 }\n", AST, "E2002", "2:1", "as a dim and as a function"),
    case("duplicate_member", "module M {\n  param w : ℝ = zeros\n  fn w() -> ℝ { 1 }\n}\n", AST, "E2002", "3:3"),
    case("duplicate_argument", "fn f(x : ℝ, x : ℝ) -> ℝ { x }\n", AST, "E2002", "1:13"),
    case("submodule_const_count", "module L{In, Out} {\n  param w : ℝ[In, Out] = zeros\n}\nmodule M {\n  sub l = L{3}\n}\n", AST, "E2009", "5:11", "takes 2 consts"),
    case("unknown_member", LAYER + "module M {\n  sub l = L\n  fn f(x : ℝ[B, 3]) -> ℝ[B, 3] {\n    l.aply(x)\n  }\n}\n", AST, "E2016", "9:7"),
    case("fold_of_unstacked", LAYER + "module M {\n  sub l = L\n  fn f(x : ℝ[B, 3]) -> ℝ[B, 3] {\n    fold(l.apply, x)\n  }\n}\n", AST, "E2012", "9:12"),
    case("grad_of_param", "module M {\n  param w : ℝ = zeros\n  fn g = grad(w)\n}\n", AST, "E2014", "3:15"),
    case("unknown_initializer", "module M {\n  param w : ℝ[3] = gaussian(scale = 1)\n}\n", AST, "E2017", "2:20"),
    case("precision_kind", "precision = budget(rel = 0.1)\n", AST, "E2018", "1:1"),
    case("precision_negative", "precision = budget(rel_error = -0.5)\n", AST, "E2018", "1:32"),
    case("module_contains_itself", "module A {\n  param w : ℝ = zeros\n  sub a = A\n}\n", AST, "E2013", "3:11"),
    case("keyword_argument", "fn g(x : ℝ) -> ℝ { x }\nfn f(x : ℝ) -> ℝ {\n  g(x = x)\n}\n", AST, "E2003", "3:5"),
    case("primitive_operand_count", "fn f(x : ℝ) -> ℝ {\n  exp(x, x)\n}\n", AST, "E2003", "2:3", "exp takes 1 operand, not 2"),
    # Checked in every function, the entry's or not: calls' arities, brackets, alias forms.
    case("unreached_call_argument_count", "fn f(x) { x }\nfn g(x : ℝ) -> ℝ {\n  f(x, x, x)\n}\n", AST, "E2003", "3:3", "f takes 1 argument, not 3"),
    case("unreached_module_call_argument_count", "module M {\n  param w : ℝ = zeros\n  fn f(x) { x * w }\n  fn g(x) { f(x, x) }\n}\n", AST, "E2003", "4:13", "M.f takes 1 argument, not 2"),
    case("unreached_submodule_call_argument_count", LAYER + "module M {\n  sub l = L\n  fn f(x : ℝ[B, 3]) -> ℝ[B, 3] {\n    l.apply()\n  }\n}\n", AST, "E2003", "9:5", "L.apply takes 1 argument, not 0"),
    case("unreached_prelude_call_argument_count", "fn f(x : ℝ) -> ℝ {\n  let s = adamw.clip(x)\n  x\n}\n", AST, "E2003", "2:11", "adamw.clip takes 2 arguments, not 1"),
    case("unreached_grad_call_argument_count", "fn k(x : ℝ) -> ℝ { x }\nfn g(x : ℝ) -> ℝ {\n  grad(k)(x, x)\n}\n", AST, "E2003", "3:3", "grad(k) takes 1 argument, not 2"),
    case("unreached_vjp_call_argument_count", "fn k(x : ℝ) -> ℝ { x }\nfn g(x : ℝ) -> ℝ {\n  k.vjp(x)\n}\n", AST, "E2003", "3:3", "k.vjp takes 2 arguments"),
    case("unreached_alias_call_argument_count", "fn k(x : ℝ) -> ℝ { x }\nfn kv = k.vjp\nfn g(x : ℝ) -> ℝ {\n  kv(x).0\n}\n", AST, "E2003", "4:3", "kv takes 2 arguments, not 1"),
    case("unreached_fold_of_two_argument_function", "dim B\nmodule L {\n  param w : ℝ = zeros\n  fn apply(x, y) { x * w }\n}\nmodule M {\n  sub s = stack{2} L\n  fn f(x : ℝ[B]) -> ℝ[B] { fold(s.apply, x) }\n}\n", AST, "E2003", "8:28", "fold calls L.apply with one argument"),
    case("unreached_brackets_on_primitive", "fn f(x : ℝ) -> ℝ {\n  exp[0](x)\n}\n", AST, "E2010", "2:3", "exp takes no arguments in [ ]"),
    case("unreached_brackets_on_fold", LAYER + "module M {\n  sub s = stack{2} L\n  fn f(x : ℝ[B, 3]) -> ℝ[B, 3] {\n    fold[0](s.apply, x)\n  }\n}\n", AST, "E2010", "9:5", "fold takes no arguments in [ ]"),
    case("alias_of_function", "fn g(x : ℝ) -> ℝ { x }\nfn h = g\n", AST, "E2014", "2:8", "grad(f) or f.vjp"),
    case("alias_of_member_function", "module M {\n  param w : ℝ = zeros\n  fn f(x) { x * w }\n  fn h = exp\n}\n", AST, "E2014", "4:10", "grad(f) or f.vjp"),
    case("alias_of_grad_applied", "fn g(x : ℝ) -> ℝ { x }\nfn h = grad(g)(1.0)\n", AST, "E2014", "2:8", "grad(f) or f.vjp"),
]

TYPING = [
    case("broadcast_axis_names", "fn f(x : ℝ[a: 2, b: 3], y : ℝ[a: 2, c: 3]) -> ℝ[a: 2, b: 3] {\n  x + y\n}\n", F, "E2004", "2:5"),
    case("broadcast_axis_sizes", "fn f(x : ℝ[a: 2, b: 3], y : ℝ[b: 4]) -> ℝ[a: 2, b: 3] {\n  x * y\n}\n", F, "E2004", "2:5", "axis b has size 3"),
    case("dot_sizes", "module L{In, Out} {\n  param w : ℝ[In, Out] = zeros\n  fn apply(x : ℝ[n: 2, 4]) -> ℝ[n: 2, Out] {\n    x · w\n  }\n}\n", L32, "E2004", "4:7"),
    case("dot_of_tuple", "fn f(x : ℝ[3]) -> ℝ[3] {\n  x · (x, x)\n}\n", F, "E2006", "2:7", "dot takes tensors"),
    case("ein_positional_axis", "fn f(x : ℝ[a: 2, 3], y : ℝ[a: 2, b: 3]) -> ℝ[a: 2] {\n  ein[a](x, y)\n}\n", F, "E2004", "2:3", "positional"),
    case("ein_axis_in_one_operand", "fn f(x : ℝ[a: 2, b: 3], y : ℝ[b: 3, c: 4]) -> ℝ[c: 4] {\n  ein[c](x, y)\n}\n", F, "E2004", "2:3", "one operand only"),
    case("softmax_mask_misfit", "dim T\nfn f(s : ℝ[i: T, j: T]) -> ℝ[i: T, j: T] {\n  softmax[j](s, causal_mask[i: T, k: T])\n}\n", (*F, "--dim", "T=4"), "E2004", "3:3", "the mask bool[i: 4, k: 4] does not fit"),
    case("cross_entropy_targets", "fn f(l : ℝ[n: 2, v: 5], t : nat{5}[m: 2]) -> ℝ[n: 2] {\n  cross_entropy[v](l, t)\n}\n", F, "E2004", "2:3", "targets"),
    case("split_heads_not_dividing", "fn f(x : ℝ[s: 4, 6]) -> ℝ {\n  let h = split_heads[4](x)\n  sum(h)\n}\n", F, "E2004", "2:11", "divisible by 4"),
    case("merge_heads_axes", "fn f(x : ℝ[s: 4, 6]) -> ℝ[s: 4, 6] {\n  merge_heads(x)\n}\n", F, "E2004", "2:3"),
    case("wrong_return_type", "fn f(x : ℝ[a: 2]) -> ℝ[a: 3] {\n  x\n}\n", F, "E2008", "1:22"),
    case("wrong_argument_type", "fn g(x : ℝ[a: 2]) -> ℝ[a: 2] { x }\nfn f(x : ℝ[a: 3]) -> ℝ[a: 3] {\n  let y = g(x)\n  x\n}\n", F, "E2008", "3:11"),
    case("function_argument_count", "fn g(x : ℝ) -> ℝ { x }\nfn f(x : ℝ) -> ℝ {\n  g(x, x)\n}\n", F, "E2003", "3:3", "g takes 1 argument, not 2"),
    case("size_not_whole", "module M{D, H} {\n  param w : ℝ[D / H] = zeros\n  fn f() -> ℝ { sum(w) }\n}\n", ("--entry", "M{6, 4}.f"), "E2011", "2:17", "6 / 4"),
    case("size_too_large", "fn f(x : ℝ[99999999999999999999]) -> ℝ {\n  sum(x)\n}\n", F, "E2010", "1:12", "too large"),
    case("nat_bound_zero", "fn f(x : nat{0}[3]) -> ℝ {\n  sum(x)\n}\n", F, "E2010", "1:14", "at least 1, not 0"),
    case("nat_bound_zero_reached", "module M{V} {\n  param w : ℝ = zeros\n  fn g(t : nat{V - 1}[2]) -> ℝ { sum(t) }\n  fn f(t : nat[2]) -> ℝ { g(t) }\n}\n", ("--entry", "M{1}.f"), "E2010", "3:18", "at least 1, not 0"),
    case("axis_twice_in_type", "fn f(x : ℝ[a: 2, a: 3]) -> ℝ {\n  sum(x)\n}\n", F, "E2004", "1:18"),
    case("rename_unknown_axis", "fn f(x : ℝ[a: 2, b: 3]) -> ℝ[a: 2, d: 3] {\n  rename[c → d](x)\n}\n", F, "E2004", "2:3", "no axis named c"),
    case("reduce_unknown_axis", "fn f(x : ℝ[a: 2, b: 3]) -> ℝ[a: 2] {\n  sum[c](x)\n}\n", F, "E2004", "2:3", "no axis named c"),
    case("stacked_function_called", LAYER + "module M {\n  sub l = stack{2} L\n  fn f(x : ℝ[B, 3]) -> ℝ[B, 3] {\n    l.apply(x)\n  }\n}\n", ("--entry", "M.f", "--dim", "B=2"), "E2012", "9:5"),
    case("tuple_into_wrong_count", "fn f(x : ℝ) -> ℝ {\n  let (p, q, r) = (x, x)\n  p\n}\n", F, "E2015", "2:3"),
    case("scale_infinite", "module M {\n  param w : ℝ = normal(scale = exp(1e10))\n  fn f() -> ℝ { w }\n}\n", ("--entry", "M.f"), "E2017", "2:32", "positive and finite, not exp(1e10)"),
]

BINDINGS = [
    case("unknown_entry", BIND, ("--entry", "nope", "--dim", "B=2"), "E3001"),
    case("malformed_entry", BIND, ("--entry", "L{3, 2", "--dim", "B=2"), "E3002"),
    case("dim_not_bound", BIND, L32, "E3003", "4:18", "give --dim B=N"),
    case("undeclared_dim", BIND, (*L32, "--dim", "B=2", "--dim", "T=3"), "E3004"),
    case("dim_zero", BIND, (*L32, "--dim", "B=0"), "E3005"),
    case("dim_not_numeric", BIND, (*L32, "--dim", "B=two"), "E3005"),
    case("dim_unicode_digit", BIND, (*L32, "--dim", "B=²"), "E3005"),
    case("dim_too_large", BIND, (*L32, "--dim", "B=99999999999999999999"), "E3005", None, "too large"),
    case("const_negative", BIND, ("--entry", "L.apply", "--dim", "B=2", "--const", "In=-1", "--const", "Out=2"), "E3005"),
    case("entry_const_zero", BIND, ("--entry", "L{0, 2}.apply", "--dim", "B=2"), "E3005"),
    case("missing_const", BIND, ("--entry", "L.apply", "--dim", "B=2", "--const", "In=3"), "E3006", None, "--const Out=N"),
    case("unknown_const", BIND, (*L32, "--dim", "B=2", "--const", "D=4"), "E3007"),
    case("const_conflicts_with_entry", BIND, (*L32, "--dim", "B=2", "--const", "In=5"), "E3007", None, "--const In=5 conflicts with entry L{3, 2}.apply, which gives In=3"),
    case("const_conflicts_with_named_entry_const", BIND, ("--entry", "L{Out, 2}.apply", "--dim", "B=2", "--const", "Out=3"), "E3007", None, "--const Out=3 conflicts with entry L{Out, 2}.apply, which gives Out=2"),
    case("entry_argument_untyped", BIND, ("--entry", "id", "--dim", "B=2"), "E3008", "8:7"),
    case("entry_const_count", BIND, ("--entry", "L{3}.apply", "--dim", "B=2"), "E3009", None, "takes 2 consts"),
]
# fmt: on

CASES = SYNTAX + NAMES + TYPING + BINDINGS


@pytest.mark.parametrize("name, text, args, code, where, says", CASES)
def test_refused(tmp_path, name, text, args, code, where, says):
    path = tmp_path / f"{name}.psk"
    path.write_text(text, encoding="utf-8")
    first = refuse(["dump", path, *args], code=code, says=says)
    head = f"{path}:{where}: error[{code}]: " if where else f"error[{code}]: "
    assert first.startswith(head), (head, first)


def test_case_names_are_unique():
    names = [p.values[0] for p in CASES]
    assert len(names) == len(set(names))
