"""Writing files so that nothing a user has is ever half-overwritten."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data: str | bytes) -> None:
    """Write `data` to a temporary file beside `path`, then rename it over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.chmod(tmp, _mode_for(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _mode_for(path: str) -> int:
    """The permissions of the file being replaced, else the default for a new file (a
    temporary file is private, 0600, until then)."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
