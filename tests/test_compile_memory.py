"""Compiled code is released in a long process (issue 17): resident memory stays bounded
however many distinct kernels one process compiles, a compiler keeps a bounded number of
libraries loaded, and a backend's kernels stay loaded while it lives.

Measured with `python bench/compile_memory.py` (2026-12-01, AMD EPYC `znver3`, 2 cores):
500 distinct kernels compiled cold in one process grew resident memory by 23 MB, from
194 MB, with 256 libraries mapped at the end; before the fix, 1284 MB (each program's
MLIR context was never freed, and every library stayed mapped). The bounds below leave
several times the measured growth, and sit well under what the leak reached.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import presk
from presk.backends.native import shared_compiler

CHAIN = """
dim N
fn f(x : ℝ[N]) -> ℝ[N] {
  exp(x) * x + x
}
"""


def resident_mb() -> float:
    """This process's resident memory (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def mapped_kernels(cache: str) -> set[str]:
    """The kernel libraries this process has mapped, by file name (the kernel's key): from
    the cache, or from the temporary directory a kernel is built in (not the replay
    runtime in the cache's `replay` folder, one a process: docs/mlir.md, section 6)."""
    return {
        Path(line.split(maxsplit=5)[-1].removesuffix(" (deleted)")).name
        for line in Path("/proc/self/maps").read_text().splitlines()
        if (cache in line and f"{cache}/replay/" not in line) or "/presk-kernel-" in line
    }


def chain(n: int) -> presk.Compiled:
    """A one-kernel entry over n elements: each n compiles a kernel of its own."""
    return presk.load(CHAIN).elaborate("f", dims={"N": n}).lower("f64").compile("mlir")


def compile_and_call(n: int) -> np.ndarray:
    """`chain(n)` compiled and called once, then dropped, as a solve drops a realization it
    measured."""
    return chain(n)(np.linspace(-1, 1, n))


@pytest.fixture
def compiler(tmp_path, monkeypatch):
    """The process's compiler made afresh over an empty cache, so the kernels compile cold."""
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path))
    shared_compiler.cache_clear()
    yield shared_compiler()
    shared_compiler.cache_clear()


@pytest.mark.parametrize(
    "kernels, bound_mb", [(150, 100), pytest.param(500, 200, marks=pytest.mark.slow)]
)
def test_resident_memory_stays_bounded(compiler, kernels, bound_mb):
    compile_and_call(1)  # MLIR, LLVM and the toolchain loaded: the baseline
    gc.collect()
    base = resident_mb()
    for n in range(2, kernels + 1):
        compile_and_call(n)
    gc.collect()
    assert resident_mb() - base < bound_mb
    assert len(mapped_kernels(str(compiler.directory))) <= compiler.keep


def test_a_live_backend_keeps_its_kernels_while_others_are_unloaded(compiler):
    compiler.keep = 4
    live = chain(1000)
    x = np.linspace(-1, 1, 1000)
    before = live(x)
    keys = {k.native.path.name for k in live.backend.kernels.values()}
    for n in range(2, 22):  # 20 other kernels, each evicting an older one
        compile_and_call(n)
    gc.collect()
    mapped = mapped_kernels(str(compiler.directory))
    assert keys <= mapped  # the live backend's libraries were never unloaded
    assert len(mapped) <= compiler.keep + len(keys)  # the others beyond `keep` were
    assert np.array_equal(live(x).view(np.int64), before.view(np.int64))
    assert len(compile_and_call(3)) == 3  # an evicted kernel loads again, from the cache
