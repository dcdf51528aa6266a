"""MLIR diagnostics as presk errors: `file:line:col: error: message`."""

from __future__ import annotations

from mlir import ir

from presk.errors import IRError, Span
from presk.fileio import source_line


def file_location(loc: ir.Location):
    """The innermost file:line:col of a location, or None."""
    if loc.is_a_file():
        return loc
    if loc.is_a_callsite():
        return file_location(loc.callee)
    if loc.is_a_fused():
        for sub in loc.locations:
            found = file_location(sub)
            if found is not None:
                return found
    if loc.is_a_name():
        return file_location(loc.child_loc)
    return None


def ir_error(
    err: ir.MLIRError, file: str, line_offset: int = 0, text: str | None = None
) -> IRError:
    """The first error diagnostic of `err`, located in `file` (lines shifted by `line_offset`)."""
    diags = list(err.error_diagnostics) or []
    if not diags:
        return IRError(str(err).strip().splitlines()[-1])
    d = diags[0]
    loc = file_location(d.location)
    span = source = None
    if loc is not None:
        line = loc.start_line + line_offset
        span = Span(file, line, loc.start_col)
        if text is not None:
            lines = text.splitlines()
            source = lines[line - 1] if 0 < line <= len(lines) else None
    notes = tuple(n.message for n in d.notes if "see current operation" not in n.message)
    message = d.message.strip().splitlines()[0]
    return IRError(message, span=span, source_line=source, notes=notes)


def compile_error(err: ir.MLIRError) -> IRError:
    """A pass's refusal of a module elaborated from a program, located in the program's
    own file with its source line (E2020: what presk cannot compile, such as a second
    derivative)."""
    diags = list(err.error_diagnostics)
    loc = file_location(diags[0].location) if diags else None
    error = ir_error(err, loc.filename if loc is not None else "<module>")
    if error.span is not None:
        error.source_line = source_line(error.span.file, error.span.line)
    error.code = "E2020"
    return error
