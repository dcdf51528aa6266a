"""Paths presk will not write (E0003): a device, a directory, a FIFO, a path under a
regular file, a directory it may not write into. An output is written to a temporary file
and renamed over its path, which would replace a device for everyone (presk/fileio.py).

The devices are the machine's /dev/full and /dev/null, or, where this process can make
device files (as root, when a rename into /dev would succeed), copies of them made in a
temporary directory: a presk that wrongly renamed over one then spoils only the copy.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import REPO

from bad_input.refusal import refuse

PROGRAM = "dim N\nfn g(x : ℝ[N]) -> ℝ[N] { x * 3 }\n"
MLIR = REPO / "test/lit/tools/Inputs/two_funcs.mlir"


@pytest.fixture
def program(tmp_path) -> Path:
    path = tmp_path / "g.psk"
    path.write_text(PROGRAM)
    return path


def _device(name: str, directory: Path) -> Path:
    """/dev/`name`, or a device file like it in `directory` where one can be made."""
    real = Path("/dev") / name
    copy = directory / name
    try:
        os.mknod(copy, stat.S_IFCHR | 0o666, os.stat(real).st_rdev)
    except PermissionError:
        return real
    return copy


def _fifo(directory: Path) -> Path:
    path = directory / "fifo"
    os.mkfifo(path)
    return path


def _under_a_file(directory: Path) -> Path:
    (directory / "file").write_text("a regular file")
    return directory / "file" / "out"


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: _device("full", d), "a character device"),
        (lambda d: _device("null", d), "a character device"),
        (lambda d: d, "a directory"),
        (_fifo, "a FIFO"),
        (_under_a_file, "Not a directory"),
    ],
    ids=["dev-full", "dev-null", "directory", "fifo", "under-a-file"],
)
@pytest.mark.parametrize("tool", ["run", "presk-opt"])
def test_an_output_path_that_is_not_a_regular_file_is_refused(make, says, tool, program, tmp_path):
    out = make(tmp_path)
    kind = _kind(out)
    if tool == "run":
        argv = ["run", program, "--entry", "g", "--dim", "N=2", "--out", out]
        refuse(argv, code="E0003", says=says)
    else:
        refuse([MLIR, "-o", out], code="E0003", says=says, tool="presk-opt")
    assert _kind(out) == kind, "the path was written over"


def _kind(path: Path) -> int | None:
    """What `path` is (a device, a directory, …), None if nothing is there."""
    return stat.S_IFMT(os.stat(path).st_mode) if path.exists() else None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a directory of mode 0500")
def test_an_output_in_a_directory_presk_may_not_write_is_refused(program, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    argv = ["run", program, "--entry", "g", "--dim", "N=2", "--out", locked / "out.npz"]
    refuse(argv, code="E0003", says="Permission denied")
