"""Native libraries on disk: the kernel cache's entries, and the small C libraries presk
builds with the system compiler.

An `Entry` is a library's place under a directory, named by a key: the library, the text
it was made from (a kernel's MLIR, or C source) and the library's digest (BLAKE2b keyed
by the key), checked on every load, so a library truncated, damaged or swapped for
another's is made again rather than run. Each file is written atomically.

A `CLibrary` is C source of presk's own (the replay runtime, presk/backends/replay.py;
the MLIR printer, presk/backends/printer.py), compiled with the system C compiler and
keyed by a hash of its source, the compiler (its file's resolved path, size and time)
and the flags. Set-up (`python -m presk.backends.install`, which `make setup`
runs) builds each into its folder of `INSTALLED`, beside this module, where a run looks
first, verified like a cached library.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from presk.errors import PreskError, ToolchainError, UsageError
from presk.fileio import write_atomic

# Where set-up builds presk's C libraries, a folder each; only read at run time.
INSTALLED = Path(__file__).with_name("built")


def cached_library(entry: Entry, text: str, build, load, warn, scratch: str = "presk-kernel-"):
    """What `load` makes of the library the cache holds for `text`, verified, else of the
    library `build(path)` writes, stored in the cache (`stored_library`); with the
    library's cache path (None if not stored) and whether it was a hit."""
    if entry.holds(text):
        try:
            return load(entry.lib), entry.lib, True
        except OSError:  # a library this installation cannot load: made again
            pass
    return (*stored_library(entry, text, build, load, warn, scratch), False)


def stored_library(entry: Entry, text: str, build, load, warn, scratch: str = "presk-kernel-"):
    """What `load` makes of the library `build(path)` writes, stored in the cache as
    `text`'s (a cache that cannot hold it is told to `warn`), and its cache path (None if
    not stored). A library is built and loaded in a temporary directory (named `scratch`…),
    named by its key: the dynamic loader reuses an object loaded from the same path."""
    with tempfile.TemporaryDirectory(prefix=scratch) as tmp:
        so = Path(tmp) / entry.lib.name
        build(so)
        loaded = load(so)
        try:
            entry.store(text, so.read_bytes())
        except UsageError as e:
            warn(e)
            return loaded, None
    return loaded, entry.lib


@dataclass(frozen=True)
class Entry:
    """A library's place in the cache: the library, the text it was made from (a kernel's
    MLIR, or C source: `suffix`) and the library's digest. The digest is written last, so
    an entry is whole once its digest matches. What an entry holds may be another made
    file than a library (`payload`: a tuned layout's `.json`, presk/backends/tuning.py),
    kept and checked the same way."""

    directory: Path
    key: str
    suffix: str = ".mlir"
    payload: str = ".so"

    @property
    def lib(self) -> Path:
        return self.directory / self.key[:2] / f"{self.key}{self.payload}"

    @property
    def text_file(self) -> Path:
        return self.lib.with_suffix(self.suffix)

    @property
    def digest_file(self) -> Path:
        return self.lib.with_suffix(".blake2b")

    def digest_of(self, library: bytes) -> bytes:
        """Keyed by the kernel's key, so another kernel's library, with its own digest,
        does not pass for this one."""
        return hashlib.blake2b(library, key=bytes.fromhex(self.key)).hexdigest().encode()

    def holds(self, text: str) -> bool:
        """Whether the cache holds this kernel: its text, and a library that matches its
        digest (read as bytes, so a library damaged in any way is never loaded)."""
        return self.verified(text) is not None

    def verified(self, text: str) -> bytes | None:
        """The library's bytes if the entry is `text`'s and whole (`holds`), else None."""
        library = _read_regular(self.lib)
        whole = (
            _read_regular(self.text_file) == text.encode()
            and library is not None
            and _read_regular(self.digest_file) == self.digest_of(library)
        )
        return library if whole else None

    def store(self, text: str, library: bytes) -> None:
        """Write the entry, each file atomically, so a process reading it while another
        writes never sees half a file (E0003 if the cache cannot hold it)."""
        write_atomic(self.lib, library)
        write_atomic(self.text_file, text)
        write_atomic(self.digest_file, self.digest_of(library))


def _read_regular(path: Path) -> bytes | None:
    """A regular file's bytes; None if it is missing, unreadable, or something else (a
    directory, or a FIFO that would block)."""
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def c_compiler() -> str:
    """The system C compiler, which links kernels and builds presk's C libraries."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise ToolchainError("the mlir backend links native code with a C compiler: install cc")
    return cc


@cache
def compiler_identity(cc: str) -> str:
    """The compiler's file: its resolved path, size and modification time, which an
    upgrade changes. (Its `--version`, asked of it, took 2-3 ms of every process's first
    run; a library another build of the compiler made from the same source is still that
    source's library, so this only decides when one is built again.)"""
    path = Path(cc).resolve()
    stat = path.stat()
    return f"{path}\n{stat.st_size}\n{stat.st_mtime_ns}"


@dataclass(frozen=True)
class CLibrary:
    """C source of presk's own, `what` in messages, compiled with `flags` into one
    shared library linked with `libs` (after the sources, which need them)."""

    what: str
    sources: tuple[Path, ...]
    flags: tuple[str, ...]
    libs: tuple[str, ...] = ()

    def source_text(self) -> str:
        """The sources, as an entry holds them beside the library."""
        return "".join(path.read_text() for path in self.sources)

    def keyed(self) -> tuple[str, str, str]:
        """The source, the C compiler, and the key of the library they make."""
        source = self.source_text()
        cc = c_compiler()
        parts = [compiler_identity(cc), *self.flags, *self.libs, source]
        return source, cc, hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()

    def build(self, cc: str, so: Path) -> None:
        argv = [cc, *self.flags, "-o", so, *self.sources, *self.libs]
        made = subprocess.run(argv, capture_output=True, text=True)
        if made.returncode != 0:
            said = (made.stderr.strip().splitlines() or [f"exit status {made.returncode}"])[-1]
            raise ToolchainError(f"{cc} could not build {self.what}: {said}")

    def installed(self, directory: Path) -> ctypes.CDLL | None:
        """The library set-up built into `directory`, verified and loaded; None if it is
        not there whole, or this process cannot load it."""
        source, _, key = self.keyed()
        entry = Entry(directory, key, ".c")
        if not entry.holds(source):
            return None
        try:
            return ctypes.CDLL(str(entry.lib))
        except OSError:
            return None

    def install(self, directory: Path) -> Path:
        """The library built into `directory` (unless it holds it already), the entries of
        earlier sources removed: its path."""
        source, cc, key = self.keyed()
        entry = Entry(directory, key, ".c")
        if not entry.holds(source):

            def refused(e: PreskError):
                raise e

            stored_library(entry, source, lambda so: self.build(cc, so), ctypes.CDLL, refused)
        for stale in directory.glob("*/*"):
            if stale.stem != key and stale.suffix in (".so", ".c", ".blake2b"):
                stale.unlink()
        for folder in directory.iterdir():
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return entry.lib
