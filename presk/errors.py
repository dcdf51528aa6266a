"""The one error hierarchy of presk.

Every error a user can cause is a `PreskError`: it renders as one located line
(`file:line:col: error[E2001]: message`), optionally followed by the source line and
a caret. The command-line tools catch exactly these and exit with status 1; anything
else is a bug in presk and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A position in a source file: 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class PreskError(Exception):
    """An error in what the user gave presk (a program, a flag, a file)."""

    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        span: Span | None = None,
        source_line: str | None = None,
        notes: tuple[str, ...] = (),
    ):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.span = span
        self.source_line = source_line
        self.notes = notes

    def headline(self) -> str:
        where = f"{self.span}: " if self.span else ""
        tag = f"error[{self.code}]" if self.code else "error"
        return f"{where}{tag}: {self.message}"

    def render(self) -> str:
        lines = [self.headline()]
        if self.source_line is not None and self.span is not None:
            text, col = excerpt(self.source_line.rstrip("\n"), self.span.col)
            lines.append(f"  {text}")
            lines.append("  " + " " * (col - 1) + "^")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.headline()


EXCERPT = 100  # characters of a source line shown around an error's column


def excerpt(line: str, col: int) -> tuple[str, int]:
    """At most EXCERPT characters of `line` around column `col` (1-based), with `…` where
    it is cut, and the column in what is kept: a one-line program of 40 000 characters
    still prints a short error."""
    if len(line) <= EXCERPT:
        return line, col
    start = max(0, min(col - 1 - EXCERPT // 2, len(line) - EXCERPT))
    kept = line[start : start + EXCERPT]
    head = "…" if start > 0 else ""
    tail = "…" if start + EXCERPT < len(line) else ""
    return head + kept + tail, col - start + len(head)


def closest(word: str, known: Iterable[str]) -> str | None:
    """The name in `known` nearest `word` by difflib's ratio (at least 0.6), for a refusal's
    "did you mean"; None if none is that near."""
    found = difflib.get_close_matches(word, list(known), n=1)
    return found[0] if found else None


class SourceError(PreskError):
    """A syntax, name, type or axis error in a PSK program (E1xxx, E2xxx)."""


class BindingError(PreskError):
    """An entry, `--dim` or `--const` that does not fit the program (E3xxx)."""


class UsageError(PreskError):
    """A command-line flag or value presk cannot take (E0001), or a path it cannot read
    (E0002) or will not write (E0003)."""

    code = "E0001"


class ToolchainError(PreskError):
    """A tool presk runs is missing or failed (the C compiler that links kernels)."""

    code = "E0004"


class IRError(PreskError):
    """MLIR text that does not parse or verify, as the MLIR diagnostics locate it."""


class OpError(PreskError):
    """An error about one MLIR op; a pass reports it as a diagnostic at the op's location."""

    def __init__(self, message: str, *, op=None, **kwargs):
        super().__init__(message, **kwargs)
        self.op = op


class VerifierError(OpError):
    """An op that breaks a rule IRDL cannot state (named axes, shapes)."""


class PassError(OpError):
    """A pass that cannot transform the IR it was given."""


class RealizationError(PreskError):
    """A realization or plan that cannot be taken (E7001) or honoured (E7002)."""


class RuntimeDataError(PreskError):
    """A value presk refuses at run time (a row a mask empties, an index out of range)."""


class GraphError(PreskError):
    """An ONNX graph `presk import` cannot take: malformed, unsupported, unbound (E4xxx)."""


class FileFormatError(PreskError):
    """A checkpoint, inputs file or JSON file that is malformed, truncated or mismatched (E9xxx)."""


def source_error(
    cls: type[PreskError], code: str, message: str, file: str, text: str, line: int, col: int
) -> PreskError:
    """Build a located error with its source excerpt from the whole source `text`."""
    lines = text.splitlines()
    src = lines[line - 1] if 0 < line <= len(lines) else None
    return cls(message, code=code, span=Span(file, line, col), source_line=src)
