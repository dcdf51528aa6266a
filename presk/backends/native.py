"""Kernels compiled to native code, once per kernel (or entry) and machine.

An affine-stage kernel is copied into a module of its own under the name `kernel`
(`kernel_source`), compiled to an object file (presk/backends/objects.py: lowered by
`stages.LLVM_PIPELINE`, compiled by MLIR's ExecutionEngine at opt level 2 for this
machine's CPU) and linked by the system C compiler (`cc -shared`, with the C library's
libm and MLIR's float16 runtime) into a shared library that ctypes loads. ctypes releases
the GIL for the call, so workers run kernels in parallel.

An entry's first call compiles its kernels together when enough are cold (`TOGETHER`):
one library, its bundle, holds each kernel under its own name, made from a few modules of
many kernels (compiled side by side by worker processes when there are many) and one
link. A kernel
asked for alone (a sweep, `presk explain`) has a library of its own.

The libraries live in an on-disk cache (`$PRESK_CACHE`, else `$XDG_CACHE_HOME/presk`,
else `~/.cache/presk`), named by a key, a hash of the MLIR version, the CPU and its
features, the pipeline and the text: a kernel's, or for a bundle its kernels' as the
module holds them, in order (under `bundles/`). Beside each library are its text,
compared on every hit so a hash collision can never run the wrong code, and its digest
(BLAKE2b of the library keyed by the key), checked on every load so a library truncated,
damaged or swapped for another's is compiled again rather than run. A cache that cannot
be written costs one warning: the kernels are compiled for this process alone. A tuned
plan's picks (presk/backends/tuning.py) are kept under `tuned/` the same way.

A compiler keeps what it loaded: every kernel a live backend still holds, and the last
`LOADED` it was asked for. A library none of whose kernels is held is unloaded
(`dlclose`) when Python frees its last function, so a long process (a solve, a sweep,
`presk serve`) keeps a bounded number of libraries mapped, and a backend's kernels are
never unloaded under it. Each compilation's ExecutionEngine and its LLVM state are freed
once the object file is written.
"""

from __future__ import annotations

import _ctypes
import ctypes
import hashlib
import importlib.metadata
import os
import re
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mlir import ir

from presk import stages
from presk.backends.libraries import Entry, c_compiler, cached_library, stored_library
from presk.backends.objects import OPT_LEVEL, write_objects
from presk.backends.printer import printer
from presk.errors import ToolchainError, UsageError
from presk.toolchain import host_cpu, mlir_runtime_lib

SYMBOL = "kernel"
# The kernels a compiler keeps loaded beyond those its live backends hold: a kernel asked
# for again among the last LOADED is not loaded again. A tiny kernel's library costs about
# 20 kB resident (docs/performance.md's git history, "Compiled code in a long process").
LOADED = 256
# An entry's kernels are compiled together, into its bundle, when at least two and a
# TOGETHER-th of them are cold: a kernel compiled alone, with an ExecutionEngine and a link
# of its own, costs about four times its share of a bundle (docs/performance.md's git history).
TOGETHER = 4
BUNDLES = "bundles"  # the cache's folder of bundles
# LLVM keeps a bf16 value that lives across blocks in f32 and rounds it back with
# __truncsfbf2 (exact there: the value is a bf16 already), from MLIR's runtime library.
_RUNTIME = os.path.dirname(mlir_runtime_lib("libmlir_float16_utils.so"))
# the symbols a link may alias (`--defsym=a=b` reads an expression: no `-`, no spaces)
_LINKER_NAME = re.compile(r"[A-Za-z_.][A-Za-z0-9_.]*")
_LIBS = ["-lm", f"-L{_RUNTIME}", "-lmlir_float16_utils", f"-Wl,-rpath,{_RUNTIME}"]


@dataclass
class Native:
    """A compiled kernel: `fn(*buffer pointers, lo, hi)`, the function `symbol` of the
    library at `path`."""

    fn: object
    seconds: float  # to compile it, or to load it from the cache (a bundle's: its share)
    cached: bool
    path: Path | None  # the shared library in the cache; None if the cache could not hold it
    symbol: str = SYMBOL


def cache_dir() -> Path:
    if os.environ.get("PRESK_CACHE"):
        return Path(os.environ["PRESK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "presk"


def kernel_source(f: ir.Operation) -> str:
    """The text compiled for a kernel `func.func`: the function alone, named `kernel`,
    without presk's attributes (which do not change its code)."""
    module = ir.Module.parse(_asm(f), f.context)
    g = module.body.operations[0].operation
    g.attributes["sym_name"] = ir.StringAttr.get(SYMBOL, f.context)
    for name in [n for n in g.attributes if n.startswith("psk_kernel.")]:
        del g.attributes[name]
    return str(module)


def bundle_source(kernels) -> str:
    """The text an entry's kernel `func.func`s are compiled from together: each as its
    module holds it (its name and presk's attributes kept), in order, one after another (a
    module of MLIR). Printed in C where set-up built the printer (presk/backends/printer.py),
    else by the bindings: the same text."""
    kernels = list(kernels)
    fast = printer()
    text = fast(kernels) if fast is not None else None
    return text if text is not None else "".join(_asm(f) + "\n" for f in kernels)


def _asm(f: ir.Operation) -> str:
    """`f` printed alone: `str(f)` would number the values of the whole module around it,
    a cost that grows with the module (8 ms a kernel in the tiny MiniGPT's training step,
    where this takes 0.1 ms). Not verified again: the pass manager verified it after the
    last pass that changed it (a sixth of the printing's time)."""
    return f.get_asm(use_local_scope=True, assume_verified=True)


def buffers(f: ir.Operation) -> int:
    """A kernel's buffer arguments: all but `lo, hi`."""
    return len(f.regions[0].blocks[0].arguments) - 2


def pays_to_bundle(cold: int, kernels: int) -> bool:
    """Whether an entry whose `kernels` distinct kernels have `cold` ones neither loaded nor
    in the cache compiles them all together (`TOGETHER`)."""
    return cold >= 2 and cold * TOGETHER >= kernels


class Compiler:
    """Compiles kernels through a cache directory, keeping what is in use or recent;
    `workers` processes (this one among them) compile a bundle of many kernels."""

    def __init__(self, directory: Path | None = None, keep: int = LOADED, workers: int = 0):
        self.directory = directory or cache_dir()
        self.keep = keep
        self.workers = workers or len(os.sched_getaffinity(0))
        # by kernel text (a bundle's kernels: bundle key and name): every kernel something
        # still holds (a backend), and the last `keep` asked for, newest last
        self._live: weakref.WeakValueDictionary[str, Native] = weakref.WeakValueDictionary()
        self._recent: OrderedDict[str, Native] = OrderedDict()
        self._warned = False
        self._warning = threading.Lock()  # the replay runtime may be stored on a thread
        self._prefix = "\n".join(
            [
                importlib.metadata.version("xtc-mlir-python-bindings"),
                *host_cpu(),
                stages.LLVM_PIPELINE.text(),
                f"opt{OPT_LEVEL}",
            ]
        )

    def compile(self, f: ir.Operation, nbuffers: int, text: str | None = None) -> Native:
        """The kernel `f` compiled, or loaded; `text` is its `kernel_source`, if the caller
        made it already."""
        text = text or kernel_source(f)
        native = self._live.get(text)
        if native is None:
            native = self._live[text] = self._compile_or_load(text, f.context, nbuffers)
        self._keep(text, native)
        return native

    def _keep(self, key: str, native: Native) -> None:
        """Hold `native` as the newest; the oldest beyond `keep` is let go, to be unloaded
        once no backend holds it either."""
        self._recent[key] = native
        self._recent.move_to_end(key)
        if len(self._recent) > self.keep:
            self._recent.popitem(last=False)

    def holds(self, text: str) -> bool:
        """Whether the kernel of this `kernel_source` is loaded, or in the cache: whether
        asking for it costs no compilation."""
        return text in self._live or self.place(text).holds(text)

    def place(
        self, text: str, folder: str = "", suffix: str = ".mlir", payload: str = ".so"
    ) -> Entry:
        """The cache entry (`Entry`) of what is made from `text`, under `folder`, keyed by
        it and by what the compiler makes code for: the MLIR version, the CPU and its
        features, the pipeline."""
        key = hashlib.blake2b(f"{self._prefix}\n{text}".encode(), digest_size=16).hexdigest()
        return Entry(self.directory / folder, key, suffix, payload)

    def _compile_or_load(self, text: str, ctx: ir.Context, nbuffers: int) -> Native:
        start = time.perf_counter()
        fns, path, cached = cached_library(
            self.place(text),
            text,
            lambda so: _build([(SYMBOL, text)], ctx, so),
            lambda lib: _load(lib, {SYMBOL: nbuffers}),
            self.warn,
        )
        return Native(fns[SYMBOL], time.perf_counter() - start, cached, path)

    def bundled(self, kernels: dict[str, ir.Operation]) -> dict[str, Native]:
        """An entry's kernels by name, from their bundle loaded in this process or held by
        the cache (verified); {} if neither has it."""
        text = bundle_source(kernels.values())
        place = self.place(text, BUNDLES)
        natives = {name: self._live.get(f"{place.key}:{name}") for name in kernels}
        if None in natives.values():
            if not place.holds(text):
                return {}
            start = time.perf_counter()
            try:
                fns = _load(place.lib, {name: buffers(f) for name, f in kernels.items()})
            except OSError:  # a library this installation cannot load: made again
                return {}
            natives = _natives(fns, start, True, place.lib)
        return self._held(place, natives)

    def bundle(
        self, kernels: dict[str, ir.Operation], sources: dict[str, str], advance
    ) -> dict[str, Native]:
        """An entry's kernels by name, compiled together into their bundle, stored in the
        cache; `sources` are their `kernel_source`s, `advance(n)` is called as n more are
        compiled."""
        text = bundle_source(kernels.values())
        place = self.place(text, BUNDLES)
        ctx = next(iter(kernels.values())).context
        start = time.perf_counter()
        fns, path = stored_library(
            place,
            text,
            lambda so: _build([(n, sources[n]) for n in kernels], ctx, so, self.workers, advance),
            lambda lib: _load(lib, {name: buffers(f) for name, f in kernels.items()}),
            self.warn,
        )
        return self._held(place, _natives(fns, start, False, path))

    def _held(self, place: Entry, natives: dict[str, Native]) -> dict[str, Native]:
        """A bundle's kernels held while in use, and as the newest asked for."""
        for name, native in natives.items():
            self._live[f"{place.key}:{name}"] = native
            self._keep(f"{place.key}:{name}", native)
        return natives

    def warn(self, e: UsageError) -> None:
        """One line per compiler (a process shares one): a cache that cannot be written
        must not fail a run."""
        with self._warning:
            if self._warned:
                return
            self._warned = True
        sys.stderr.write(
            f"warning: the kernel cache {self.directory} cannot be used ({e.message}); "
            "kernels are compiled for this run only\n"
        )


def _natives(fns: dict, start: float, cached: bool, path: Path | None) -> dict[str, Native]:
    """A bundle's functions by name as `Native`s, each timed at its share since `start`."""
    share = (time.perf_counter() - start) / len(fns)
    return {name: Native(fn, share, cached, path, name) for name, fn in fns.items()}


def _build(
    kernels: list[tuple[str, str]], ctx: ir.Context, so: Path, workers: int = 1, advance=None
) -> None:
    """The library `so` of `kernels`, (symbol, `kernel_source`) pairs: their object files,
    written beside it by `workers` processes, linked. A kernel whose source an earlier one
    has (a tiny MiniGPT step's 150 have 144 sources) is not compiled again: the link makes
    its symbol another name of the earlier one's code, which is that source's code."""
    cc = c_compiler()
    advance = advance or (lambda n: None)
    first: dict[str, str] = {}  # a source's first symbol (a name the linker reads as one)
    code = {  # each symbol's code: its own, or the first's of its source
        symbol: first.setdefault(text, symbol) if _LINKER_NAME.fullmatch(symbol) else symbol
        for symbol, text in kernels
    }
    distinct = [(symbol, text) for symbol, text in kernels if code[symbol] == symbol]
    objects = write_objects(distinct, ctx, so.parent, workers, advance)
    advance(len(kernels) - len(distinct))
    names = [f"-Wl,--defsym={symbol}={of}" for symbol, of in code.items() if symbol != of]
    argv = [cc, "-shared", "-o", so, *objects, *names, *_LIBS]
    link = subprocess.run(argv, capture_output=True, text=True)
    if link.returncode != 0:
        said = (link.stderr.strip().splitlines() or [f"exit status {link.returncode}"])[-1]
        raise ToolchainError(f"{cc} could not link a kernel: {said}")


def _load(lib: Path, symbols: dict[str, int]) -> dict[str, object]:
    """The function of each symbol in `lib`, with its buffer count. A function holds the
    library, which is unloaded when Python frees the last function of it."""
    library = ctypes.CDLL(str(lib))
    unload = weakref.finalize(library, _ctypes.dlclose, library._handle)
    unload.atexit = False  # at exit a worker thread may still be in a kernel
    fns = {}
    for symbol, nbuffers in symbols.items():
        fn = fns[symbol] = library[symbol]
        fn.argtypes = [ctypes.c_void_p] * nbuffers + [ctypes.c_int64, ctypes.c_int64]
        fn.restype = None
    return fns


@cache
def shared_compiler() -> Compiler:
    """The process's compiler: a kernel in use, or among the last `LOADED` asked for, is
    not compiled or loaded again."""
    return Compiler()
