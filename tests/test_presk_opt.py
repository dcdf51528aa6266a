"""presk-opt as a user meets it: errors, output files, and agreement with upstream mlir-opt."""

import subprocess

from conftest import assert_user_error, run_in_process, run_tool

from presk.ir.context import dialect_path
from presk.toolchain import mlir_tool

GOOD = """func.func @f(%x: !psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]> {
  %0 = "psk.exp"(%x) {psk.site = "f/%0"} : (!psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  return %0 : !psk.real<array<i64: 3>, [""]>
}
"""


def test_malformed_input_is_one_located_line(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  %x = \n}\n")
    first = assert_user_error(
        run_in_process("presk-opt", str(bad)), where=f"{bad}:2:7: error: expected operation name"
    )
    assert first.count("error") == 1


def test_stdin_is_named_stdin():
    # The installed script, reading a real stdin.
    assert_user_error(run_tool("presk-opt", stdin="func.func @f( {"), where="<stdin>:1:")


def test_missing_file_and_bad_flag():
    assert_user_error(
        run_in_process("presk-opt", "/no/such/file.mlir"), where="cannot read /no/such/file.mlir"
    )
    assert_user_error(run_in_process("presk-opt", "--no-such-flag"), where="unrecognized arguments")


def test_output_file_is_left_alone_when_the_input_fails(tmp_path):
    out = tmp_path / "out.mlir"
    out.write_text("precious\n")
    proc = run_in_process("presk-opt", "-o", str(out), stdin="func.func @f( {")
    assert_user_error(proc)
    assert out.read_text() == "precious\n"
    assert run_in_process("presk-opt", "-o", str(out), stdin=GOOD).returncode == 0
    assert '"psk.exp"' in out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["out.mlir"], "temporary file left behind"


def test_upstream_mlir_opt_parses_what_presk_opt_prints():
    printed = run_in_process("presk-opt", "--pass-pipeline=builtin.module(psk-verify)", stdin=GOOD)
    assert printed.returncode == 0, printed.stderr
    upstream = subprocess.run(
        [mlir_tool("mlir-opt"), f"--irdl-file={dialect_path('psk.irdl.mlir')}"],
        input=printed.stdout,
        capture_output=True,
        text=True,
    )
    assert upstream.returncode == 0, upstream.stderr
    assert upstream.stdout.strip() == printed.stdout.strip()


def test_a_failing_python_pass_is_located_and_exits_1():
    src = GOOD.replace(' {psk.site = "f/%0"}', "")
    proc = run_in_process("presk-opt", "--pass-pipeline=builtin.module(psk-verify)", stdin=src)
    assert_user_error(proc, where="<stdin>:2:8: error: psk-verify: 'psk.exp' has no psk.site")


def test_list_passes_shows_each_option_with_its_default():
    proc = run_in_process("presk-opt", "--list-passes")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    tile = lines.index(next(line for line in lines if line.split()[:1] == ["psk-tile"]))
    options = [line.split() for line in lines[tile + 1 : tile + 4]]
    assert options == [
        ["--nest=<string>", "(default", '"")'],
        ["--m=<int>", "(default", "1)"],
        ["--n=<int>", "(default", "8)"],
    ]
    dce = lines.index(next(line for line in lines if line.split()[:1] == ["psk-dce"]))
    assert not lines[dce + 1].lstrip().startswith("--")  # a pass without options lists none
