"""Kernels compiled to native code, once per kernel and machine.

An affine-stage kernel is copied into a module of its own under the name `kernel`,
lowered by `stages.LLVM_PIPELINE`, compiled by MLIR's ExecutionEngine at opt level 3 for
this machine's CPU, written out as an object file and linked by the system C compiler
(`cc -shared`, with the C library's libm and MLIR's float16 runtime) into a shared
library that ctypes loads. ctypes releases the GIL
for the call, so workers run kernels in parallel.

The libraries live in an on-disk cache (`$PRESK_CACHE`, else `$XDG_CACHE_HOME/presk`,
else `~/.cache/presk`), named by a hash of the MLIR version, the CPU and its features,
the pipeline and the kernel's text; the text is stored beside the library and compared
on every hit, so a hash collision can never run the wrong code. Within a process a
kernel text is compiled or loaded once.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mlir import ir
from mlir.execution_engine import ExecutionEngine

from presk import stages
from presk.errors import UsageError
from presk.fileio import write_atomic
from presk.toolchain import host_cpu, mlir_runtime_lib

OPT_LEVEL = 3
SYMBOL = "kernel"
# LLVM keeps a bf16 value that lives across blocks in f32 and rounds it back with
# __truncsfbf2 (exact there: the value is a bf16 already), from MLIR's runtime library.
_RUNTIME = os.path.dirname(mlir_runtime_lib("libmlir_float16_utils.so"))
_LIBS = ["-lm", f"-L{_RUNTIME}", "-lmlir_float16_utils", f"-Wl,-rpath,{_RUNTIME}"]


@dataclass
class Native:
    """A compiled kernel: `fn(*buffer pointers, lo, hi)`."""

    fn: object
    seconds: float  # to compile it, or to load it from the cache
    cached: bool
    path: Path  # the shared library


def cache_dir() -> Path:
    if os.environ.get("PRESK_CACHE"):
        return Path(os.environ["PRESK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "presk"


def kernel_text(f: ir.Operation) -> str:
    """The text compiled for a kernel `func.func`: the function alone, named `kernel`,
    without presk's attributes (which do not change its code)."""
    module = ir.Module.parse(str(f), f.context)
    g = module.body.operations[0].operation
    g.attributes["sym_name"] = ir.StringAttr.get(SYMBOL, f.context)
    for name in [n for n in g.attributes if n.startswith("psk_kernel.")]:
        del g.attributes[name]
    return str(module)


class Compiler:
    """Compiles kernels through a cache directory, keeping what it loaded."""

    def __init__(self, directory: Path | None = None):
        self.directory = directory or cache_dir()
        self._loaded: dict[str, Native] = {}  # by kernel text
        self._prefix = "\n".join(
            [
                importlib.metadata.version("xtc-mlir-python-bindings"),
                *host_cpu(),
                stages.LLVM_PIPELINE,
                f"opt{OPT_LEVEL}",
            ]
        )

    def compile(self, f: ir.Operation, nbuffers: int) -> Native:
        text = kernel_text(f)
        found = self._loaded.get(text)
        if found is not None:
            return found
        start = time.perf_counter()
        key = hashlib.blake2b(f"{self._prefix}\n{text}".encode(), digest_size=16).hexdigest()
        lib = self.directory / key[:2] / f"{key}.so"
        cached = _hit(lib, text)
        fn = None
        if cached:
            try:
                fn = _load(lib, nbuffers)
            except OSError:  # a library this installation cannot load: made again
                cached = False
        if fn is None:
            _build(text, f.context, lib)
            fn = _load(lib, nbuffers)
        native = Native(fn, time.perf_counter() - start, cached, lib)
        self._loaded[text] = native
        return native


def _hit(lib: Path, text: str) -> bool:
    try:
        return lib.exists() and lib.with_suffix(".mlir").read_text() == text
    except OSError:
        return False


def _build(text: str, ctx: ir.Context, lib: Path) -> None:
    module = ir.Module.parse(text, ctx)
    stages.llvm(module)
    engine = ExecutionEngine(
        module,
        opt_level=OPT_LEVEL,
        shared_libs=[mlir_runtime_lib("libmlir_float16_utils.so")],
        enable_pic=True,
    )
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise UsageError("the mlir backend links kernels with a C compiler: install cc")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        obj, so = os.path.join(tmp, "k.o"), os.path.join(tmp, "k.so")
        engine.dump_to_object_file(obj)
        subprocess.run([cc, "-shared", "-o", so, obj, *_LIBS], check=True, capture_output=True)
        os.replace(so, lib)  # the library first: a text without its library is no hit
    write_atomic(str(lib.with_suffix(".mlir")), text)


def _load(lib: Path, nbuffers: int):
    fn = ctypes.CDLL(str(lib))[SYMBOL]
    fn.argtypes = [ctypes.c_void_p] * nbuffers + [ctypes.c_int64, ctypes.c_int64]
    fn.restype = None
    return fn


@cache
def shared_compiler() -> Compiler:
    """The process's compiler: a kernel is compiled or loaded once a process."""
    return Compiler()
