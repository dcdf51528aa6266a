"""An entry's kernels compiled together into one library, its bundle (docs/mlir.md,
section 5): built once and then loaded, compiled alone when few are cold, by worker
processes when there are many, and always with the bits of each kernel compiled alone.
Structure only: bench/compile_time.py measures the seconds (docs/performance.md)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np
import pytest

import presk
from presk.backends import mlir as mlir_backend
from presk.backends import native, objects
from presk.backends.native import Compiler
from presk.runtime.values import leaves

# two kernels at their default layouts
LINEAR = ("tutorial/01_linear.psk", "Linear{3, 2}.apply", {"batch": 4})


def _bits(value) -> list[tuple[str, bytes]]:
    return [(path, np.asarray(t.data).tobytes()) for path, t in leaves(value)]


def _linear(compiler: Compiler):
    path, entry, dims = LINEAR
    kernels = presk.load(path).elaborate(entry, dims).lower("f64", "default")
    compiled = kernels.compile("mlir", threads=1)
    compiled.backend.compiler = compiler
    return compiled


@pytest.fixture
def builds(monkeypatch) -> list[list[str]]:
    """The symbols of each library built (a bundle's kernels, or `kernel` alone)."""
    made, build = [], native._build

    def counted(kernels, *args, **kwargs):
        made.append(sorted(symbol for symbol, _ in kernels))
        return build(kernels, *args, **kwargs)

    monkeypatch.setattr(native, "_build", counted)
    return made


def test_a_bundle_is_built_once_and_loaded_by_the_next_backend(tmp_path, builds):
    first = _linear(Compiler(tmp_path))
    out = first.drawn(0)()
    names = sorted(first.backend.kernel_ops)
    assert len(names) == 2 and builds == [names]
    (bundle,) = tmp_path.glob("bundles/*/*.so")
    assert not list(tmp_path.glob("??/*.so")), "a kernel was compiled alone"
    natives = [k.native for k in first.backend.kernels.values()]
    assert {n.path for n in natives} == {bundle} and sorted(n.symbol for n in natives) == names

    warm = _linear(Compiler(tmp_path))  # a new process's compiler: from the cache
    assert _bits(warm.drawn(0)()) == _bits(out) and builds == [names]
    assert all(k.native.cached for k in warm.backend.kernels.values())

    again = _linear(warm.backend.compiler)  # the same compiler: nothing loaded again
    assert _bits(again.drawn(0)()) == _bits(out)
    for name, k in again.backend.kernels.items():
        assert k.native is warm.backend.kernels[name].native


def test_an_entry_with_few_cold_kernels_compiles_them_alone(tmp_path, builds):
    compiler = Compiler(tmp_path)
    held = _linear(compiler)  # one of its two kernels compiled alone beforehand
    name, f = next(iter(held.backend.kernel_ops.items()))
    compiler.compile(f, native.buffers(f))
    builds.clear()
    compiled = _linear(Compiler(tmp_path))
    compiled.drawn(0)()
    assert builds == [[native.SYMBOL]]  # the cold one alone, no bundle
    assert not list(tmp_path.glob("bundles/*/*.so"))
    assert {k.native.symbol for k in compiled.backend.kernels.values()} == {native.SYMBOL}


def test_a_worker_process_compiles_a_bundle_with_this_processs_bits(tmp_path, monkeypatch):
    expected = _linear(Compiler(tmp_path / "here", workers=1)).drawn(0)()
    monkeypatch.setattr(objects, "GROUP", 1)
    monkeypatch.setattr(objects, "PER_WORKER", 1)
    taken = []

    def none_taken_here(directory):  # so the worker takes every group
        taken.extend(directory.glob("group*.json"))
        return iter(())

    monkeypatch.setattr(objects, "claimed", none_taken_here)
    compiled = _linear(Compiler(tmp_path / "workers", workers=2))
    assert _bits(compiled.drawn(0)()) == _bits(expected)
    assert len(taken) == 2  # two groups, both left to the worker
    assert list((tmp_path / "workers").glob("bundles/*/*.so"))


FAILING_WORKER = """
import pathlib, sys
for group in pathlib.Path(sys.argv[1]).glob("group*.json"):
    group.rename(group.with_suffix(".claimed"))
sys.exit(1)
"""


def test_the_groups_of_a_worker_that_fails_are_compiled_here(tmp_path, monkeypatch):
    expected = _linear(Compiler(tmp_path / "here", workers=1)).drawn(0)()
    monkeypatch.setattr(objects, "GROUP", 1)
    monkeypatch.setattr(objects, "PER_WORKER", 1)
    monkeypatch.setattr(objects, "claimed", lambda directory: iter(()))  # all the worker's
    workers = []

    def failing(directory):
        workers.append(subprocess.Popen([sys.executable, "-c", FAILING_WORKER, str(directory)]))
        return workers[-1]

    monkeypatch.setattr(objects, "_start", failing)
    compiled = _linear(Compiler(tmp_path / "workers", workers=2))
    assert _bits(compiled.drawn(0)()) == _bits(expected)
    assert [w.returncode for w in workers] == [1]


@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_kernels_compiled_together_give_the_bits_of_each_compiled_alone(realize, monkeypatch):
    core = presk.load("tutorial/05_minigpt.psk").elaborate(
        "MiniGPT{64, 16, 2, 2}.loss", dims={"B": 2, "T": 8}, train_step=True
    )
    # compiled together even where the cache holds the kernels alone
    monkeypatch.setattr(mlir_backend, "pays_to_bundle", lambda cold, kernels: True)
    together = core.lower(realize).compile("mlir", threads=1)
    out = together.drawn(0)()
    (path,) = {k.native.path for k in together.backend.kernels.values()}
    assert path.parent.parent.name == native.BUNDLES

    monkeypatch.setattr(Compiler, "bundled", lambda self, kernels: {})
    monkeypatch.setattr(mlir_backend, "pays_to_bundle", lambda cold, kernels: False)
    alone = core.lower(realize).compile("mlir", threads=1)
    assert _bits(alone.drawn(0)()) == _bits(out)
    natives = [k.native for k in alone.backend.kernels.values()]
    assert {n.symbol for n in natives} == {native.SYMBOL}
    ops = alone.backend.kernel_ops
    texts = {native.kernel_source(ops[name]) for name in alone.backend.kernels}
    assert len({n.path for n in natives}) == len(texts)  # a library for each kernel


def test_a_bundle_compiles_each_text_once_and_links_its_repeats_to_that_code(tmp_path, monkeypatch):
    ops = _linear(Compiler(tmp_path)).backend.kernel_ops
    (one, f), (other, g) = ops.items()
    text, other_text = native.kernel_source(f), native.kernel_source(g)
    compiled, write = [], native.write_objects

    def counted(kernels, *args, **kwargs):
        compiled.extend(symbol for symbol, _ in kernels)
        return write(kernels, *args, **kwargs)

    monkeypatch.setattr(native, "write_objects", counted)
    so = tmp_path / "bundle.so"
    kernels = [(one, text), (f"{one}.again", text), (other, other_text), (f"{one}.3", text)]
    native._build(kernels, f.context, so)
    assert compiled == [one, other]
    fns = native._load(so, {symbol: native.buffers(f) for symbol, _ in kernels})
    address = {symbol: ctypes.c_void_p.from_buffer(fn).value for symbol, fn in fns.items()}
    assert address[one] == address[f"{one}.again"] == address[f"{one}.3"] != address[other]
