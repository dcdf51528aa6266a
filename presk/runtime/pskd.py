"""`.psk.d`: presk's container for checkpoints and data files.

A `.psk.d` is a directory of two files:

- `header.json`: `{"format": "presk.psk.d", "version": 1, "kind": …, "meta": {…},
  "arrays": [{"name", "dtype", "shape", "offset", "nbytes"}, …],
  "payload": {"file": "payload.bin", "nbytes", "sha256"}}`;
- `payload.bin`: the arrays' bytes, little-endian and C-ordered, one after another at
  their offsets. Exact reals (dtype `mpfr`, the reference's values) are stored element by
  element as gmpy2's portable binary form, each preceded by its length (uint32).

Writing never leaves the path without a complete container, nor a reader with a mix: the
new container is written into `PATH.new-XXXXXXXX` beside it, the old one renamed to
`PATH.old`, the new one renamed to `PATH`, and only then is `PATH.old` removed. A writer
killed between the two renames leaves `PATH.old` alone: a reader reads it in place, and
the next writer renames it back before anything else, then removes what killed writers
left (`PATH.old` beside a complete `PATH`, any `PATH.new-*`). One writer a path at a time.

Reading checks the header before reading anything else: its size and nesting, then its
shape against `SCHEMA` and the arrays' layout (E9001/E9002); then the payload's size
(E9003 short, E9004 long) and checksum (E9004); then each exact real's encoding (E9002).
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import reprlib
import shutil
import stat
import tempfile
from dataclasses import dataclass

import gmpy2
import ml_dtypes
import numpy as np

from presk import jsontext
from presk.errors import FileFormatError, UsageError
from presk.fileio import PSKD_HEADER_BYTES, PSKD_HEADER_DEPTH
from presk.front.bindings import MAX_SIZE
from presk.prims import balls

FORMAT = "presk.psk.d"
VERSION = 1
DTYPES = ("float64", "float32", "bfloat16", "int64", "bool", "uint16", "uint8", "int8", "mpfr")
HEADER_BYTES, HEADER_DEPTH = PSKD_HEADER_BYTES, PSKD_HEADER_DEPTH
MPFR_BITS = 1 << 16  # the largest precision read back: a value costs its bits in memory

SCHEMA = {
    "type": "object",
    "required": ["format", "version", "kind", "meta", "arrays", "payload"],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"const": VERSION},
        "kind": {"enum": ["checkpoint", "data"]},
        "meta": {"type": "object"},
        "arrays": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "dtype", "shape", "offset", "nbytes"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "dtype": {"enum": list(DTYPES)},
                    "shape": {
                        "type": "array",
                        "maxItems": 32,
                        "items": {"type": "integer", "minimum": 0, "maximum": MAX_SIZE},
                    },
                    "offset": {"type": "integer", "minimum": 0},
                    "nbytes": {"type": "integer", "minimum": 0},
                },
            },
        },
        "payload": {
            "type": "object",
            "required": ["file", "nbytes", "sha256"],
            "properties": {
                "file": {"const": "payload.bin"},
                "nbytes": {"type": "integer", "minimum": 0},
                "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            },
        },
    },
}
_MPFR = type(gmpy2.mpfr(0))
_MPFR_MIN_BLOB = 12  # a length prefix and the 8 bytes of a zero, NaN or infinity


def _as_mpfr(x) -> gmpy2.mpfr:
    """An exact real as MPFR stores it: a ball (the certified reference's) by its midpoint."""
    if isinstance(x, _MPFR):
        return x
    return balls.midpoint(x) if isinstance(x, balls.arb) else gmpy2.mpfr(x)


def _encode(arr: np.ndarray) -> tuple[str, bytes]:
    if arr.dtype == object:
        parts = []
        for x in arr.ravel().tolist():
            blob = gmpy2.to_binary(_as_mpfr(x))
            parts.append(len(blob).to_bytes(4, "little") + blob)
        return "mpfr", b"".join(parts)
    if arr.dtype.name not in DTYPES:
        raise ValueError(f"cannot store {arr.dtype} in a .psk.d")
    arr = np.ascontiguousarray(arr)
    return arr.dtype.name, arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def dtype_name(a: np.ndarray) -> str:
    """The dtype `a` is stored as: `mpfr` for exact reals (numpy's object arrays)."""
    return "mpfr" if a.dtype == object else a.dtype.name


def _numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype).newbyteorder("<")


def _mpfr_blob_error(blob: bytes) -> str | None:
    """Why gmpy2's `from_binary` must not read `blob`, or None. It trusts its input (it
    reads as many limbs as the precision asks, past the end, and keeps a mantissa MPFR
    later aborts on), so the form `to_binary` writes is checked here: type 4, 32-bit
    fields, 64-bit limbs, and for a regular number a normalised mantissa of exactly the
    precision's limbs with its unused low bits zero."""
    if len(blob) < 8 or blob[0] != 4 or blob[1] & ~0x7B:
        return "not an mpfr"
    bits = int.from_bytes(blob[4:8], "little")
    if not 1 <= bits <= MPFR_BITS:
        return f"precision {bits} (presk reads 1 to {MPFR_BITS} bits)"
    if not blob[1] & 1:  # zero, NaN or infinity: the precision alone
        return None if len(blob) == 8 else "a special value with a mantissa"
    limbs = -(-bits // 64)
    if not blob[1] & 0x40 or len(blob) != 12 + 8 * limbs:
        return f"a mantissa of {len(blob) - 12} bytes for {bits} bits"
    mantissa = int.from_bytes(blob[12:], "little")
    if mantissa >> (64 * limbs - 1) != 1 or mantissa & ((1 << (64 * limbs - bits)) - 1):
        return "a mantissa that is not normalised"
    return None


def _decode_mpfr(count: int, data: bytes) -> np.ndarray:
    out, pos = [], 0
    for i in range(count):
        n = int.from_bytes(data[pos : pos + 4], "little")
        if pos + 4 + n > len(data):
            raise ValueError(f"element {i}'s length {n} runs past the array's bytes")
        blob = data[pos + 4 : pos + 4 + n]
        why = _mpfr_blob_error(blob)
        if why:
            raise ValueError(f"element {i} is {why}")
        out.append(gmpy2.from_binary(blob))
        pos += 4 + n
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes follow the last element")
    return np.array(out + [None], dtype=object)[:-1]


def _decode(dtype: str, shape: tuple[int, ...], data: bytes) -> np.ndarray:
    count = math.prod(shape)
    if dtype == "mpfr":
        return _decode_mpfr(count, data).reshape(shape)
    return np.frombuffer(data, dtype=_numpy_dtype(dtype)).reshape(shape).copy()


@dataclass
class Container:
    kind: str  # "checkpoint" | "data"
    meta: dict
    arrays: dict[str, np.ndarray]


# ---- writing ----


def write(path: str, container: Container) -> None:
    """Write `container` to the directory `path`, replacing a container there recoverably."""
    path = os.path.realpath(path)  # a link to a container: the container is replaced
    try:
        _write_replacing(path, container)
    except OSError as e:
        raise UsageError(f"{path}: cannot write here ({e.strerror})", code="E0003") from None


def _write_replacing(path: str, container: Container) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _recover(path)
    _refuse_non_container(path)
    _remove_strays(path)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=f"{os.path.basename(path)}.new-")
    try:
        _write_into(tmp, container)
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_into(directory: str, container: Container) -> None:
    """The payload, then the header, each synced: a header names only bytes on disk."""
    entries, offset = [], 0
    digest = hashlib.sha256()
    with open(os.path.join(directory, "payload.bin"), "wb") as f:
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
    with open(os.path.join(directory, "header.json"), "w") as f:
        json.dump(header, f, indent=1)
        f.flush()
        os.fsync(f.fileno())


def _old(path: str) -> str:
    return f"{path}.old"


def _replace_dir(new: str, path: str) -> None:
    """Move directory `new` to `path`. Between the two renames only `PATH.old` exists,
    which readers read and the next writer restores; it is removed once `new` is there."""
    if os.path.lexists(path):
        os.rename(path, _old(path))
    os.rename(new, path)
    shutil.rmtree(_old(path), ignore_errors=True)


def _recover(path: str) -> None:
    """Rename back the container a writer killed between its renames left at `PATH.old`."""
    if not os.path.lexists(path) and _is_container(_old(path)):
        os.rename(_old(path), path)


def _remove_strays(path: str) -> None:
    """Remove what killed writers left: `PATH.old` (once `PATH` is whole) and `PATH.new-*`."""
    strays = glob.glob(glob.escape(path) + ".new-*")
    if os.path.lexists(path):
        strays.append(_old(path))
    for stray in strays:
        if os.path.isdir(stray) and not os.path.islink(stray):
            shutil.rmtree(stray, ignore_errors=True)


def _refuse_non_container(path: str) -> None:
    """A device, a file or a directory of the user's is never renamed away."""
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path):
        raise UsageError(
            f"{path}: not a directory; presk replaces only a .psk.d container", code="E0003"
        )
    if os.listdir(path) and not _is_container(path):
        raise UsageError(
            f"{path}: a directory that is not a .psk.d container; presk will not replace it",
            code="E0003",
        )


def _is_container(directory: str) -> bool:
    """Whether `directory` holds a header of this format (its contents unchecked)."""
    try:
        header = _load_header(directory, directory)
    except FileFormatError:
        return False
    return isinstance(header, dict) and header.get("format") == FORMAT


# ---- reading ----


def _fail(code: str, path: str, message: str) -> FileFormatError:
    return FileFormatError(f"{path}: {message}", code=code)


def _found(path: str) -> str:
    """Where the container at `path` is: `path`, or the `PATH.old` a writer killed
    between its renames left."""
    if not os.path.lexists(path) and os.path.isdir(_old(path)):
        return _old(path)
    return path


def _load_header(directory: str, path: str) -> object:
    """header.json parsed, refused unreadable, larger than HEADER_BYTES or nested deeper
    than HEADER_DEPTH (json's parser would run out of stack)."""
    header_path = os.path.join(directory, "header.json")
    try:
        info = os.stat(header_path) if os.path.isdir(directory) else None
    except OSError:
        info = None
    if info is None:
        raise _fail("E9001", path, "not a .psk.d container (a directory with header.json)")
    if not stat.S_ISREG(info.st_mode):
        raise _fail("E9002", path, "header.json is not a regular file")
    if info.st_size > HEADER_BYTES:
        raise _fail("E9002", path, f"header.json has {info.st_size} bytes, over {HEADER_BYTES}")
    try:
        with open(header_path, "rb") as f:
            text = f.read(HEADER_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise _fail("E9002", path, f"header.json is not readable UTF-8 text ({e})") from None
    try:
        return jsontext.parse(text, HEADER_DEPTH)
    except ValueError as e:
        raise _fail("E9002", path, f"header.json: {e}") from None


def _schema_error(header: object) -> str | None:
    error = jsontext.first_violation(header, SCHEMA)
    if error is None:
        return None
    message = error.message if len(error.message) <= 200 else error.message[:200] + "…"
    return f"{error.json_path}: {message}"


def _layout_error(header: dict) -> str | None:
    """Why the arrays do not tile the payload: distinct names, each starting where the
    one before ends, its bytes those of its shape, the last ending at the payload's end."""
    names, end = set(), 0
    for e in header["arrays"]:
        name, count = reprlib.repr(e["name"]), math.prod(e["shape"])  # a name may be huge
        if e["name"] in names:
            return f"array {name} appears twice"
        names.add(e["name"])
        if e["offset"] != end:
            return f"array {name} starts at byte {e['offset']}, not {end}"
        if e["dtype"] == "mpfr":
            if e["nbytes"] < count * _MPFR_MIN_BLOB:
                return f"array {name} has {e['nbytes']} bytes for {count} exact reals"
        elif e["nbytes"] != (need := count * _numpy_dtype(e["dtype"]).itemsize):
            return f"array {name} has {e['nbytes']} bytes, its shape {e['shape']} needs {need}"
        end += e["nbytes"]
    if end != header["payload"]["nbytes"]:
        return f"the arrays take {end} bytes, the payload {header['payload']['nbytes']}"
    return None


def _read_payload(directory: str, payload: dict, path: str) -> bytes:
    file = os.path.join(directory, payload["file"])
    try:
        info = os.stat(file)
    except OSError:
        raise _fail("E9003", path, "the payload file is missing") from None
    if not stat.S_ISREG(info.st_mode):
        raise _fail("E9003", path, "the payload is not a regular file")
    total = payload["nbytes"]
    if info.st_size < total:
        raise _fail(
            "E9003", path, f"truncated: the payload has {info.st_size} of its {total} bytes"
        )
    if info.st_size > total:
        raise _fail("E9004", path, f"corrupt: the payload has {info.st_size} bytes, not {total}")
    try:
        with open(file, "rb") as f:
            data = f.read(total + 1)
    except OSError as e:
        raise _fail("E9003", path, f"the payload is not readable ({e.strerror})") from None
    if len(data) != total or hashlib.sha256(data).hexdigest() != payload["sha256"]:
        raise _fail("E9004", path, "corrupt: the payload does not match its checksum")
    return data


def read(path: str) -> Container:
    """Read a `.psk.d`: its header checked whole before the payload is read, then the
    payload's size and checksum, then each array's bytes."""
    directory = _found(path)
    header = _load_header(directory, path)
    why = _schema_error(header) or _layout_error(header)
    if why:
        raise _fail("E9002", path, f"header.json: {why}")
    data = _read_payload(directory, header["payload"], path)
    arrays = {}
    for e in header["arrays"]:
        start, end = e["offset"], e["offset"] + e["nbytes"]
        try:
            arrays[e["name"]] = _decode(e["dtype"], tuple(e["shape"]), data[start:end])
        except ValueError as err:
            raise _fail("E9002", path, f"array {reprlib.repr(e['name'])}: {err}") from None
    return Container(header["kind"], header["meta"], arrays)
