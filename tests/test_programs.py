"""Every shipped program checks, and elaborates at the sizes its header gives into
PSK-Core that verifies (IRDL and psk-verify) and parses in upstream mlir-opt."""

from __future__ import annotations

import subprocess

import pytest
from programs import PROGRAMS, entries, runs

import presk
from presk.ir.context import dialect_path
from presk.pipeline import parse_pipeline
from presk.toolchain import mlir_tool


def test_every_program_has_a_run_line():
    assert PROGRAMS
    for p in PROGRAMS:
        assert runs(p), f"{p} has no '# run:' header line"


def bindings(args: list[str]) -> dict:
    """A `# run:` line's `--entry E --dim N=8 --const D=4 …` as `elaborate`'s arguments."""
    out = {"entry": None, "dims": {}, "consts": {}}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag == "--entry":
            out["entry"] = value
        else:
            name, _, size = value.partition("=")
            out[{"--dim": "dims", "--const": "consts"}[flag]][name] = int(size)
    return out


@pytest.mark.parametrize("path,args", entries(), ids=lambda x: x if isinstance(x, str) else None)
def test_entry_elaborates_and_verifies(path, args):
    module = presk.load(path).elaborate(**bindings(args)).module
    assert module.operation.verify()
    with module.context:
        parse_pipeline("builtin.module(psk-verify)").pass_manager(module.context).run(
            module.operation
        )
    upstream = subprocess.run(
        [mlir_tool("mlir-opt"), f"--irdl-file={dialect_path('psk.irdl.mlir')}"],
        input=str(module),
        capture_output=True,
        text=True,
    )
    assert upstream.returncode == 0, upstream.stderr
