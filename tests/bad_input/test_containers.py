"""Malformed `.psk.d` containers, read by `presk run --weights` and `presk train --data`.

Each case starts from a real container (a checkpoint of tutorial/01_linear.psk, a data
file of windows of 8 tokens) and damages one thing: the header's bytes, one of its
fields (a table of mutations), the arrays it holds, or the exact reals' encoding. Every
one must be refused with a code, never a traceback nor a signal.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os

import gmpy2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bad_input.refusal import refuse
from presk.errors import FileFormatError
from presk.runtime import pskd
from presk.train import data as token_data

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINEAR = os.path.join(REPO, "tutorial", "01_linear.psk")
MINIGPT = os.path.join(REPO, "tutorial", "05_minigpt.psk")
TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2", "--dim", "T=8"]


def run_argv(ckpt) -> list:
    return ["run", LINEAR, "--entry", "Linear{3, 2}.apply", "--dim", "batch=4", "--weights", ckpt]


def train_argv(data, tmp_path) -> list:
    return [
        *("train", MINIGPT, "--entry", "loss", *TINY, "--dim", "B=2", "--data", data),
        *("--steps", "1", "--backend", "interp", "--quiet", "--out", tmp_path / "run"),
    ]


def _checkpoint(path, arrays=None) -> str:
    arrays = arrays or {
        "params/w": np.arange(6.0).reshape(3, 2),
        "params/b": np.array([0.5, -0.5]),
    }
    pskd.write(str(path), pskd.Container("checkpoint", {"entry": "Linear{3, 2}.apply"}, arrays))
    return str(path)


def _data(path, tmp_path, change=None) -> str:
    text = tmp_path / "corpus.txt"
    text.write_text("a small corpus of text, read as bytes, for windows of 8 tokens. " * 8)
    c = token_data.build([str(text)], 8)
    if change:
        change(c)
    pskd.write(str(path), c)
    return str(path)


def _header(path) -> dict:
    with open(os.path.join(path, "header.json")) as f:
        return json.load(f)


def _write_header(path, header) -> None:
    with open(os.path.join(path, "header.json"), "w") as f:
        json.dump(header, f)


# ---- one field of header.json changed ----


def _set(where: tuple, value):
    def change(h):
        *parents, last = where
        for key in parents:
            h = h[key]
        h[last] = value(h[last]) if callable(value) else value

    return change


def _drop(where: tuple):
    def change(h):
        *parents, last = where
        for key in parents:
            h = h[key]
        del h[last]

    return change


def _whole(value):
    def change(h):
        h.clear()
        h["replaced"] = value

    return change


FIRST = ("arrays", 0)
SECOND = ("arrays", 1)
HEADER_MUTATIONS = {
    "top is a list": lambda h: [h],
    "top is a string": lambda h: "header",
    **{f"no {k}": _drop((k,)) for k in ("format", "version", "kind", "meta", "arrays", "payload")},
    "format other": _set(("format",), "other.format"),
    "version 2": _set(("version",), 2),
    "version '1'": _set(("version",), "1"),
    "version true": _set(("version",), True),
    "kind model": _set(("kind",), "model"),
    "kind 3": _set(("kind",), 3),
    "meta list": _set(("meta",), []),
    "meta null": _set(("meta",), None),
    "meta string": _set(("meta",), "meta"),
    "arrays object": _set(("arrays",), {}),
    "arrays string": _set(("arrays",), "arrays"),
    "arrays of numbers": _set(("arrays",), [3]),
    "arrays of nulls": _set(("arrays",), [None]),
    "no arrays at all": _set(("arrays",), []),
    **{
        f"entry without {k}": _drop((*FIRST, k))
        for k in ("name", "dtype", "shape", "offset", "nbytes")
    },
    "name a number": _set((*FIRST, "name"), 5),
    "name empty": _set((*FIRST, "name"), ""),
    "name twice": lambda h: h["arrays"][1].update(name=h["arrays"][0]["name"]),
    "dtype complex128": _set((*FIRST, "dtype"), "complex128"),
    "dtype object": _set((*FIRST, "dtype"), "object"),
    "dtype null": _set((*FIRST, "dtype"), None),
    "shape a string": _set((*FIRST, "shape"), "3"),
    "shape of strings": _set((*FIRST, "shape"), lambda s: [str(n) for n in s]),
    "shape negative": _set((*FIRST, "shape"), lambda s: [-1, *s]),
    "shape fractional": _set((*FIRST, "shape"), lambda s: [1.5, *s]),
    "shape 2.0": _set((*FIRST, "shape"), lambda s: [float(n) for n in s]),
    "shape 2**64": _set((*FIRST, "shape"), lambda s: [2**64, *s]),
    "shape true": _set((*FIRST, "shape"), lambda s: [True, *s]),
    "shape of 33 axes": _set((*FIRST, "shape"), lambda s: [1] * 33),
    "shape overflowing 64 bits": _set((*FIRST, "shape"), lambda s: [2**62, 2**62, 16, *s]),
    "shape of zero by huge": _set((*FIRST, "shape"), lambda s: [0, 2**62, 2**62]),
    "shape disagrees with nbytes": _set((*FIRST, "shape"), lambda s: [n + 1 for n in s]),
    "offset negative": _set((*FIRST, "offset"), -1),
    "offset a string": _set((*FIRST, "offset"), "0"),
    "offset 0.0": _set((*FIRST, "offset"), 0.0),
    "offset null": _set((*FIRST, "offset"), None),
    "offset past a gap": _set((*SECOND, "offset"), lambda o: o + 8),
    "offset overlapping": _set((*SECOND, "offset"), lambda o: o - 1),
    "offset past the payload": _set((*SECOND, "offset"), 2**70),
    "nbytes negative": _set((*FIRST, "nbytes"), -8),
    "nbytes one short": _set((*FIRST, "nbytes"), lambda n: n - 1),
    "nbytes one over": _set((*FIRST, "nbytes"), lambda n: n + 1),
    "nbytes 2**70": _set((*FIRST, "nbytes"), 2**70),
    "nbytes a string": _set((*FIRST, "nbytes"), lambda n: str(n)),
    "payload a list": _set(("payload",), []),
    **{f"payload without {k}": _drop(("payload", k)) for k in ("file", "nbytes", "sha256")},
    "payload file elsewhere": _set(("payload", "file"), "../payload.bin"),
    "payload file the header": _set(("payload", "file"), "header.json"),
    "payload nbytes short": _set(("payload", "nbytes"), lambda n: n - 1),
    "payload nbytes long": _set(("payload", "nbytes"), lambda n: n + 1),
    "payload nbytes huge": _set(("payload", "nbytes"), 2**80),
    "sha256 short": _set(("payload", "sha256"), "abc"),
    "sha256 a number": _set(("payload", "sha256"), 7),
}


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """One real checkpoint and one real data file, copied before each damage."""
    base = tmp_path_factory.mktemp("originals")
    return {
        "run": _checkpoint(base / "lin.psk.d"),
        "train": _data(base / "d.psk.d", base),
    }


def _damaged_copy(originals, command, tmp_path, change) -> str:
    path = tmp_path / f"{command}.psk.d"
    os.makedirs(path)
    for name in ("header.json", "payload.bin"):
        with open(os.path.join(originals[command], name), "rb") as f:
            (path / name).write_bytes(f.read())
    header = _header(path)
    changed = change(header)
    _write_header(path, header if changed is None else changed)
    return str(path)


def _argv(command, path, tmp_path) -> list:
    return run_argv(path) if command == "run" else train_argv(path, tmp_path)


@pytest.mark.parametrize("command", ["run", "train"])
@pytest.mark.parametrize("mutation", sorted(HEADER_MUTATIONS))
def test_a_header_field_of_the_wrong_type_or_range_is_refused(
    originals, tmp_path, command, mutation
):
    path = _damaged_copy(originals, command, tmp_path, HEADER_MUTATIONS[mutation])
    refuse(_argv(command, path, tmp_path), code="E9002", says="header.json")


# ---- header.json's bytes ----

HEADER_TEXTS = {
    "empty": b"",
    "cut short": b'{"format": "presk.psk.d", "vers',
    "not UTF-8": b'\xff\xfe{"format": "presk.psk.d"}',
    "nested 100 000 deep": b"[" * 100_000 + b"]" * 100_000,
    "objects nested 100 000 deep": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "a 5000-digit number": b'{"version": 1' + b"0" * 5000 + b"}",
    "NaN for a size": b'{"format": "presk.psk.d", "version": NaN}',
}


@pytest.mark.parametrize("command", ["run", "train"])
@pytest.mark.parametrize("text", sorted(HEADER_TEXTS))
def test_an_unreadable_header_is_refused(originals, tmp_path, command, text):
    path = _damaged_copy(originals, command, tmp_path, lambda h: None)
    with open(os.path.join(path, "header.json"), "wb") as f:
        f.write(HEADER_TEXTS[text])
    refuse(_argv(command, path, tmp_path), code="E9002")


def test_a_huge_header_is_refused_unread(originals, tmp_path):
    path = _damaged_copy(originals, "run", tmp_path, lambda h: None)
    with open(os.path.join(path, "header.json"), "r+b") as f:
        f.truncate(1 << 30)  # sparse: nothing is written, nor read
    refuse(run_argv(path), code="E9002", says="bytes, over")


# Devices are reached through links to /dev/null: read, it ends at once, so a reader that
# forgot to refuse it fails its test rather than hang on a FIFO or fill memory from /dev/zero.
@pytest.mark.parametrize("what", ["a directory", "a device"])
def test_a_header_that_is_not_a_file_is_refused(originals, tmp_path, what):
    path = _damaged_copy(originals, "run", tmp_path, lambda h: None)
    header = os.path.join(path, "header.json")
    os.unlink(header)
    os.mkdir(header) if what == "a directory" else os.symlink("/dev/null", header)
    refuse(run_argv(path), code="E9002", says="not a regular file")


def test_a_payload_that_is_not_a_file_is_refused(originals, tmp_path):
    path = _damaged_copy(originals, "run", tmp_path, lambda h: None)
    payload = os.path.join(path, "payload.bin")
    os.unlink(payload)
    os.symlink("/dev/null", payload)
    refuse(run_argv(path), code="E9003", says="not a regular file")


# ---- the arrays a checkpoint holds ----


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int64", "uint16"])
def test_parameters_of_a_dtype_a_real_is_not_held_in_are_refused(tmp_path, dtype):
    path = _checkpoint(
        tmp_path / "c.psk.d",
        {"params/w": np.ones((3, 2), dtype=dtype), "params/b": np.zeros(2)},
    )
    refuse(run_argv(path), code="E9005", says=f"stored as {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_parameters_in_a_machine_type_are_read(tmp_path, dtype):
    import ml_dtypes

    t = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    path = _checkpoint(
        tmp_path / "c.psk.d",
        {"params/w": np.ones((3, 2), dtype=t), "params/b": np.zeros(2, dtype=t)},
    )
    from presk.cli import main as presk_main
    from presk.cli.common import run_cli

    assert run_cli(presk_main.main, [str(a) for a in run_argv(path)]) == 0


# ---- exact reals: each element's length and gmpy2 encoding ----


def _mpfr_payload(blobs: list[bytes], prefixes: list[int] | None = None) -> bytes:
    prefixes = prefixes or [len(b) for b in blobs]
    return b"".join(n.to_bytes(4, "little") + b for n, b in zip(prefixes, blobs, strict=True))


def _mpfr_checkpoint(path, w_payload: bytes) -> str:
    """A checkpoint whose `w` is the exact reals `w_payload` encodes, the header (offsets,
    sizes, checksum) made to agree with it, so only the encoding is wrong."""
    b = np.array([gmpy2.mpfr(0.5, 53), gmpy2.mpfr(-0.5, 53)], dtype=object)
    _checkpoint(path, {"params/w": np.zeros((3, 2)), "params/b": b})
    header = _header(path)
    with open(os.path.join(path, "payload.bin"), "rb") as f:
        b_bytes = f.read()[header["arrays"][1]["offset"] :]
    payload = w_payload + b_bytes
    header["arrays"][0].update(dtype="mpfr", nbytes=len(w_payload))
    header["arrays"][1].update(offset=len(w_payload))
    header["payload"].update(nbytes=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    with open(os.path.join(path, "payload.bin"), "wb") as f:
        f.write(payload)
    _write_header(path, header)
    return str(path)


def _blobs(bits: int = 53) -> list[bytes]:
    return [gmpy2.to_binary(gmpy2.mpfr(1.5 + i, bits)) for i in range(6)]


def _with_first(change) -> bytes:
    blobs = _blobs()
    blobs[0] = bytes(change(bytearray(blobs[0])))
    return _mpfr_payload(blobs)


def _flag(bits: int):
    def change(b):
        b[1] ^= bits
        return b

    return change


def _precision(bits: int):
    def change(b):
        b[4:8] = bits.to_bytes(4, "little")
        return b

    return change


def _byte(i: int, mask: int):
    def change(b):
        b[i] ^= mask
        return b

    return change


MPFR_PAYLOADS = {
    "a length running past the array": _mpfr_payload(_blobs(), [2**32 - 1] + [20] * 5),
    "a length running past the last element": _mpfr_payload(_blobs(), [20] * 5 + [21]),
    "a length of zero": _mpfr_payload(_blobs(), [0] * 6) + b"\0" * 100,
    "bytes after the last element": _mpfr_payload(_blobs()) + b"\0" * 12,
    "an mpz": _mpfr_payload([gmpy2.to_binary(gmpy2.mpz(7))] * 6) + b"\0" * 48,
    "a mantissa a byte short": _with_first(lambda b: b[:-1]),
    "a mantissa a byte long": _with_first(lambda b: b + b"\x80"),
    "a mantissa not normalised": _with_first(_byte(-1, 0x80)),
    "bits below the precision": _with_first(_byte(12, 0x01)),
    "64-bit fields": _with_first(_flag(0x04)),
    "32-bit limbs": _with_first(_flag(0x40)),
    "a special value with a mantissa": _with_first(_flag(0x01)),
    "an unknown flag": _with_first(_flag(0x80)),
    "precision 0": _with_first(_precision(0)),
    "precision 2**31": _with_first(_precision(2**31)),
    "precision 65 in one limb": _with_first(_precision(65)),
}


@pytest.mark.parametrize("case", sorted(MPFR_PAYLOADS))
def test_exact_reals_whose_encoding_is_damaged_are_refused(tmp_path, case):
    path = _mpfr_checkpoint(tmp_path / "c.psk.d", MPFR_PAYLOADS[case])
    refuse(run_argv(path), code="E9002", says="array 'params/w'")


def test_exact_reals_well_encoded_are_read(tmp_path):
    path = _mpfr_checkpoint(tmp_path / "c.psk.d", _mpfr_payload(_blobs()))
    w = pskd.read(path).arrays["params/w"]
    assert [str(x) for x in w.flat] == ["1.5", "2.5", "3.5", "4.5", "5.5", "6.5"]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=st.lists(st.tuples(st.integers(0, 119), st.integers(0, 255)), min_size=1, max_size=4))
def test_exact_reals_with_any_bytes_changed_are_refused_or_read_whole(tmp_path, edits):
    payload = bytearray(_mpfr_payload(_blobs()))
    for i, value in edits:
        payload[i] = value
    path = _mpfr_checkpoint(tmp_path / f"c{len(os.listdir(tmp_path))}.psk.d", bytes(payload))
    try:
        w = pskd.read(path).arrays["params/w"]
    except FileFormatError as e:
        assert e.code == "E9002"
        return
    assert all(str(x) for x in w.flat)  # where MPFR aborts on a value it cannot print


# ---- any JSON value anywhere in the header ----

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def _places(h, where=()):
    yield where
    children = h.items() if isinstance(h, dict) else enumerate(h) if isinstance(h, list) else ()
    for key, value in children:
        yield from _places(value, (*where, key))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_value_anywhere_in_a_header_is_refused_or_read(originals, tmp_path, data):
    header = _header(originals["run"])
    place = data.draw(st.sampled_from(list(_places(header))[1:]))
    changed = copy.deepcopy(header)
    _set(place, data.draw(JSON))(changed)
    path = _damaged_copy(
        originals, "run", tmp_path / str(len(os.listdir(tmp_path))), lambda h: changed
    )
    try:
        pskd.read(path)
    except FileFormatError as e:
        assert e.code in ("E9002", "E9003", "E9004"), e


# ---- a data file's windows ----


def _arrays(change):
    return lambda c: c.arrays.update(change(c.arrays))


def _meta(change):
    return lambda c: c.meta.update(change(c.meta))


DATA_CHANGES = {
    "train 1-D": _arrays(lambda a: {"train": a["train"].ravel()}),
    "train 3-D": _arrays(lambda a: {"train": a["train"][:, :, None]}),
    "train rows of one token": _arrays(lambda a: {"train": a["train"][:, :1]}),
    "train rows short of the window": _arrays(lambda a: {"train": a["train"][:, :5]}),
    "train rows longer than the window": _arrays(
        lambda a: {"train": np.concatenate([a["train"], a["train"]], axis=1)}
    ),
    "train of reals": _arrays(lambda a: {"train": a["train"].astype(np.float64)}),
    "train of bools": _arrays(lambda a: {"train": a["train"].astype(bool)}),
    "train of exact reals": _arrays(
        lambda a: {"train": np.vectorize(gmpy2.mpfr, otypes=[object])(a["train"])}
    ),
    "a token past the bytes": _arrays(lambda a: {"train": a["train"].astype(np.int64) + 256}),
    "a negative token": _arrays(lambda a: {"train": a["train"].astype(np.int64) - 1}),
    "val 1-D": _arrays(lambda a: {"val": a["val"].ravel()}),
    "val rows short": _arrays(lambda a: {"val": a["val"][:, :2]}),
    "no train": lambda c: c.arrays.pop("train"),
    "a checkpoint": lambda c: setattr(c, "kind", "checkpoint"),
    "another tokenizer": _meta(lambda m: {"tokenizer": "words"}),
    "window a string": _meta(lambda m: {"window": "8"}),
    "window 0": _meta(lambda m: {"window": 0}),
    "window true": _meta(lambda m: {"window": True}),
    "window 8.0": _meta(lambda m: {"window": 8.0}),
    "no window": lambda c: c.meta.pop("window"),
    "no vocab": lambda c: c.meta.pop("vocab"),
    "vocab short": _meta(lambda m: {"vocab": m["vocab"][:-1]}),
    "vocab with a byte twice": _meta(lambda m: {"vocab": [m["vocab"][0], *m["vocab"][:-1]]}),
    "vocab of strings": _meta(lambda m: {"vocab": [str(b) for b in m["vocab"]]}),
}


@pytest.mark.parametrize("case", sorted(DATA_CHANGES))
def test_a_data_file_that_is_not_windows_is_refused(tmp_path, case):
    path = _data(tmp_path / "d.psk.d", tmp_path, DATA_CHANGES[case])
    refuse(train_argv(path, tmp_path), code="E9007")


def test_the_undamaged_data_file_trains(originals, tmp_path):
    from presk.cli import main as presk_main
    from presk.cli.common import run_cli

    argv = train_argv(originals["train"], tmp_path)
    assert run_cli(presk_main.main, [str(a) for a in argv]) == 0


# ---- presk data: the texts it reads, the path it writes ----


@pytest.mark.parametrize("text", ["a device", "a directory", "missing.txt"])
def test_presk_data_reads_only_regular_files(tmp_path, text):
    if text == "a device":
        (tmp_path / "device").symlink_to("/dev/null")
        text = tmp_path / "device"
    elif text == "a directory":
        text = tmp_path
    elif text == "missing.txt":
        text = tmp_path / text
    refuse(["data", text, "--window", "8", "--out", tmp_path / "d.psk.d"], code="E0002")


@pytest.mark.parametrize("out", ["a file", "a directory of the user's", "under a file"])
def test_presk_data_replaces_only_a_container(tmp_path, out):
    text = tmp_path / "corpus.txt"
    text.write_text("a small corpus of text, read as bytes. " * 8)
    mine = tmp_path / "mine"
    if out == "a file":
        mine.write_text("mine")
    elif out == "a directory of the user's":
        mine.mkdir()
        (mine / "notes.txt").write_text("mine")
    target = text / "d.psk.d" if out == "under a file" else mine
    refuse(["data", text, "--window", "8", "--out", target], code="E0003")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["corpus.txt"] + (["mine"] if mine.exists() else [])
    )
