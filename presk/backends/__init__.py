"""Executors behind one seam: each takes runtime values and gives runtime values.

`make(name, program, bits)` gives the backend called `name` for a PSK-Core program; every
backend has `name` and `call(args, ctx, entry=None)`.
"""

from __future__ import annotations

from presk.errors import UsageError
from presk.ir.program import Program

BACKENDS = ("interp",)


def make(name: str, program: Program, bits: int = 256):
    if name == "interp":
        from presk.backends.interp import Interpreter

        return Interpreter(program, bits)
    raise UsageError(f"unknown backend {name!r} (backends: {', '.join(BACKENDS)})")
