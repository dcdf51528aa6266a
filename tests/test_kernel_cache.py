"""The kernel cache verifies what it loads (docs/mlir.md, section 5).

Each run is a process of its own, so a damaged library that crashed the run would show
as a signal, not as a failed assertion inside pytest. Every run has a temporary cache
(`$PRESK_CACHE`), never the user's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BIN

from presk.backends.native import BUNDLES

# Two entries whose kernels take the same buffers, so one's library can stand in for the
# other's and run: f and g of one kernel each (a library of its own), h and j of two (a
# bundle, the entry's kernels together in one library).
PROGRAM = """\
dim N
fn f(x : ℝ[N]) -> ℝ[N] { exp(x) }
fn g(x : ℝ[N]) -> ℝ[N] { x * 3 }
fn h(x : ℝ[N]) -> ℝ[N] { exp(x) - sum(x) }
fn j(x : ℝ[N]) -> ℝ[N] { x * 3 - sum(x) }
"""
OTHER = {"g": "f", "h": "j"}  # the entry whose library is swapped in


def _command(program: Path, entry: str, cache, backend: str = "mlir") -> dict:
    """`presk run` of `entry` with `cache` as its kernel cache, as Popen's arguments."""
    argv = [str(BIN / "presk"), "run", str(program), "--entry", entry, "--dim", "N=5"]
    argv += ["--backend", backend, "--format", "json"]
    return {"args": argv, "env": {**os.environ, "PRESK_CACHE": str(cache)}, "text": True}


def _run(program: Path, entry: str, cache, backend: str = "mlir") -> subprocess.CompletedProcess:
    return subprocess.run(**_command(program, entry, cache, backend), capture_output=True)


def _output(proc: subprocess.CompletedProcess) -> object:
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    return json.loads(proc.stdout)["output"]


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("program") / "two.psk"
    path.write_text(PROGRAM)
    return path


@pytest.fixture(scope="module")
def expected(program, tmp_path_factory) -> dict:
    """Each entry's output on the kernel evaluator, whose bits the native code gives."""
    unused = tmp_path_factory.mktemp("unused-cache")
    return {e: _output(_run(program, e, unused, backend="kernel")) for e in "fghj"}


@pytest.fixture(scope="module")
def pristine(program, tmp_path_factory) -> dict[str, Path]:
    """A cache of each entry's library, filled by a run."""
    caches = {}
    for e in "fghj":
        caches[e] = tmp_path_factory.mktemp(f"cache-{e}")
        _output(_run(program, e, caches[e]))
    return caches


def _library(cache: Path) -> Path:
    """The one library of a kernel, or of a bundle, in `cache`."""
    (lib,) = [*cache.glob("??/*.so"), *cache.glob(f"{BUNDLES}/??/*.so")]
    return lib


def _swap(lib: Path, other: Path) -> None:
    shutil.copyfile(other, lib)


def _swap_with_digest(lib: Path, other: Path) -> None:
    shutil.copyfile(other, lib)
    shutil.copyfile(other.with_suffix(".blake2b"), lib.with_suffix(".blake2b"))


def _truncate(lib: Path, other: Path) -> None:
    os.truncate(lib, lib.stat().st_size // 2)


def _flip(lib: Path, other: Path) -> None:
    data = bytearray(lib.read_bytes())
    for i in range(len(data) // 4, 3 * len(data) // 4):
        data[i] ^= 0xFF
    lib.write_bytes(bytes(data))


def _drop_digest(lib: Path, other: Path) -> None:
    lib.with_suffix(".blake2b").unlink()


@pytest.mark.parametrize("entry", ["g", "h"], ids=["kernel", "bundle"])
@pytest.mark.parametrize(
    "damage", [_swap, _swap_with_digest, _truncate, _flip, _drop_digest], ids=lambda d: d.__name__
)
def test_a_damaged_entry_is_compiled_again_and_repaired(
    damage, entry, program, expected, pristine, tmp_path
):
    cache = tmp_path / "cache"
    shutil.copytree(pristine[entry], cache)
    lib = _library(cache)
    damage(lib, _library(pristine[OTHER[entry]]))
    proc = _run(program, entry, cache)
    assert _output(proc) == expected[entry]
    assert proc.stderr == ""
    for suffix in (".so", ".mlir", ".blake2b"):
        assert lib.with_suffix(suffix).read_bytes() == (
            _library(pristine[entry]).with_suffix(suffix).read_bytes()
        ), suffix


@pytest.mark.parametrize("suffix", [".so", ".mlir", ".blake2b"])
def test_a_directory_where_an_entry_file_should_be_costs_one_warning(
    suffix, program, expected, pristine, tmp_path
):
    cache = tmp_path / "cache"
    shutil.copytree(pristine["g"], cache)
    place = _library(cache).with_suffix(suffix)
    place.unlink()
    (place / "sub").mkdir(parents=True)
    _runs_with_one_warning(program, cache, expected)


def _runs_with_one_warning(program: Path, cache, expected: dict) -> None:
    proc = _run(program, "g", cache)
    assert _output(proc) == expected["g"]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: the kernel cache"), proc.stderr


def test_a_cache_path_that_is_a_file_costs_one_warning(program, expected, tmp_path):
    cache = tmp_path / "cache"
    cache.write_text("not a directory")
    _runs_with_one_warning(program, cache, expected)


def test_a_cache_at_dev_null_costs_one_warning(program, expected):
    _runs_with_one_warning(program, "/dev/null", expected)


def test_a_file_where_a_cache_subdirectory_should_be_costs_one_warning(
    program, expected, pristine, tmp_path
):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / _library(pristine["g"]).parent.name).write_text("not a directory")
    _runs_with_one_warning(program, cache, expected)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a directory of mode 0500")
def test_an_unwritable_cache_costs_one_warning(program, expected, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o500)
    _runs_with_one_warning(program, cache, expected)


def test_two_processes_filling_one_cache_both_succeed_and_leave_one_whole_entry(
    program, expected, pristine, tmp_path
):
    cache = tmp_path / "cache"
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    procs = [subprocess.Popen(**_command(program, "g", cache), **pipes) for _ in range(2)]
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0 and err == "", (p.returncode, err)
        assert json.loads(out)["output"] == expected["g"]
    assert _files(cache) == _files(pristine["g"])


def _files(directory: Path) -> list[Path]:
    """Every file under `directory` (a temporary file left behind among them)."""
    return sorted(p.relative_to(directory) for p in directory.rglob("*") if p.is_file())


def test_a_c_compiler_that_fails_to_link_is_a_coded_error(program, tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cc").write_text('#!/bin/sh\necho "ld: cannot find -lpresk" >&2\nexit 1\n')
    (fake / "cc").chmod(0o755)
    command = _command(program, "f", tmp_path / "cache")
    command["env"]["PATH"] = f"{fake}:{command['env']['PATH']}"
    proc = subprocess.run(**command, capture_output=True)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error[E0004]" in proc.stderr and "cannot find -lpresk" in proc.stderr
