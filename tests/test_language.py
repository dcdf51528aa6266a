"""PSK programs the language reference says are accepted, and what presk makes of them:
bindings that agree, one-item tuple types, stacks of stacks, initializer text, the core
text of lifted operations, and the flags `presk dump` refuses."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from conftest import REPO, assert_user_error, run_in_process
from programs import program_of, reference_run

from presk.runtime.synth import eval_const

LINEAR = REPO / "tutorial" / "01_linear.psk"


def dump(path, *args: str) -> str:
    proc = run_in_process("presk", "dump", str(path), *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def write(tmp_path, text: str, name: str = "p.psk"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---- bindings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, consts",
    [
        ("Linear{3, 2}.apply", ["--const", "In=3"]),
        ("Linear{3, 2}.apply", ["--const", "In=3", "--const", "Out=2"]),
        ("Linear{In, 2}.apply", ["--const", "In=3"]),
        ("Linear.apply", ["--const", "In=3", "--const", "Out=2"]),
    ],
)
def test_entry_consts_and_const_flags_that_agree(entry, consts):
    out = dump(LINEAR, "--entry", entry, "--dim", "batch=4", *consts)
    assert "fn Linear{3, 2}.apply(params : {w: ℝ[3, 2], b: ℝ[2]}" in out


def test_a_conflicting_const_is_refused_not_ignored():
    proc = run_in_process(
        "presk",
        "dump",
        str(LINEAR),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--const",
        "In=5",
    )
    first = assert_user_error(proc, code="E3007")
    assert "In=5" in first and "In=3" in first


# ---- types -------------------------------------------------------------------------------

ONE_TUPLE = """dim B
fn f(x : (ℝ[B, 3],), y : (ℝ, nat{4}[B])) -> (ℝ[B],) {
  (sum[-1](x.0) + y.0 * y.1,)
}
"""


def test_one_item_tuple_types(tmp_path):
    path = write(tmp_path, ONE_TUPLE)
    out = dump(path, "--entry", "f", "--dim", "B=2")
    assert out.splitlines()[1] == ("fn f(x : (ℝ[B: 2, 3],), y : (ℝ, nat[B: 2])) -> (ℝ[B: 2],) {")
    # the syntax tree prints the type back as written, and that text parses to itself
    ast_text = dump(path, "--stage", "ast")
    assert "fn f(x : (ℝ[B, 3],), y : (ℝ, nat{4}[B])) -> (ℝ[B],) {" in ast_text
    again = write(tmp_path, ast_text, "again.psk")
    assert dump(again, "--stage", "ast") == ast_text


def test_a_nat_bound_of_one_is_accepted(tmp_path):
    path = write(tmp_path, "fn f(t : nat{1}[3]) -> ℝ {\n  sum(t)\n}\n")
    dump(path, "--entry", "f")


# ---- stacks of stacks ----------------------------------------------------------------------

NESTED = """dim B

module Leaf{D} {
  param w : ℝ[D, D] = normal(scale = 1 / sqrt(D))
  param b : ℝ[D] = normal(scale = 0.5)

  fn apply(x : ℝ[B, D]) -> ℝ[B, D] {
    tanh(x · w + b)
  }
}

module Middle{D} {
  sub s = stack{3} Leaf{D}
  param g : ℝ[D] = normal(scale = 1)

  fn apply(x : ℝ[B, D]) -> ℝ[B, D] {
    fold(s.apply, x) * g
  }
}

module Outer{D} {
  sub inner = stack{2} Middle{D}

  fn apply(x : ℝ[B, D]) -> ℝ[B, D] {
    fold(inner.apply, x)
  }
}
"""
NESTED_ARGS = ("--entry", "Outer{4}.apply", "--dim", "B=2")


def _nested_expected(params, x):
    """Outer.apply in float64: two Middle layers, each folding three Leaf layers."""
    inner = params["inner"]
    w, b = (np.asarray(inner["s"][k].data, dtype=np.float64) for k in ("w", "b"))
    g = np.asarray(inner["g"].data, dtype=np.float64)
    assert w.shape == (2, 3, 4, 4) and b.shape == (2, 3, 4) and g.shape == (2, 4)
    for i in range(2):
        for j in range(3):
            x = np.tanh(x @ w[i, j] + b[i, j])
        x = x * g[i]
    return x


def test_a_stack_of_stacks_dumps_and_runs(tmp_path):
    path = write(tmp_path, NESTED)
    out = dump(path, *NESTED_ARGS)
    assert "params : {inner: {s: {w: ℝ[2, 3, 4, 4], b: ℝ[2, 3, 4]}, g: ℝ[2, 4]}}" in out
    assert "%c0 = fold Middle{4}.apply(params.inner, x) : ℝ[B: 2, 4]" in out
    assert "%c0 = fold Leaf{4}.apply(params.s, x) : ℝ[B: 2, 4]" in out
    mlir = dump(path, *NESTED_ARGS, "--format", "mlir")
    for leaf in ("inner.s.w", "inner.s.b", "inner.g"):
        assert f'path = "{leaf}"' in mlir

    program = program_of(path, "Outer{4}.apply", {"B": 2})
    params, args, y = reference_run(program, bits=128)
    x = np.asarray(args[0].data, dtype=np.float64)
    want = _nested_expected(params, x)
    assert np.allclose(np.asarray(y.data, dtype=np.float64), want, rtol=1e-12, atol=1e-14)

    npz = tmp_path / "y.npz"
    proc = run_in_process(
        "presk", "run", str(path), *NESTED_ARGS, "--backend", "interp", "--out", str(npz)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "ℝ[B: 2, 4]"
    assert np.allclose(np.load(npz)["output"], want, rtol=1e-12, atol=1e-14)


# ---- initializer text ----------------------------------------------------------------------

INITS = """module M{In, Out} {
  param a : ℝ[In] = uniform(scale = sqrt(6 / (In + Out)))
  param b : ℝ[In] = normal(scale = ((1 / sqrt(In))))
  param c : ℝ[In] = normal(scale = -(1 - 2 * In) / (3 - (1 - In)) * exp(1 - 1 / In))
  param d : ℝ[In] = normal(scale = (Out - 1) - 1 + (In * Out) / (2 * In) * log(In + 1))
  param e : ℝ[In] = normal(0.02)
  fn f() -> ℝ { sum(a) }
}
"""
WANT_INITS = {
    "a": ("sqrt(6 / (4 + 4))", math.sqrt(6 / 8)),
    "b": ("1 / sqrt(4)", 0.5),
    "c": ("-(1 - 2 * 4) / (3 - (1 - 4)) * exp(1 - 1 / 4)", 7 / 6 * math.exp(0.75)),
    "d": ("4 - 1 - 1 + 4 * 4 / (2 * 4) * log(4 + 1)", 2 + 2 * math.log(5)),
    "e": ("0.02", 0.02),
}


def test_initializer_text_has_minimal_parentheses_and_its_value(tmp_path):
    path = write(tmp_path, INITS)
    mlir = dump(path, "--entry", "M{4, 4}.f", "--format", "mlir")
    found = dict(re.findall(r'path = "(\w+)", scale = "([^"]*)"', mlir))
    assert found == {k: text for k, (text, _) in WANT_INITS.items()}
    for text, value in WANT_INITS.values():
        assert eval_const(text) == pytest.approx(value, rel=1e-15)


# ---- the core text -------------------------------------------------------------------------

LIFTED = """dim N
fn sgd(p, g) {
  p - 0.1 * g
}
fn parts(x : ℝ[N], y : ℝ[N]) -> ℝ[N] {
  let r = {a = x, b = y}
  let t = (x, y)
  r.b * (x, y).0 + t.1
}
module M {
  param w : ℝ[3] = zeros
  param b : ℝ = zeros
  fn step() -> {w: ℝ[3], b: ℝ} {
    2 * sgd({w = w, b = b}, {w = w, b = b})
  }
}
"""


def test_core_text_reads_parts_of_records_and_tuples_built_in_place(tmp_path):
    path = write(tmp_path, LIFTED)
    step = dump(path, "--entry", "M.step", "--dim", "N=2")
    assert "}." not in step and ").0" not in step
    sgd = step[step.index("fn sgd(") :]
    assert "%1 = mul %0, g.w : ℝ[3]" in sgd
    assert "%3 = sub p.w, %1 : ℝ[3]" in sgd
    assert "return {w = %3, b = %4}" in sgd
    assert "mul %0, %c0.w : ℝ[3]" in step
    parts = dump(path, "--entry", "parts", "--dim", "N=2")
    assert parts.splitlines()[2:5] == [
        "  %0 = mul y, x : ℝ[N: 2]",
        "  %1 = add %0, y : ℝ[N: 2]",
        "  return %1",
    ]


def test_dump_refuses_mlir_format_of_the_syntax_tree():
    proc = run_in_process("presk", "dump", str(LINEAR), "--stage", "ast", "--format", "mlir")
    first = assert_user_error(proc)
    assert "--format mlir" in first and "--stage" in first
    ok = run_in_process("presk", "dump", str(LINEAR), "--stage", "ast", "--format", "text")
    assert ok.returncode == 0 and ok.stdout.startswith("dim batch")
