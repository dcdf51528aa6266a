"""The prelude (presk/prelude.psk): modules every program may use, `adamw` among them.

It is parsed once and joined to each program; a program that defines one of its names
is refused (E2002) at its own definition.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from presk.errors import SourceError, source_error
from presk.front import ast
from presk.front.parser import parse

FILE = "<prelude>"


@cache
def prelude() -> ast.SourceTree:
    return parse(resources.files("presk").joinpath("prelude.psk").read_text(), FILE)


def with_prelude(program: ast.SourceTree) -> ast.SourceTree:
    """`program` with the prelude's modules and functions beside its own."""
    pre = prelude()
    for name, defn in [*program.modules.items(), *program.functions.items()]:
        if name in pre.modules or name in pre.functions:
            span = defn.span
            raise source_error(
                SourceError,
                "E2002",
                f"{name} is the prelude's: choose another name",
                span.file,
                program.text,
                span.line,
                span.col,
            )
    program.modules.update(pre.modules)
    program.functions.update(pre.functions)
    program.sources[FILE] = pre.text
    return program
