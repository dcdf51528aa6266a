"""Progress on slow work (presk/progress.py): one stderr line after a second, cleared at
the end, drawn only on a terminal (or when PRESK_PROGRESS=1 forces it); where stderr is
not a terminal, a line for each phase of a long precision command with its time; and the
counts the mlir backend and the reference report."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from presk import api, progress
from presk.backends.interp import applications
from presk.backends.native import Compiler
from presk.errors import UsageError
from presk.progress import Progress

LINEAR = ("tutorial/01_linear.psk", "Linear{3, 2}.apply", {"batch": 4})
MINIGPT = ("tutorial/05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.loss", {"B": 1, "T": 4})
REPO = Path(__file__).resolve().parent.parent


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_is_drawn_counted_and_cleared(monkeypatch):
    monkeypatch.setenv("PRESK_PROGRESS", "1")  # on, though a StringIO is no terminal
    out = io.StringIO()
    with Progress("compiling kernels", 3, stream=out, delay=0) as p:
        for _ in range(3):
            p.advance()
    text = out.getvalue()
    assert text.startswith("\rcompiling kernels 1/3  0.0 s\x1b[K")
    assert "\rcompiling kernels 3/3  0.0 s\x1b[K" in text  # the last count is always drawn
    assert text.endswith("\x1b[K\r\x1b[K")  # cleared once done


def test_nothing_is_drawn_in_the_first_second(monkeypatch):
    monkeypatch.setenv("PRESK_PROGRESS", "1")
    quick = io.StringIO()
    with Progress("quick", 2, stream=quick) as p:
        p.advance(2)
    assert quick.getvalue() == ""


def test_the_innermost_progress_draws_and_the_outer_returns_after_it(monkeypatch):
    monkeypatch.setenv("PRESK_PROGRESS", "1")
    line = io.StringIO()
    with Progress("training", 2, stream=line, delay=0) as outer:
        with Progress("compiling kernels", 1, stream=line, delay=0) as inner:
            outer.advance(detail="hidden")
            inner.advance()
        outer.advance(detail="step 2/2")
    drawn = line.getvalue()
    assert "hidden" not in drawn
    assert drawn.index("compiling kernels 1/1") < drawn.index("training step 2/2")
    assert drawn.endswith("\r\x1b[K")


def test_clear_erases_the_line_for_a_printed_one(monkeypatch):
    monkeypatch.setenv("PRESK_PROGRESS", "1")
    line = io.StringIO()
    with Progress("training", stream=line, delay=0, enabled=True) as p:
        p.advance(detail="step 1")
        p.clear()
        assert line.getvalue().endswith("step 1\x1b[K\r\x1b[K")
    with Progress("quiet", stream=line, delay=0, enabled=False) as p:
        p.advance(detail="never")
    assert "never" not in line.getvalue()


def test_a_terminal_gets_the_line_unless_presk_progress_is_0(monkeypatch):
    monkeypatch.delenv("PRESK_PROGRESS", raising=False)
    for setting, drawn in ((None, True), ("0", False)):
        if setting is not None:
            monkeypatch.setenv("PRESK_PROGRESS", setting)
        tty = Terminal()
        with Progress("reference: op", 900, stream=tty, delay=0) as p:
            p.advance(120)
        assert ("reference: op 120/900" in tty.getvalue()) is drawn, setting


def test_a_bad_presk_progress_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("PRESK_PROGRESS", "yes")
    with pytest.raises(UsageError, match="PRESK_PROGRESS=yes"), Progress("x", stream=Terminal()):
        pass


def test_a_process_whose_stderr_is_not_a_terminal_gets_no_line():
    script = (
        "from presk.progress import Progress\n"
        "with Progress('sweep: layout', 2, delay=0) as p:\n"
        "    p.advance(); p.advance()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PRESK_PROGRESS"}
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == ""
    forced = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**env, "PRESK_PROGRESS": "1"},
    )
    assert "sweep: layout 2/2" in forced.stderr and forced.stdout == ""


def test_a_phase_writes_one_line_with_its_time_where_stderr_is_no_terminal(monkeypatch):
    monkeypatch.delenv("PRESK_PROGRESS", raising=False)
    log = io.StringIO()
    with Progress("presk solve: sensitivity sweep", stream=log, delay=0, phase=True) as p:
        p.advance()  # drawn in place only on a terminal
    assert re.fullmatch(r"presk solve: sensitivity sweep \.\.\. \d+\.\d s\n", log.getvalue())
    took = p.elapsed
    time.sleep(0.01)
    assert p.elapsed == took  # its time stopped with it
    quiet = io.StringIO()
    with Progress("not a phase", stream=quiet, delay=0) as p:
        p.advance()
    with Progress("quick", stream=quiet, phase=True):  # under a second: nothing to say
        pass
    with pytest.raises(KeyError), Progress("failed", stream=quiet, delay=0, phase=True):
        raise KeyError("the error says why")
    monkeypatch.setenv("PRESK_PROGRESS", "0")
    with Progress("off", stream=quiet, delay=0, phase=True):
        pass
    assert quiet.getvalue() == ""


def test_a_phase_on_a_terminal_is_the_line_drawn_in_place(monkeypatch):
    monkeypatch.delenv("PRESK_PROGRESS", raising=False)
    tty = Terminal()
    with Progress("presk calibrate: samples", 2, stream=tty, delay=0, phase=True) as p:
        p.advance()
    assert tty.getvalue() == "\rpresk calibrate: samples 1/2  0.0 s\x1b[K\r\x1b[K"


# the precision commands as a user pipes them, each phase logged however short it is
PIPED = """
import sys
from presk import progress
progress.DELAY = 0
from presk.cli.main import main
env, out = sys.argv[1:]
program = ["tests/train/mlp_regression.psk", "--entry", "Regression.loss", "--dim", "N=4"]
common = ["--bits", "64", "--samples", "2", "--workers", "1"]
assert main(["calibrate", "--precision", *program, *common, "--out", env]) == 0
solve = ["--precision", env, "--budget", "1e-3", "--workers", "1", "--out", out]
assert main(["solve", *program, *solve]) == 0
check = ["--measure", "--backend", "kernel", "--sites", "0"]
assert main(["check", "--precision", env, *program, *check]) == 0
assert main(["bisect", *program, "--realize", "bf16", "--bits", "64"]) == 0
"""


def test_the_precision_commands_log_their_phases_when_piped(tmp_path):
    def piped(**env) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-c", PIPED, str(tmp_path / "env.json"), str(tmp_path / "r.json")]
        base = {k: v for k, v in os.environ.items() if k != "PRESK_PROGRESS"}
        done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env={**base, **env})
        assert done.returncode == 0, done.stderr
        return done

    done = piped()
    phases = [re.fullmatch(r"(.*) \.\.\. (\d+\.\d) s", line) for line in done.stderr.splitlines()]
    assert all(phases), done.stderr
    assert [m[1] for m in phases] == [
        "presk calibrate: the reference on 2 samples",
        "presk solve: sensitivity sweep on the reference",
        "presk solve: the exact outputs of 2 samples",
        "presk solve: measuring candidates",
        "presk solve: timing the record, all-f32 and all-f64",
        "presk check: the bound (cond)",
        "presk check: measuring on kernel against the reference",
        "presk bisect: bf16 on kernel beside the reference",
    ]
    assert "presk solve: `Regression.loss`" in done.stdout and " ... " not in done.stdout
    assert piped(PRESK_PROGRESS="0").stderr == ""


@pytest.mark.parametrize("grad", [False, True])
def test_the_reference_counts_every_primitive_it_applies(grad):
    path, entry, dims = MINIGPT  # folds over its layers, forward and backward
    core = api.load(path).elaborate(entry, dims)
    if grad:
        core = core.derived(entry=f"{entry}.grad")
    compiled = core.reference(bits=64)
    backend = compiled.backend
    applied, apply = [], backend.host.apply
    backend.host.apply = lambda *a: applied.append(1) or apply(*a)
    compiled.drawn(0)()
    total = applications(backend.program, backend.program.entry, {})
    assert total > 0 and len(applied) == total


def test_the_first_call_counts_the_kernels_the_cache_does_not_hold(tmp_path, monkeypatch):
    monkeypatch.setenv("PRESK_PROGRESS", "1")
    monkeypatch.setattr(progress, "DELAY", 0)
    path, entry, dims = LINEAR
    kernels = api.load(path).elaborate(entry, dims).lower("f64", "default")
    lines = []
    for _ in ("cold", "warm"):
        compiled = kernels.compile("mlir", threads=1)
        compiled.backend.compiler = Compiler(tmp_path)  # an empty cache, then the same one
        err = io.StringIO()
        with redirect_stderr(err):
            compiled.drawn(0)()
        lines.append(err.getvalue())
    assert "\rcompiling kernels 2/2  " in lines[0] and lines[0].endswith("\r\x1b[K")
    assert lines[1] == ""
