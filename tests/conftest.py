"""Shared test helpers: running presk's command lines as a user would."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from contextlib import chdir, redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import pytest
from bad_input.refusal import TOOLS

from presk.cli.common import run_cli

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def bench_script(name: str):
    """The script `bench/NAME.py` imported as a module (it is no package), registered in
    `sys.modules` first, as its dataclasses need."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_tool(tool: str, *args: str, stdin: str | None = None, cwd: Path | None = None):
    """Run `presk` or `presk-opt` from the venv; returns the CompletedProcess (text)."""
    return subprocess.run(
        [str(BIN / tool), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def run_in_process(tool: str, *args: str, stdin: str | None = None):
    """Run `presk` or `presk-opt` inside this process, in the repository as `run_tool`
    runs it, with what `run_tool` gives: the CompletedProcess (text). A new process spends
    a second importing MLIR; a command line is worth one only where the process is the
    point (the installed script, stdin, a signal)."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    stdin_stream = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    with (
        chdir(REPO),
        redirect_stdout(out),
        redirect_stderr(err),
        mock.patch.object(sys, "stdin", stdin_stream),
    ):
        try:
            status = run_cli(TOOLS[tool], argv)
        except SystemExit as e:  # argparse's --help and --version
            status = e.code or 0
    return subprocess.CompletedProcess([tool, *argv], status, out.getvalue(), err.getvalue())


def assert_user_error(proc, code: str | None = None, where: str | None = None) -> str:
    """A refused input: exit 1, no traceback, the code and position on the first line."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    first = proc.stderr.strip().splitlines()[0]
    if code is not None:
        assert f"error[{code}]" in first, first
    if where is not None:
        assert where in first, first
    return first


@pytest.fixture
def repo() -> Path:
    return REPO


def pytest_sessionfinish(session):
    """An xdist worker hands its bad-input counts to the controller, which prints them."""
    from bad_input.refusal import TALLY

    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["bad_input"] = dict(TALLY)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    from bad_input.refusal import TALLY

    TALLY.update(getattr(node, "workeroutput", {}).get("bad_input", {}))


def pytest_terminal_summary(terminalreporter):
    """The bad-input suite's count, so a run shows how many refusals it checked."""
    from bad_input.refusal import TALLY

    if TALLY:
        terminalreporter.write_line(
            f"bad input: {TALLY['refused']} refused with a code, {TALLY['accepted']} accepted, "
            f"{TALLY['traceback']} tracebacks, {TALLY['signal']} signals"
        )
