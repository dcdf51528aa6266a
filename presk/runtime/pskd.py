"""`.psk.d`: presk's container for checkpoints and data files.

A `.psk.d` is a directory of two files:

- `header.json`: `{"format": "presk.psk.d", "version": 1, "kind": …, "meta": {…},
  "arrays": [{"name", "dtype", "shape", "offset", "nbytes"}, …],
  "payload": {"file": "payload.bin", "nbytes", "sha256"}}`;
- `payload.bin`: the arrays' bytes, little-endian and C-ordered, one after another at
  their offsets. Exact reals (dtype `mpfr`, the reference's values) are stored element by
  element as gmpy2's portable binary form, each preceded by its length (uint32).

It is written into a temporary directory beside its destination and renamed into place,
so a reader finds the old container or the new one, never a mix. A payload shorter than
the header says is truncated (E9003); one whose size or checksum differs is corrupt
(E9004); a missing or unreadable header is E9001/E9002.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass

import gmpy2
import ml_dtypes
import numpy as np

from presk.errors import FileFormatError

FORMAT = "presk.psk.d"
VERSION = 1
DTYPES = ("float64", "float32", "bfloat16", "int64", "bool", "uint16", "uint8", "int8", "mpfr")


_MPFR = type(gmpy2.mpfr(0))


def _encode(arr: np.ndarray) -> tuple[str, bytes]:
    if arr.dtype == object:
        parts = []
        for x in arr.ravel().tolist():
            blob = gmpy2.to_binary(x if isinstance(x, _MPFR) else gmpy2.mpfr(x))
            parts.append(len(blob).to_bytes(4, "little") + blob)
        return "mpfr", b"".join(parts)
    if arr.dtype.name not in DTYPES:
        raise ValueError(f"cannot store {arr.dtype} in a .psk.d")
    arr = np.ascontiguousarray(arr)
    return arr.dtype.name, arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def _decode(dtype: str, shape: tuple[int, ...], data: bytes) -> np.ndarray:
    if dtype == "mpfr":
        out, pos = [], 0
        for _ in range(int(np.prod(shape, dtype=np.int64))):
            n = int.from_bytes(data[pos : pos + 4], "little")
            out.append(gmpy2.from_binary(data[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        if pos != len(data):
            raise ValueError("size")
        return np.array(out + [None], dtype=object)[:-1].reshape(shape)
    dt = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype).newbyteorder("<")
    if len(data) != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
        raise ValueError("size")
    return np.frombuffer(data, dtype=dt).reshape(shape).copy()


@dataclass
class Container:
    kind: str  # "checkpoint" | "data"
    meta: dict
    arrays: dict[str, np.ndarray]


def write(path: str, container: Container) -> None:
    """Write `container` to the directory `path`, atomically."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(path)}.")
    try:
        entries, offset = [], 0
        digest = hashlib.sha256()
        with open(os.path.join(tmp, "payload.bin"), "wb") as f:
            for name, arr in container.arrays.items():
                dtype, data = _encode(np.asarray(arr))
                f.write(data)
                digest.update(data)
                entries.append(
                    {
                        "name": name,
                        "dtype": dtype,
                        "shape": list(np.shape(arr)),
                        "offset": offset,
                        "nbytes": len(data),
                    }
                )
                offset += len(data)
            f.flush()
            os.fsync(f.fileno())
        header = {
            "format": FORMAT,
            "version": VERSION,
            "kind": container.kind,
            "meta": container.meta,
            "arrays": entries,
            "payload": {"file": "payload.bin", "nbytes": offset, "sha256": digest.hexdigest()},
        }
        with open(os.path.join(tmp, "header.json"), "w") as f:
            json.dump(header, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_dir(new: str, path: str) -> None:
    """Move directory `new` to `path`; an older `path` is removed only once `new` is there."""
    if not os.path.exists(path):
        os.rename(new, path)
        return
    old = f"{new}.old"
    os.rename(path, old)
    os.rename(new, path)
    shutil.rmtree(old, ignore_errors=True)


def _fail(code: str, path: str, message: str) -> FileFormatError:
    return FileFormatError(f"{path}: {message}", code=code)


def read(path: str) -> Container:
    """Read a `.psk.d`, checking its header, size and checksum."""
    header_path = os.path.join(path, "header.json")
    if not os.path.isdir(path) or not os.path.exists(header_path):
        raise _fail("E9001", path, "not a .psk.d container (a directory with header.json)")
    try:
        with open(header_path, encoding="utf-8") as f:
            header = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail("E9002", path, f"header.json is not readable JSON ({e})") from None
    try:
        if header["format"] != FORMAT or header["version"] != VERSION:
            raise _fail(
                "E9002", path, f"unknown format {header['format']!r} version {header['version']!r}"
            )
        payload = header["payload"]
        entries = header["arrays"]
        kind, meta = header["kind"], header["meta"]
        total, checksum = int(payload["nbytes"]), str(payload["sha256"])
        file = os.path.join(path, os.path.basename(str(payload["file"])))
    except (KeyError, TypeError, ValueError):
        raise _fail("E9002", path, "header.json lacks the fields of a .psk.d header") from None
    try:
        with open(file, "rb") as f:
            data = f.read()
    except OSError:
        raise _fail("E9003", path, "the payload file is missing") from None
    if len(data) < total:
        raise _fail("E9003", path, f"truncated: the payload has {len(data)} of its {total} bytes")
    if len(data) != total or hashlib.sha256(data).hexdigest() != checksum:
        raise _fail("E9004", path, "corrupt: the payload does not match its checksum")
    arrays = {}
    for e in entries:
        try:
            if e["dtype"] not in DTYPES:
                raise ValueError(e["dtype"])
            shape = tuple(int(s) for s in e["shape"])
            start, n = int(e["offset"]), int(e["nbytes"])
            if start < 0 or start + n > total:
                raise ValueError("size")
            arrays[str(e["name"])] = _decode(e["dtype"], shape, data[start : start + n])
        except (KeyError, TypeError, ValueError):
            raise _fail("E9002", path, f"array entry {e!r} of header.json is malformed") from None
    return Container(kind, meta, arrays)
