"""Progress of slow work: one line of stderr redrawn in place on a terminal, and a line a
phase of a long command where stderr is not one.

A `Progress` says nothing for its first second (`DELAY`), so work that ends sooner never
shows one. Then it draws `compiling kernels 37/142  4.1 s` on stderr, never stdout (a
`--format json` output stays clean), and clears the line when the work ends. It draws
only for a person watching: stderr a terminal, in the main process (a pool's workers
share that terminal), and only the innermost progress open (the kernels a training run's
first step compiles show over its step counter, which returns when they are done).

A progress marked `phase` is a step of a long precision command (`presk solve: sensitivity
sweep on the reference`). Where stderr is not a terminal (a pipe, a log file), no line is
redrawn there, but a phase that lasted a second or more writes one line when it ends,
`presk solve: sensitivity sweep on the reference ... 12.3 s`, so a log shows where the
time went; a phase that ends by an error writes nothing (the error says why).

`PRESK_PROGRESS=0` turns both off; `PRESK_PROGRESS=1` draws the line without a terminal
too (the tests' hook), and then phases draw it as on a terminal.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

from presk.errors import UsageError

DELAY = 1.0  # seconds of silence before the line appears, and the shortest phase logged
REDRAW = 0.1  # seconds between two drawings of the line
SETTINGS = ("", "0", "1")  # $PRESK_PROGRESS: unset, off, the line always

_open = 0  # progresses open in this process; only the innermost draws


def shown(stream) -> str | None:
    """How progress shows on `stream`: "line" (redrawn in place: a terminal, or
    `PRESK_PROGRESS=1`), "log" (a phase's line when it ends: not a terminal), or None
    (`PRESK_PROGRESS=0`, or a worker process)."""
    setting = os.environ.get("PRESK_PROGRESS", "")
    if setting not in SETTINGS:
        raise UsageError(
            f"PRESK_PROGRESS={setting}: 0 (no progress) or 1 (the line even without a terminal)"
        )
    if setting == "0" or multiprocessing.parent_process() is not None:
        return None
    return "line" if setting == "1" or stream.isatty() else "log"


class Progress:
    """`with Progress(label, total) as p:` … `p.advance()` once a unit of work is done.
    `total` may be set once known; None draws the count alone. A `phase` also writes its
    line and elapsed time when it ends, where stderr is not a terminal."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        stream=None,
        delay: float | None = None,
        enabled: bool = True,
        phase: bool = False,
    ):
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.delay = DELAY if delay is None else delay
        self.enabled = enabled  # False: a command's --quiet
        self.phase = phase
        self.done = 0
        self._depth = 0
        self._mode: str | None = None
        self._drawn = False
        self._start = self._last = 0.0
        self._end: float | None = None

    def __enter__(self) -> Progress:
        global _open
        _open += 1
        self._depth = _open
        self._mode = shown(self.stream) if self.enabled else None
        self._start, self._end = time.monotonic(), None
        return self

    @property
    def elapsed(self) -> float:
        """Seconds the work has taken: so far, or from its start to its end."""
        return (time.monotonic() if self._end is None else self._end) - self._start

    def advance(self, n: int = 1, detail: str | None = None) -> None:
        """`n` more units done; `detail`, if given, is drawn in place of the count."""
        self.done += n
        if self._mode != "line" or _open != self._depth:  # a progress inside this one draws
            return
        now = time.monotonic()
        if now - self._start < self.delay:
            return
        if self._drawn and now - self._last < REDRAW and self.done != self.total:
            return
        count = self.done if self.total is None else f"{self.done}/{self.total}"
        # \x1b[K clears what a longer line before left to the right
        text = detail or f"{count}  {now - self._start:.1f} s"
        self.stream.write(f"\r{self.label} {text}\x1b[K")
        self.stream.flush()
        self._drawn, self._last = True, now

    def clear(self) -> None:
        """Erase the line, so that a line printed next stands alone; the next `advance`
        draws it again."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def __exit__(self, error_type, *_) -> None:
        global _open
        _open -= 1
        self._end = time.monotonic()
        logged = self._mode == "log" and self.phase and error_type is None
        self._mode = None
        self.clear()
        if logged and self.elapsed >= self.delay:
            self.stream.write(f"{self.label} ... {self.elapsed:.1f} s\n")
            self.stream.flush()
