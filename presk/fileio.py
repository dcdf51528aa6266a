"""Writing files so that nothing a user has is ever half-overwritten.

`write_atomic` is the one place presk writes a file. It writes only a regular file or a
new path: renaming a file over a device (`/dev/full`, `/dev/null`) would replace the
device for everyone, so a device, a directory, a FIFO or a path under a non-directory is
refused (E0003), as is any path the system will not let presk write.

`read_text` reads a text input (a program, MLIR) up to a size: what cannot be read, a
larger file and bytes that are not UTF-8 are refused (E0002).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from typing import BinaryIO

import numpy as np

from presk.errors import UsageError, closest

# What a path is when it is not a regular file, for the refusal's message.
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write `data` to a temporary file beside `path`, then rename it over `path`."""
    path = os.fspath(path)
    check_writable(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
        )
    except OSError as e:
        raise _refusal(path, e.strerror or str(e)) from None
    try:
        os.chmod(tmp, _mode_for(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk, say, or a directory made at `path` meanwhile
        _discard(tmp)
        raise _refusal(path, e.strerror or str(e)) from None
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: str) -> None:
    if os.path.exists(tmp):
        os.unlink(tmp)


def check_writable(path: str | os.PathLike) -> None:
    """Refuse a path that exists and is not a regular file, or that cannot be looked at
    (under a regular file, say): a command checks its outputs' paths before it computes."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise _refusal(path, e.strerror or str(e)) from None
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise _refusal(path, f"it is {kind}; presk writes only regular files")


def _refusal(path: str, reason: str) -> UsageError:
    return UsageError(f"cannot write {path}: {reason}", code="E0003")


def _mode_for(path: str) -> int:
    """The permissions of the file being replaced, else the default for a new file (a
    temporary file is private, 0600, until then)."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def read_text(path: str, max_bytes: int, stream: BinaryIO | None = None) -> str:
    """The UTF-8 text of `path`, or of `stream` (standard input, say) named `path`.

    At most `max_bytes + 1` bytes are read, so an endless device (`/dev/zero`) ends in a
    refusal rather than a read without bound; a FIFO or a device is read like a file."""
    try:
        if stream is not None:
            data = stream.read(max_bytes + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
    except OSError as e:  # missing, a directory, unreadable
        raise _unreadable(path, e.strerror or str(e)) from None
    if len(data) > max_bytes:
        raise _unreadable(path, f"larger than {max_bytes >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _unreadable(path, f"not UTF-8 text (byte {e.start})") from None


def _unreadable(path: str, reason: str) -> UsageError:
    return UsageError(f"cannot read {path}: {reason}", code="E0002")


# A program is a few kilobytes. Parsing takes lark about 20 s and 600 MB a dense
# megabyte, so past this a file is a mistake (or /dev/zero), refused unparsed.
MAX_SOURCE_BYTES = 1 << 20
# A .psk.d container's header.json (presk/runtime/pskd.py): it lists the arrays and holds
# `meta`, never the data; JSON nested at most this deep (presk writes at most 5 levels).
PSKD_HEADER_BYTES = 64 << 20
PSKD_HEADER_DEPTH = 32


def source_line(path: str, line: int) -> str | None:
    """Line `line` (1-based) of the source file `path`, for an error's excerpt; None if
    the file cannot be read or has no such line."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read(MAX_SOURCE_BYTES).splitlines()
    except OSError:
        return None
    return lines[line - 1] if 0 < line <= len(lines) else None


def too_deep(text: str, pairs: str, limit: int, skip: re.Pattern) -> int | None:
    """Where the first bracket opening level `limit` + 1 is (an index into `text`), the
    brackets being `pairs` ("{}[]": opens and closes alternate) outside what `skip`
    matches (strings, comments); None if the text nests no deeper. A recursive parser
    (json.loads, MLIR's) is handed only text measured so, in linear time."""
    # Blank what is skipped or not ASCII, so each byte is the character of its index.
    masked = re.sub(f"(?:{skip.pattern})|[^\\x00-\\x7f]+", lambda m: " " * len(m.group()), text)
    codes = np.frombuffer(masked.encode("ascii"), np.uint8)
    opens, closes = [ord(c) for c in pairs[0::2]], [ord(c) for c in pairs[1::2]]
    brackets = np.flatnonzero(np.isin(codes, opens + closes))
    steps = np.where(np.isin(codes[brackets], opens), 1, -1)
    over = np.flatnonzero(np.cumsum(steps) > limit)
    return int(brackets[over[0]]) if over.size else None


def no_such_file(path: str) -> str:
    """What a refusal says of a path that is not there: `no such file`, and the name in
    its folder nearest its own, if one is near."""
    folder, name = os.path.split(path)
    try:
        names = os.listdir(folder or ".")
    except OSError:  # the folder is not there either
        names = []
    near = closest(name, names)
    return "no such file" + (f"; did you mean {os.path.join(folder, near)}?" if near else "")


def check_exists(path: str) -> None:
    """Refuse (E0002) a path to read that is not there."""
    if not os.path.lexists(path):
        raise UsageError(f"cannot read {path}: {no_such_file(path)}", code="E0002")
