"""`presk run --inputs X.npz` with files it cannot take: E9006 naming the array (E0002
for a file it cannot read at all; E8001 for a non-finite value the reference is given).

An .npz reads its arrays lazily, so a damaged member shows only when it is read; each
member's header (dtype, shape) is checked before its data is read.
"""

from __future__ import annotations

import contextlib
import io
import os
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import REPO

from bad_input.refusal import REFUSAL, refuse
from presk.cli.common import run_cli
from presk.cli.main import main

LINEAR = str(REPO / "tutorial" / "01_linear.psk")
X = np.arange(12, dtype=np.float64).reshape(4, 3)  # x : ℝ[batch: 4, 3]


def run(inputs) -> list[str]:
    return [
        "run",
        LINEAR,
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--inputs",
        str(inputs),
    ]


def npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def written(tmp_path, data: bytes, name: str = "in.npz"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_good_file_runs(tmp_path):
    assert run_cli(main, run(written(tmp_path, npz_bytes(x=X)))) == 0


@pytest.mark.parametrize(
    ("array", "says"),
    [
        (X + 1j, "array x is complex128"),
        (X.astype(np.longdouble), "array x is float128"),
        (X.astype(str), "array x is <U"),
        (np.zeros((4, 3), dtype=[("a", "f8")]), "array x is [('a', '<f8')]"),
        (X.astype(object), "array x is object"),
        (np.ones((5, 3)), "array x has shape [5, 3]"),
    ],
)
def test_arrays_of_the_wrong_dtype_or_shape(array, says, tmp_path):
    buf = io.BytesIO()
    np.savez(buf, x=array, allow_pickle=True)
    refuse(run(written(tmp_path, buf.getvalue())), code="E9006", says=says)


INDEX_AND_MASK = "dim N\nfn f(t : nat{5}[N], m : bool[N]) -> ℝ[N] {\n  where(m, 1.0, 0.0)\n}\n"


@pytest.mark.parametrize(
    ("t", "m", "says"),
    [
        (np.arange(3, dtype=np.uint64), [True, False, True], "array t is uint64"),
        (np.arange(3.0), [True, False, True], "array t is float64"),
        (np.arange(3), [1, 0, 1], "array m is int64"),
    ],
)
def test_index_and_mask_arrays_of_the_wrong_dtype(t, m, says, tmp_path):
    program = tmp_path / "f.psk"
    program.write_text(INDEX_AND_MASK)
    inputs = written(tmp_path, npz_bytes(t=t, m=np.array(m)))
    refuse(["run", program, "--entry", "f", "--dim", "N=3", "--inputs", inputs], "E9006", says)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_values_on_the_reference(value, tmp_path):
    x = X.copy()
    x[2, 1] = value
    refuse(run(written(tmp_path, npz_bytes(x=x))), code="E8001", says=f"x[2, 1] is {value}")


def test_nan_runs_on_the_kernel_backend(tmp_path):
    x = X.copy()
    x[0, 0] = np.nan
    assert run_cli(main, [*run(written(tmp_path, npz_bytes(x=x))), "--backend", "kernel"]) == 0


def test_an_empty_file(tmp_path):
    refuse(run(written(tmp_path, b"")), code="E9006", says="not a readable .npz")


def test_a_npy_file(tmp_path):
    buf = io.BytesIO()
    np.save(buf, X)
    refuse(run(written(tmp_path, buf.getvalue(), "x.npy")), code="E9006", says="a single .npy")


def test_a_member_that_is_no_npy_array(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("x.npy", b"not an array at all")
    refuse(run(written(tmp_path, buf.getvalue())), code="E9006", says="array x cannot be read")


def test_a_member_whose_data_is_cut_short(tmp_path):
    """The zip's directory is intact, the member's header too; its data is shorter."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("x.npy", npz_member(X)[:-8])
    refuse(run(written(tmp_path, buf.getvalue())), code="E9006", says="array x cannot be read")


def test_a_member_with_a_bad_checksum(tmp_path):
    data = bytearray(npz_bytes(x=X))
    data[data.index(X.tobytes()) + 5] ^= 0xFF  # a data byte inside the member
    refuse(run(written(tmp_path, bytes(data))), code="E9006", says="Bad CRC-32")


def test_a_missing_file_and_a_directory(tmp_path):
    refuse(run(tmp_path / "absent.npz"), code="E0002", says="cannot read")
    refuse(run(tmp_path), code="E0002", says="cannot read")


def npz_member(array) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array)
    return buf.getvalue()


def run_or_refuse(argv) -> None:
    """A run of `argv` ends in exit 0 or one coded refusal, never a traceback."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = run_cli(main, argv)
    assert status == 0 or (status == 1 and REFUSAL.match(err.getvalue())), err.getvalue()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=600))
def test_garbage_bytes(data, tmp_path):
    refuse(run(written(tmp_path, data)), code="E9006")


def compressed_npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


GOOD = {"plain": npz_bytes(x=X), "compressed": compressed_npz_bytes(x=X)}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(sorted(GOOD)),
    cut=st.integers(min_value=0),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)), max_size=3),
)
def test_damaged_files(kind, cut, flips, tmp_path):
    """A good .npz truncated and with bytes flipped: it runs (a flip the zip does not
    check) or is refused with a code."""
    data = bytearray(GOOD[kind])
    for at, mask in flips:
        data[at % len(data)] ^= mask
    data = data[: len(data) - cut % len(data)]
    run_or_refuse(run(written(tmp_path, bytes(data))))


def test_a_fifo_given_as_inputs_is_refused_unread(tmp_path):
    fifo = tmp_path / "in.npz"
    os.mkfifo(fifo)  # nothing writes to it: a read would block forever
    refuse(run(fifo), code="E0002", says="not a regular file")
