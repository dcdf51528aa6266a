"""The MLIR context presk works in, with its IRDL dialects loaded once.

The dialect files live in the repository's `dialects/` folder, installed as the
`presk.dialects` package. Loading a dialect twice in one context aborts the process,
so `new_context` is the only place that loads them.
"""

from __future__ import annotations

from importlib import resources

from mlir import ir
from mlir.dialects import irdl

DIALECT_FILES = ("psk.irdl.mlir", "psk_kernel.irdl.mlir")


def dialect_path(name: str) -> str:
    """The installed path of one dialect's IRDL file (for `mlir-opt --irdl-file=`)."""
    return str(resources.files("presk.dialects").joinpath(name))


def load_presk_dialects(ctx: ir.Context) -> None:
    """Load psk and psk_kernel into `ctx` unless they are there already."""
    if ctx.is_registered_operation("psk.add"):
        return
    with ctx, ir.Location.unknown():
        for name in DIALECT_FILES:
            text = resources.files("presk.dialects").joinpath(name).read_text()
            irdl.load_dialects(ir.Module.parse(text))


def new_context() -> ir.Context:
    """A fresh context with every upstream dialect and presk's own."""
    ctx = ir.Context()
    load_presk_dialects(ctx)
    return ctx
