"""The MLIR context presk works in, with its IRDL dialects loaded once.

The dialect files live in the `presk.dialects` package (`presk/dialects/`). Loading a
dialect twice in one context aborts the process, so `new_context` is the only place that
loads them.
"""

from __future__ import annotations

import sys
import types
from importlib import resources

from mlir import ir
from mlir.dialects import irdl

DIALECT_FILES = ("psk.irdl.mlir", "psk_kernel.irdl.mlir")


def dialect_path(name: str) -> str:
    """The installed path of one dialect's IRDL file (for `mlir-opt --irdl-file=`)."""
    return str(resources.files("presk.dialects").joinpath(name))


def _python_dialect_modules() -> None:
    """Empty `mlir.dialects.psk` and `mlir.dialects.psk_kernel` modules.

    Whenever the bindings wrap an op or a type, they import the Python module of its
    dialect, and an import that fails is tried again every time: a hundredfold slowdown
    of every access to psk IR. IRDL dialects have no Python classes, so an empty module
    is the truth.
    """
    for name in ("psk", "psk_kernel"):
        sys.modules.setdefault(f"mlir.dialects.{name}", types.ModuleType(f"mlir.dialects.{name}"))


def load_presk_dialects(ctx: ir.Context) -> None:
    """Load psk and psk_kernel into `ctx` unless they are there already."""
    _python_dialect_modules()
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
