"""A realization reaches psk-lower-to-kernel as typed module attributes (integer weights
as `{bits, over, scheme}`, never a spelling to split), which presk-opt replays from the
core dump; an entry of another shape is refused. Source positions reach the executors
as `Span`s read from MLIR locations."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stdout

from bad_input.refusal import refuse
from presk.cli.common import run_cli
from presk.cli.main import main
from presk.cli.opt import main as opt_main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINEAR = [
    os.path.join(REPO, "tutorial", "01_linear.psk"),
    *("--entry", "Linear{3, 2}.apply", "--dim", "batch=4"),
]
INT4 = "@" + os.path.join(REPO, "test", "lit", "kernel", "Inputs", "int4.json")
# every parameter as kernels read it: the bias in the record's default type, w as int4
WEIGHTS = '{b = "f32", w = {bits = 4 : i64, over = -2 : i64, scheme = "absmax"}}'


def _stdout(tool, argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert run_cli(tool, [str(a) for a in argv]) == 0
    return out.getvalue()


def _dump(stage: str) -> str:
    return _stdout(main, ["dump", *LINEAR, "--realize", INT4, "--stage", stage, "--format", "mlir"])


def _pipeline(kernel_dump: str) -> str:
    """The pipeline a kernel dump's header names."""
    line = next(x for x in kernel_dump.splitlines() if "presk-opt --pass-pipeline=" in x)
    return line.split("--pass-pipeline=", 1)[1].strip("'")


def test_integer_weights_reach_the_lowering_as_typed_attributes(tmp_path):
    core, kernel = _dump("core"), _dump("kernel")
    assert f"psk_kernel.params = {WEIGHTS}" in core.splitlines()[0]
    assert "psk_kernel.quant = [{bits = 4 : i64, extent = 2 : i64, input = 1 : i64" in kernel
    (tmp_path / "core.mlir").write_text(core)
    replayed = _stdout(opt_main, [tmp_path / "core.mlir", f"--pass-pipeline={_pipeline(kernel)}"])
    dumped = "".join(x for x in kernel.splitlines(keepends=True) if not x.startswith("//"))
    assert replayed == dumped


def test_a_parameter_read_as_neither_a_type_nor_weights_is_refused(tmp_path):
    core = _dump("core").replace(f"psk_kernel.params = {WEIGHTS}", "psk_kernel.params = {w = 4}")
    (tmp_path / "core.mlir").write_text(core)
    refuse(
        [tmp_path / "core.mlir", "--pass-pipeline=builtin.module(psk-lower-to-kernel)"],
        tool="presk-opt",
        code="E0001",
        says="parameter w is read as 4 : i64",
    )


def test_op_positions_are_spans_of_the_source():
    from presk import api
    from presk.errors import Span

    core = api.load(LINEAR[0]).elaborate("Linear{3, 2}.apply", dims={"batch": 4})
    ops = core.view.entry_function.ops
    spans = [op.loc for op in ops if op.loc is not None]
    assert spans and all(isinstance(s, Span) for s in spans)
    assert all(s.file.endswith("01_linear.psk") and s.line > 0 for s in spans)
