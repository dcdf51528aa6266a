"""Progress of slow work, on one line of stderr redrawn in place.

A `Progress` says nothing for its first second (`DELAY`), so work that ends sooner never
shows one. Then it draws `compiling kernels 37/142  4.1 s` on stderr, never stdout (a
`--format json` output stays clean), and clears the line when the work ends. It draws
only for a person watching: stderr a terminal, in the main process (a pool's workers
share that terminal), and only the innermost progress open (the kernels a training run's
first step compiles show over its step counter, which returns when they are done).
`PRESK_PROGRESS=0` turns it off; `PRESK_PROGRESS=1` turns it on without a terminal too
(the tests' hook).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

from presk.errors import UsageError

DELAY = 1.0  # seconds of silence before the line appears
REDRAW = 0.1  # seconds between two drawings of the line

_open = 0  # progresses open in this process; only the innermost draws


def wanted(stream) -> bool:
    """Whether progress is drawn on `stream`: `$PRESK_PROGRESS` (0 or 1), else whether it
    is a terminal; never in a worker process."""
    setting = os.environ.get("PRESK_PROGRESS", "")
    if setting not in ("", "0", "1"):
        raise UsageError(f"PRESK_PROGRESS={setting}: 0 (no progress) or 1 (progress always)")
    if setting == "0" or multiprocessing.parent_process() is not None:
        return False
    return setting == "1" or stream.isatty()


class Progress:
    """`with Progress(label, total) as p:` … `p.advance()` once a unit of work is done.
    `total` may be set once known; None draws the count alone."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        stream=None,
        delay: float | None = None,
        enabled: bool = True,
    ):
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.delay = DELAY if delay is None else delay
        self.enabled = enabled  # False: a command's --quiet
        self.done = 0
        self._depth = 0
        self._on = self._drawn = False
        self._start = self._last = 0.0

    def __enter__(self) -> Progress:
        global _open
        _open += 1
        self._depth = _open
        self._on = self.enabled and wanted(self.stream)
        self._start = time.monotonic()
        return self

    def advance(self, n: int = 1, detail: str | None = None) -> None:
        """`n` more units done; `detail`, if given, is drawn in place of the count."""
        self.done += n
        if not self._on or _open != self._depth:  # a progress inside this one draws
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

    def __exit__(self, *exc) -> None:
        global _open
        _open -= 1
        self._on = False
        self.clear()
