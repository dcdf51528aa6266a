"""Giving presk bad input in-process, and judging how it answers.

A bad input must end in a refusal: exit status 1 and one line `[FILE:LINE:COL: ]error[CODE]:
message` on stderr (notes and a source excerpt may follow), never a Python traceback nor a
signal. `refuse` runs a command line inside this process, so thousands of cases take
minutes; `accept_or_refuse` does the same for a fuzzer's case, which may also succeed;
`refuse_process` runs one as a user would, for what only a process can show (a
signal from native code, a read of /dev/zero). Every case is counted, and the session's
totals are printed at the end of the test output (tests/conftest.py).
"""

from __future__ import annotations

import io
import re
import subprocess
import traceback
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout

from presk.cli import main as presk_main
from presk.cli import opt as presk_opt
from presk.cli.common import run_cli

REFUSAL = re.compile(r"^(?:.+:\d+:\d+: )?error\[E\d{4}\]: \S")
TALLY: Counter = Counter()  # "refused", "accepted", "traceback", "signal": what the suite saw
TOOLS = {"presk": presk_main.main, "presk-opt": presk_opt.main}


def _judge(
    status: int, stderr: str, code: str | None, says: str | None, may_succeed: bool = False
) -> str:
    """The error line of a refusal, or "" for a success when `may_succeed`."""
    lines = stderr.strip().splitlines()
    first = lines[0] if lines else ""
    if status < 0:
        TALLY["signal"] += 1
    elif "Traceback" in stderr:
        TALLY["traceback"] += 1
    elif may_succeed and status == 0:
        TALLY["accepted"] += 1
        return ""
    assert status == 1, (status, stderr)
    assert "Traceback" not in stderr, stderr
    assert REFUSAL.match(first), first
    if code is not None:
        assert f"error[{code}]" in first, first
    if says is not None:
        assert says in first, first
    TALLY["refused"] += 1
    return first


def refuse(argv, code: str | None = None, says: str | None = None, tool: str = "presk") -> str:
    """Run `tool argv` in this process; it must refuse with `code`. Returns the error line."""
    return _judge(*_run_in_process(tool, argv), code, says)


def accept_or_refuse(argv, tool: str = "presk") -> str:
    """Run `tool argv` in this process; it must succeed or refuse with a code, as a fuzzed
    input may. Returns the error line, or "" for a success."""
    return _judge(*_run_in_process(tool, argv), None, None, may_succeed=True)


def _run_in_process(tool: str, argv) -> tuple[int, str]:
    """(exit status, stderr) of `tool argv` run in this process; a traceback fails the test."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = run_cli(TOOLS[tool], [str(a) for a in argv])
    except BaseException:
        TALLY["traceback"] += 1
        raise AssertionError(f"{tool} {argv}: traceback\n{traceback.format_exc()}") from None
    return status, err.getvalue()


def refuse_process(
    argv, code: str | None = None, says: str | None = None, tool: str = "presk", **kwargs
) -> str:
    """Run `tool argv` as its own process (from the venv); it must refuse with `code`."""
    from conftest import BIN  # noqa: PLC0415 (tests/ is on the path when pytest runs)

    proc = subprocess.run(
        [str(BIN / tool), *map(str, argv)], capture_output=True, text=True, **kwargs
    )
    return _judge(proc.returncode, proc.stderr, code, says)
