"""MLIR ops printed in C: the text of a bundle's kernels, 2-3 times faster.

An entry's first call in a process looks its kernels' bundle up in the kernel cache by a
hash of their printed text (presk/backends/native.py): the tiny MiniGPT step's 150
kernels are 232 kB of it. The bindings print through MLIR's C API with a stream that
calls back into Python for each piece of text (16 ms here); `printer.c` calls the same C
API with a callback in C (6 ms), and gives the same text, byte for byte.

It is one of presk's C libraries (presk/backends/libraries.py), linked against the
bindings' own `libMLIRPythonCAPI`, the library whose context holds the ops, and keyed by
the bindings' version as well: set-up builds it into `INSTALLED`, and a run loads it
from there, verified. Where it is not there (no
set-up) or cannot be loaded, the bindings print: the same text, more slowly.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
from functools import cache
from pathlib import Path

import mlir._mlir_libs
from mlir import ir

from presk.backends import libraries
from presk.backends.libraries import CLibrary
from presk.errors import PreskError

_CAPI = Path(mlir._mlir_libs.__file__).parent  # the bindings' libMLIRPythonCAPI.so
# the bindings' version among the flags, so that it keys the library: a printer linked
# against one release's C API is never loaded beside another's
_BINDINGS = importlib.metadata.version("xtc-mlir-python-bindings")
PRINTER = CLibrary(
    "the MLIR printer",
    (Path(__file__).with_name("printer.c"),),
    ("-O2", "-shared", "-fPIC", f'-DPRESK_MLIR_BINDINGS="{_BINDINGS}"'),
    (f"-L{_CAPI}", "-lMLIRPythonCAPI", f"-Wl,-rpath,{_CAPI}"),
)
INSTALLED = libraries.INSTALLED / "printer"

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.argtypes = [ctypes.py_object]
_get_name.restype = ctypes.c_char_p
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_pointer.restype = ctypes.c_void_p


class Printer:
    def __init__(self, library: ctypes.CDLL):
        self.library = library
        self.print_ops = library.presk_print_ops
        self.print_ops.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self.print_ops.restype = ctypes.c_long
        self.free = library.presk_print_free
        self.free.argtypes = [ctypes.c_void_p]
        self.free.restype = None

    def __call__(self, ops: list[ir.Operation]) -> str | None:
        """The ops printed one after another, each followed by a newline; None if memory
        ran out."""
        if not ops:
            return ""
        pointers = (ctypes.c_void_p * len(ops))(*[_pointer(op) for op in ops])
        out = ctypes.c_void_p()
        size = self.print_ops(pointers, len(ops), ctypes.byref(out))
        if size < 0:
            return None
        try:
            return ctypes.string_at(out.value, size).decode()
        finally:
            self.free(out)


def _pointer(op: ir.Operation) -> int:
    """The op's `MlirOperation` (its C API pointer), from the capsule the bindings give."""
    capsule = op.operation._CAPIPtr
    return _get_pointer(capsule, _get_name(capsule))


@cache
def printer() -> Printer | None:
    """The printer set-up built, verified and loaded once a process; None without it."""
    try:
        library = PRINTER.installed(INSTALLED)
    except (PreskError, OSError):  # no C compiler to key it by: the bindings print
        return None
    return None if library is None else Printer(library)


def install(directory: Path | None = None) -> Path:
    """The printer built into `directory` (`INSTALLED`): its library's path."""
    return PRINTER.install(directory or INSTALLED)
