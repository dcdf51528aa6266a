"""Programs too deep or too large: refused with a code, at the construct one level too
deep, never a RecursionError, a crash or a read without bound; and programs at each
limit (docs/language.md, section 12), which still run.

Each program is made to measure from the limit it tests, so a test fails if a limit
moves without its refusal, or if presk stops taking a program the limits allow.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr

import pytest

from bad_input.refusal import refuse, refuse_process
from presk.cli import opt
from presk.cli.common import run_cli
from presk.cli.main import main
from presk.fileio import MAX_SOURCE_BYTES
from presk.front.check import MAX_MODULE_DEPTH
from presk.front.elaborate import MAX_CALL_DEPTH, MAX_INIT_OPERATIONS
from presk.front.parser import MAX_NESTING

HEAD = "fn main(x : ℝ[3]) -> ℝ[3] { "  # the body starts at column len(HEAD) + 1


def written(tmp_path, text: str, name: str = "deep.psk") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def refused_at(argv, code: str, where: str, says: str) -> None:
    """`presk argv` refuses with `code`, its line beginning `where: `."""
    line = refuse(argv, code=code, says=says)
    assert line.startswith(f"{where}: "), line


def runs(tool, argv) -> None:
    assert run_cli(tool, [str(a) for a in argv]) == 0


# ---- expressions and types ----------------------------------------------------------------


def negations(n: int) -> str:
    return HEAD + "-" * n + "x }\n"


def tanhs(n: int) -> str:
    return HEAD + "tanh(" * n + "x" + ")" * n + " }\n"


def products(n: int) -> str:
    """`x * (x * (… * x))`: n operators, each the right operand of the one before."""
    return HEAD + "x * (" * (n - 1) + "x * x" + ")" * (n - 1) + " }\n"


def tuple_type(n: int) -> str:
    """An argument of a tuple type n deep: ((…(ℝ, ℝ)…, ℝ), ℝ)."""
    return "fn main(x : " + "(" * n + "ℝ" + ", ℝ)" * n + ") { x }\n"


# (program, the column of the construct one level too deep, what is too deep)
TOO_DEEP = {
    "negation": (negations, len(HEAD) + MAX_NESTING + 1, "expression"),
    "call": (tanhs, len(HEAD) + len("tanh(") * MAX_NESTING + 1, "expression"),
    "operator": (products, len(HEAD) + len("x * (") * MAX_NESTING + 3, "expression"),
    "tuple type": (tuple_type, len("fn main(x : ") + MAX_NESTING + 1, "type"),
}


@pytest.mark.parametrize("kind", TOO_DEEP)
def test_nesting_past_the_limit_is_refused_where_it_goes_too_deep(kind, tmp_path):
    program, col, what = TOO_DEEP[kind]
    for n in (MAX_NESTING + 1, 1000):
        path = written(tmp_path, program(n))
        says = f"{what} nested deeper than {MAX_NESTING} levels"
        refused_at(["dump", path, "--stage", "ast"], "E1004", f"{path}:1:{col}", says)


@pytest.mark.parametrize("kind", TOO_DEEP)
def test_nesting_at_the_limit_runs(kind, tmp_path):
    program, _, what = TOO_DEEP[kind]
    path = written(tmp_path, program(MAX_NESTING))
    runs(main, ["dump", path, "--stage", "ast"])
    if what == "expression":
        runs(main, ["run", path, "--entry", "main"])


def test_a_chain_of_terms_has_no_limit(tmp_path):
    """`x + x + … + x` is one level however long: the parser, the checks, the AST's text
    and the elaborator loop over it."""
    terms = " + ".join(["x", "x * x", "x - x"] * 1000)
    path = written(tmp_path, HEAD + terms + " }\n")
    runs(main, ["dump", path, "--stage", "ast"])
    runs(main, ["run", path, "--entry", "main"])


def test_a_chain_in_a_size_has_no_limit(tmp_path):
    size = " + ".join(["1"] * 2999)
    path = written(tmp_path, f"fn main(x : ℝ[{size} - 2996]) -> ℝ {{ sum(x) }}\n")
    runs(main, ["run", path, "--entry", "main"])


def test_parentheses_alone_do_not_nest(tmp_path):
    path = written(tmp_path, HEAD + "(" * 5000 + "x" + ")" * 5000 + " }\n")
    runs(main, ["run", path, "--entry", "main"])


# ---- calls, aliases and modules -----------------------------------------------------------


def call_chain(n: int, around: int = 0) -> str:
    """main calls f1, which calls f2, … fn: n calls nested, each under `around` tanh."""
    lines = [
        f"fn f{i}(x) {{ " + "tanh(" * around + f"f{i + 1}(x)" + ")" * around + " }"
        for i in range(1, n)
    ]
    return "\n".join([*lines, f"fn f{n}(x) {{ x }}", HEAD + "f1(x) }", ""])


def test_calls_past_the_limit_are_refused_at_the_call(tmp_path):
    path = written(tmp_path, call_chain(MAX_CALL_DEPTH + 1))
    col = len(f"fn f{MAX_CALL_DEPTH}(x) {{ ") + 1  # f128 calling f129, on line 128
    where = f"{path}:{MAX_CALL_DEPTH}:{col}"
    says = f"calls nested deeper than {MAX_CALL_DEPTH} levels"
    refused_at(["run", path, "--entry", "main"], "E2019", where, says)


def test_calls_at_the_limit_run(tmp_path):
    runs(main, ["run", written(tmp_path, call_chain(MAX_CALL_DEPTH)), "--entry", "main"])


def test_calls_each_under_a_deep_expression_run(tmp_path):
    """Each nesting within its limit, but the elaborator recursing through both: eight
    calls under expressions MAX_NESTING - 1 deep are past Python's 1000 frames."""
    path = written(tmp_path, call_chain(8, around=MAX_NESTING - 1))
    runs(main, ["run", path, "--entry", "main"])


def test_a_long_chain_of_aliases_is_checked_in_a_loop(tmp_path):
    n = 2000
    lines = ["fn f0(x : ℝ[3]) -> ℝ { sum(x) }"]
    lines += [f"fn f{i} = f{i - 1}.vjp" for i in range(1, n + 1)]
    lines.append(f"fn main(x : ℝ[3]) {{ f{n}(x" + ", 1.0" * n + ") }")
    runs(main, ["dump", written(tmp_path, "\n".join(lines) + "\n"), "--stage", "ast"])


def module_chain(n: int) -> str:
    """M1 holds a sub of M2, … of Mn: modules n deep, four lines each."""
    out = []
    for i in range(1, n):
        sig = "(x : ℝ[3]) -> ℝ[3]" if i == 1 else "(x)"
        out.append(f"module M{i} {{\n  sub s = M{i + 1}\n  fn apply{sig} {{ s.apply(x) }}\n}}")
    out.append(f"module M{n} {{\n  param w : ℝ[3] = ones\n  fn apply(x) {{ x * w }}\n}}")
    return "\n".join(out) + "\n"


def test_modules_past_the_limit_are_refused_at_the_sub(tmp_path):
    path = written(tmp_path, module_chain(MAX_MODULE_DEPTH + 1))
    line = 4 * (MAX_MODULE_DEPTH - 1) + 2  # `sub s = M33` in module M32
    says = f"modules nested deeper than {MAX_MODULE_DEPTH} levels"
    refused_at(["dump", path, "--stage", "ast"], "E2019", f"{path}:{line}:11", says)


def test_modules_at_the_limit_run(tmp_path):
    path = written(tmp_path, module_chain(MAX_MODULE_DEPTH))
    runs(main, ["run", path, "--entry", "M1.apply"])


def initializer(operations: int) -> str:
    scale = " * ".join(["1"] * (operations + 1))
    return f"module M {{\n  param w : ℝ[3] = normal(scale = {scale})\n  fn f(x : ℝ[3]) -> ℝ[3] {{ x * w }}\n}}\n"


def test_an_initializer_past_its_operations_is_refused(tmp_path):
    path = written(tmp_path, initializer(MAX_INIT_OPERATIONS + 1))
    says = f"more than {MAX_INIT_OPERATIONS} operations"
    refused_at(["run", path, "--entry", "M.f"], "E2017", f"{path}:2:27", says)
    path = written(tmp_path, initializer(3000))  # Python's parser would fail on its text
    refused_at(["run", path, "--entry", "M.f"], "E2017", f"{path}:2:27", says)


def test_an_initializer_at_its_operations_runs(tmp_path):
    runs(main, ["run", written(tmp_path, initializer(MAX_INIT_OPERATIONS)), "--entry", "M.f"])


# ---- the source itself --------------------------------------------------------------------


def test_an_endless_source_is_read_only_to_the_cap():
    refuse(["dump", "/dev/zero"], code="E0002", says="cannot read /dev/zero: larger than")


def test_a_program_past_the_cap_is_refused(tmp_path):
    path = written(tmp_path, HEAD + "x }\n" + "#" * MAX_SOURCE_BYTES)
    refuse(["dump", path], code="E0002", says=f"cannot read {path}: larger than 1 MiB")


def test_a_directory_is_refused(tmp_path):
    refuse(["dump", tmp_path], code="E0002", says=f"cannot read {tmp_path}: Is a directory")


def test_a_source_not_utf8_is_refused(tmp_path):
    path = tmp_path / "binary.psk"
    path.write_bytes(b"fn main(x) { x }\n\xff\xfe")
    refuse(["dump", path], code="E0002", says="not UTF-8 text (byte 17)")


# ---- presk-opt ----------------------------------------------------------------------------


def modules(n: int) -> str:
    return "module {" * n + "}" * n + "\n"


def test_presk_opt_refuses_nesting_that_would_crash_mlir(tmp_path):
    """MLIR's parser recurses in C++ and dies of a signal at a few thousand modules."""
    path = written(tmp_path, modules(5000), "deep.mlir")
    col = len("module {") * opt.MAX_NESTING + 8  # the `{` of the first module too deep
    line = refuse_process([path], code="E1004", tool="presk-opt", says="MLIR nested deeper")
    assert line.startswith(f"{path}:1:{col}: "), line


def test_presk_opt_takes_nesting_at_the_limit(tmp_path):
    runs(opt.main, [written(tmp_path, modules(opt.MAX_NESTING), "deep.mlir")])


def test_presk_opt_counts_no_bracket_of_a_string_or_comment(tmp_path):
    text = f'// {"(" * 1000}\nmodule attributes {{test.a = "{"{" * 1000}"}} {{}}\n'
    runs(opt.main, [written(tmp_path, text, "strings.mlir")])


def test_presk_opt_refuses_bytes_not_utf8(tmp_path):
    path = tmp_path / "binary.mlir"
    path.write_bytes(b"module {}\n\x80")
    refuse([path], code="E0002", tool="presk-opt", says="not UTF-8 text (byte 10)")


@pytest.mark.parametrize("path", ["/dev/zero", "/"])
def test_presk_opt_refuses_an_endless_device_or_a_directory(path):
    refuse([path], code="E0002", tool="presk-opt", says=f"cannot read {path}: ")


def test_an_error_on_a_long_line_shows_a_short_excerpt(tmp_path):
    path = tmp_path / "long.psk"
    path.write_text("fn f(x : ℝ) -> ℝ { " + "x + " * 3000 + "y }\n")
    first = refuse(["dump", path, "--entry", "f"], code="E2001", says=":1:12020:")
    assert "unknown name 'y'" in first
    out = io.StringIO()
    with redirect_stderr(out):
        assert run_cli(main, ["dump", str(path), "--entry", "f"]) == 1
    shown, caret = out.getvalue().splitlines()[1:3]
    assert len(shown) < 120 and shown[caret.index("^")] == "y"
