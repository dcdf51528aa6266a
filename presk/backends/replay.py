"""Many launches in one native call: a schedule's segments replayed in C.

`replay.c` (beside this module) is a small C runtime, with `draws.c` (dropout's keep
mask, a step a segment runs as it runs a kernel's): `presk_replay(steps, n, regions)`
calls each step's kernel in order on the addresses its (region, offset) pairs name, with
its `lo, hi`; a step's `pieces`, when more than one, run on a pool of native worker
threads (started on first need, living for the process) and the calling thread. It is
compiled once with the system C compiler (`-pthread`), keyed by a hash of its source, the
compiler and its flags: at set-up (`python -m presk.backends.replay`, which `make setup`
runs) into `INSTALLED` beside this module, else at first need into the kernel cache's
`replay` folder (presk/backends/native.py). It is verified on every load as a kernel's
library is: a library damaged or swapped is not run (the cache's is built again). A
`Segment` is a run of launches a schedule makes one ctypes call of, in place of one call
a launch.
"""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np

from presk.backends.native import Compiler, Entry, c_compiler, cached_library, stored_library
from presk.errors import PreskError, ToolchainError

# the runtime's C sources: the replay and its pool, and dropout's draws (draws.c)
SOURCES = [Path(__file__).with_name("replay.c"), Path(__file__).with_name("draws.c")]
FLAGS = ["-O2", "-shared", "-fPIC", "-pthread"]
# Where set-up builds the runtime, so that a first native run with an empty kernel cache
# does not wait for `cc` (up to a second beside LLVM's work); only read at run time.
INSTALLED = Path(__file__).with_name("built")


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
        # a kernel's signature: (key, mask, lo, hi), as a launch made from Python calls it
        self.dropout_keep = library.presk_dropout_keep
        self.dropout_keep.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_int64,
        ]
        self.dropout_keep.restype = None


class Segment:
    """A schedule step running `launches`, each (kernel function, buffers as (region,
    offset), lo, hi, the pieces [lo, hi) is split in), in one call of `presk_replay`."""

    def __init__(self, replay: Replay, launches: list[tuple[object, list, int, int, int]]):
        self.replay = replay
        self.run = replay.run
        self.kernels = [fn for fn, *_ in launches]  # held: the steps point into them
        self.pieces = [pieces for *_, pieces in launches]  # each launch's, 1 if unsplit
        counts = [len(buffers) for _, buffers, *_ in launches]
        # every launch's (region, offset) pairs, one after another
        self.pairs = np.array(
            [x for _, buffers, *_ in launches for pair in buffers for x in pair], np.int64
        )
        first = np.cumsum([0, *counts[:-1]], dtype=np.int64)  # each launch's first pair
        # replay.c's `step`s, each six 8-byte fields: fn, buffers, at, lo, hi, pieces
        self.steps = np.empty((len(launches), 6), np.int64)
        # a function's address, the pointer its ctypes object holds (`cast` is 5x slower)
        self.steps[:, 0] = [ctypes.c_void_p.from_buffer(fn).value for fn in self.kernels]
        self.steps[:, 1] = counts
        self.steps[:, 2] = self.pairs.ctypes.data + 16 * first
        self.steps[:, 3:] = [(lo, hi, pieces) for _, _, lo, hi, pieces in launches]
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
    source, cc, key = _keyed()
    installed = Entry(INSTALLED, key, ".c")
    if installed.holds(source):
        try:
            return Replay(ctypes.CDLL(str(installed.lib)))
        except OSError:  # one this process cannot load: the cache's is used
            pass
    library, _, _ = cached_library(
        Entry(compiler.directory / "replay", key, ".c"),
        source,
        lambda so: _build(cc, so),
        lambda lib: ctypes.CDLL(str(lib)),
        compiler.warn,
        "presk-replay-",
    )
    return Replay(library)


def install(directory: Path = INSTALLED) -> Path:
    """The runtime built into `directory`, where `load` looks first (unless it holds it
    already), the entries of earlier sources removed: its library's path."""
    source, cc, key = _keyed()
    entry = Entry(directory, key, ".c")
    if not entry.holds(source):

        def refused(e: PreskError):
            raise e

        stored_library(entry, source, lambda so: _build(cc, so), ctypes.CDLL, refused)
    for stale in directory.glob("*/*"):
        if stale.stem != key and stale.suffix in (".so", ".c", ".blake2b"):
            stale.unlink()
    return entry.lib


def _keyed() -> tuple[str, str, str]:
    """The runtime's source, the C compiler, and the key of the library it makes."""
    source = source_text()
    cc = c_compiler()
    key = hashlib.blake2b(
        "\n".join([_identity(cc), *FLAGS, source]).encode(), digest_size=16
    ).hexdigest()
    return source, cc, key


def source_text() -> str:
    """The runtime's sources, as the cache holds them beside its library."""
    return "".join(path.read_text() for path in SOURCES)


def _identity(cc: str) -> str:
    """The compiler's path and its own account of its version."""
    said = subprocess.run([cc, "--version"], capture_output=True, text=True)
    return f"{Path(cc).resolve()}\n{said.stdout}"


def _build(cc: str, so: Path) -> None:
    made = subprocess.run([cc, *FLAGS, "-o", so, *SOURCES], capture_output=True, text=True)
    if made.returncode != 0:
        said = (made.stderr.strip().splitlines() or [f"exit status {made.returncode}"])[-1]
        raise ToolchainError(f"{cc} could not build the replay runtime: {said}")


def main() -> int:
    """Set-up's step: the runtime built into INSTALLED (a one-line error if it cannot be)."""
    try:
        print(f"replay runtime: {install()}")
    except PreskError as e:
        print(e.headline(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
