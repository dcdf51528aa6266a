"""Many launches in one native call: a schedule's segments replayed in C.

`replay.c` (beside this module) is a small C runtime, with `draws.c` (dropout's keep
mask, a step a segment runs as it runs a kernel's) and a copy run the same way (a fold's
layers stacked): `presk_replay(steps, n, regions)`
calls each step's kernel in order on the addresses its (region, offset) pairs name, with
its `lo, hi`; a step's `pieces`, when more than one, run on a pool of native worker
threads (started on first need, living for the process) and the calling thread. It is
one of presk's C libraries (presk/backends/libraries.py), compiled with `-pthread`: at
set-up into `INSTALLED`, else at first need into the kernel cache's `replay` folder
(presk/backends/native.py). It is verified on every load as a kernel's library is: a
library damaged or swapped is not run (the cache's is built again). A `Segment` is a run
of launches a schedule makes one ctypes call of, in place of one call a launch.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from presk.backends import libraries
from presk.backends.libraries import CLibrary, Entry, cached_library
from presk.backends.native import Compiler

# the runtime's C sources: the replay and its pool, and dropout's draws (draws.c)
SOURCES = (Path(__file__).with_name("replay.c"), Path(__file__).with_name("draws.c"))
FLAGS = ("-O2", "-shared", "-fPIC", "-pthread")
RUNTIME = CLibrary("the replay runtime", SOURCES, FLAGS)
# Where set-up builds the runtime, so that a first native run with an empty kernel cache
# does not wait for `cc` (up to a second beside LLVM's work).
INSTALLED = libraries.INSTALLED / "replay"


class Replay:
    """The loaded runtime: `buffers`, the most buffers a step may take, `run` (a segment's
    launches) and `timed` (the same, each launch's nanoseconds written out)."""

    def __init__(self, library: ctypes.CDLL):
        self.library = library  # held: `run` lives in it
        self.buffers = library.presk_replay_buffers()
        self.run = library.presk_replay
        self.run.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        self.run.restype = None
        self.timed = library.presk_replay_timed
        self.timed.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self.timed.restype = None
        # called as kernels are, on two buffers and a range [lo, hi): dropout's draw
        # (key, mask) and a copy of bytes (src, dst)
        self.dropout_keep = _two_buffer_kernel(library.presk_dropout_keep)
        self.copy = _two_buffer_kernel(library.presk_copy)


def _two_buffer_kernel(fn):
    """A runtime function with a kernel's signature of two buffers, as a launch made from
    Python calls it: (buffer, buffer, lo, hi)."""
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    fn.restype = None
    return fn


class Segment:
    """A schedule step running `launches`, each (kernel function, buffers as (region,
    offset), lo, hi, the pieces [lo, hi) is split in, the threads that claim them), in
    one call of `presk_replay`."""

    def __init__(self, replay: Replay, launches: list[tuple[object, list, int, int, int, int]]):
        self.replay = replay
        self.run = replay.run
        self.kernels = [fn for fn, *_ in launches]  # held: the steps point into them
        self.pieces = [pieces for *_, pieces, _ in launches]  # each launch's, 1 if unsplit
        counts = [len(buffers) for _, buffers, *_ in launches]
        # every launch's (region, offset) pairs, one after another
        self.pairs = np.array(
            [x for _, buffers, *_ in launches for pair in buffers for x in pair], np.int64
        )
        first = np.cumsum([0, *counts[:-1]], dtype=np.int64)  # each launch's first pair
        # replay.c's `step`s, each seven 8-byte fields: fn, buffers, at, lo, hi, pieces,
        # workers
        self.steps = np.empty((len(launches), 7), np.int64)
        # a function's address, the pointer its ctypes object holds (`cast` is 5x slower)
        self.steps[:, 0] = [ctypes.c_void_p.from_buffer(fn).value for fn in self.kernels]
        self.steps[:, 1] = counts
        self.steps[:, 2] = self.pairs.ctypes.data + 16 * first
        self.steps[:, 3:] = [launch[2:] for launch in launches]
        self.address = self.steps.ctypes.data
        self.count = len(launches)
        self.ns = (ctypes.c_int64 * self.count)()  # each launch's time in a timed run

    def __call__(self, regions, arrays, ctx) -> None:
        self.run(self.address, self.count, regions)

    def timed(self, regions) -> list[int]:
        """The segment run with each launch timed inside C (a breakdown): its nanoseconds."""
        self.replay.timed(self.address, self.count, regions, self.ns)
        return self.ns[:]


_loaded: dict[Path, Replay] = {}  # by cache directory


def replay_for(compiler: Compiler) -> Replay:
    """The runtime in `compiler`'s cache directory, loaded once a process."""
    replay = _loaded.get(compiler.directory)
    if replay is None:
        replay = _loaded[compiler.directory] = load(compiler)
    return replay


def load(compiler: Compiler) -> Replay:
    """The runtime set-up built, verified, else the one in `compiler`'s cache, verified,
    else built and stored there."""
    library = RUNTIME.installed(INSTALLED)
    if library is None:  # not set up, or one this process cannot load: the cache's
        source, cc, key = RUNTIME.keyed()
        library, _, _ = cached_library(
            Entry(compiler.directory / "replay", key, ".c"),
            source,
            lambda so: RUNTIME.build(cc, so),
            lambda lib: ctypes.CDLL(str(lib)),
            compiler.warn,
            "presk-replay-",
        )
    return Replay(library)


def install(directory: Path | None = None) -> Path:
    """The runtime built into `directory` (`INSTALLED`), where `load` looks first: its
    library's path."""
    return RUNTIME.install(directory or INSTALLED)


def source_text() -> str:
    """The runtime's sources, as the cache holds them beside its library."""
    return RUNTIME.source_text()
