"""The MLIR backend: bit for bit the kernel evaluator's results, on every tutorial entry
and conformance case in f64, f32 and bf16, on one thread and on two with every
splittable launch split; the same bits on one thread and two on every kernel; the
on-disk cache; no fused multiply-add in the object code."""

from __future__ import annotations

import json
import shlex
import subprocess

import numpy as np
import pytest
from programs import REPO, entries

from presk import backends
from presk.backends.host import CallContext
from presk.backends.native import Compiler, kernel_source
from presk.backends.workers import Workers
from presk.runtime.values import leaves
from presk.toolchain import llvm_tool
from tests.conformance.suite import TYPES, all_cases, inputs, machine_output, measure, module_of
from tests.conformance.suite import Case as ConformanceCase

TUTORIAL = [(p, a) for p, a in entries() if p.parent.name == "tutorial"]


def assert_same_bits(a, b, what: str) -> None:
    for (path, x), (_, y) in zip(leaves(a), leaves(b), strict=True):
        xa, ya = np.asarray(x.data), np.asarray(y.data)
        assert xa.dtype == ya.dtype and xa.shape == ya.shape, (what, path)
        same = np.array_equal(xa.reshape(-1).view(np.uint8), ya.reshape(-1).view(np.uint8))
        assert same, f"{what}: {path} differs in {np.sum(xa != ya)} elements"


def _case_of(path, args: list[str]) -> ConformanceCase:
    entry = args[args.index("--entry") + 1]
    dims = tuple(args[i + 1] for i, a in enumerate(args) if a == "--dim")
    return ConformanceCase(f"{path.name} {entry}", str(path.relative_to(REPO)), entry, dims)


@pytest.mark.parametrize("machine", TYPES)
@pytest.mark.parametrize(
    "path,args", TUTORIAL, ids=[f"{p.name} {shlex.join(a)}" for p, a in TUTORIAL]
)
def test_every_tutorial_entry_gives_the_kernel_evaluators_bits(path, args, machine):
    case = _case_of(path, args)
    kernel = machine_output(case, machine, "kernel")
    for threads, out in _mlir_outputs(case, machine):
        assert_same_bits(kernel, out, f"{case.name} {machine} on {threads}")


def _mlir_outputs(case: ConformanceCase, machine: str):
    """The case's outputs on the mlir backend, each with its threads: on one thread, and
    on two with every launch that may split split however small (the whole entry's
    schedule, its segments replayed in C, their split launches on the native workers)."""
    for threads in (1, 2):
        backend = backends.make("mlir", module_of(case), realize=machine, threads=threads)
        if threads > 1:
            backend.split_work = 0
        yield f"{threads} threads", backend.call(inputs(case), CallContext())


CASES = [(c, t) for c in all_cases() for t in TYPES]


@pytest.mark.parametrize(
    "case,machine", CASES, ids=[f"{c.name}{' drawn' if c.drawn else ''}-{t}" for c, t in CASES]
)
def test_every_conformance_case_gives_the_kernel_evaluators_bits(case, machine):
    kernel = machine_output(case, machine, "kernel")
    for threads, out in _mlir_outputs(case, machine):
        assert_same_bits(kernel, out, f"{case.name} {machine} on {threads}")
    if machine in case.asserted:
        gap = measure(case, machine, "mlir")
        assert gap.ratio <= 1.0, f"{case.name} in {machine}: {gap.ratio:.3f} times the band"


def _random_buffers(kernel, shapes, rng) -> list[np.ndarray]:
    """Inputs of a kernel's element types (indices 0 or 1, which every axis has), and a
    NaN-filled output."""
    from presk.kernel.machine import ELEMENTS

    out = []
    for element, shape in zip(kernel.elements, shapes, strict=True):
        dtype = ELEMENTS[element]
        if element in ("i64", "i8"):
            out.append(rng.integers(0, 2, size=shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32).astype(dtype))
    out[-1][...] = 0 if out[-1].dtype.kind == "i" else np.nan
    return out


def _minigpt(entry: str) -> ConformanceCase:
    return ConformanceCase(
        entry, "tutorial/05_minigpt.psk", f"MiniGPT{{64, 16, 2, 2}}.{entry}", ("B=2", "T=8")
    )


@pytest.mark.parametrize("entry", ["apply", "loss_grad"])
def test_one_thread_and_two_give_the_same_bits_on_every_kernel(entry):
    case = _minigpt(entry)
    backend = backends.make("mlir", module_of(case), realize="f32", threads=2)
    backend.call(inputs(case), CallContext())
    rng = np.random.default_rng(0)
    split = 0
    for name, k in backend.kernels.items():
        f = backend.kernel_ops[name]
        shapes = [a.type.shape for a in list(f.regions[0].blocks[0].arguments)[:-2]]
        one = _random_buffers(k, shapes, rng)
        two = [b.copy() for b in one]
        k.native.fn(*[b.ctypes.data for b in one], 0, k.split)
        if k.split > 1:
            Workers(2).run(k.native.fn, [b.ctypes.data for b in two], k.split)
            split += 1
        else:
            k.native.fn(*[b.ctypes.data for b in two], 0, k.split)
        assert np.array_equal(
            one[-1].reshape(-1).view(np.uint8), two[-1].reshape(-1).view(np.uint8)
        ), name
    assert split >= len(backend.kernels) // 2, "most kernels split their outer loop"


@pytest.mark.parametrize("entry", ["apply", "loss_grad"])
def test_a_whole_entry_split_over_two_threads_gives_one_threads_bits(entry):
    case = _minigpt(entry)
    one = backends.make("mlir", module_of(case), realize="f64", threads=1)
    two = backends.make("mlir", module_of(case), realize="f64", threads=2)
    two.split_work = 0  # every kernel that may split does, however small
    assert_same_bits(
        one.call(inputs(case), CallContext()), two.call(inputs(case), CallContext()), entry
    )
    (schedule,) = two.schedules.values()  # the split launches, run by the replay's workers
    splits = [p for step, _ in schedule.segments for p in getattr(step, "pieces", []) if p > 1]
    assert len(splits) >= two.launches // 2, f"{len(splits)} of {two.launches} launches split"


def _kernel(entry: str = "loss_grad", machine: str = "f64"):
    """A dot kernel at the affine stage, its buffer count, and the backend owning it (the
    module, and so the op, lives as long as the backend)."""
    backend = backends.make("mlir", module_of(_minigpt(entry)), realize=machine, threads=1)
    name = next(n for n, f in backend.kernel_ops.items() if "dot" in n)
    f = backend.kernel_ops[name]
    return f, len(list(f.regions[0].blocks[0].arguments)) - 2, backend


def test_the_cache_holds_each_kernel_with_its_text_and_a_warm_run_compiles_nothing(
    tmp_path, monkeypatch
):
    from presk.backends import native

    f, n, _owner = _kernel()
    cold = Compiler(tmp_path).compile(f, n)
    assert not cold.cached
    texts = list(tmp_path.glob("*/*.mlir"))
    assert len(texts) == 1 and texts[0].read_text() == kernel_source(f)
    assert texts[0].with_suffix(".so").exists()

    def no_build(*args):
        raise AssertionError("a cached kernel was compiled again")

    monkeypatch.setattr(native, "_build", no_build)
    warm = Compiler(tmp_path).compile(f, n)
    assert warm.cached and warm.seconds < cold.seconds
    monkeypatch.undo()
    # a library whose text is not the kernel's is never used: the kernel is compiled again
    texts[0].write_text(kernel_source(f).replace("arith.addf", "arith.subf"))
    again = Compiler(tmp_path).compile(f, n)
    assert not again.cached and texts[0].read_text() == kernel_source(f)


@pytest.mark.parametrize("machine", ["f64", "f32"])
def test_no_multiply_and_add_is_fused_in_the_object_code(machine):
    backend = backends.make("mlir", module_of(_minigpt("loss_grad")), realize=machine, threads=1)
    backend.call(inputs(_minigpt("loss_grad")), CallContext())
    assert backend.kernels
    fused = []
    for k in backend.kernels.values():
        listing = subprocess.run(
            [llvm_tool("llvm-objdump"), "-d", "--no-show-raw-insn", str(k.native.path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        fused += [line for line in listing.splitlines() if "fmadd" in line or "fmsub" in line]
    assert not fused, fused[:5]


LINEAR = ["tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4"]


def test_presk_run_on_the_mlir_backend_prints_the_kernel_backends_numbers():
    from conftest import run_in_process

    outs = [
        run_in_process(
            "presk", "run", *LINEAR, "--backend", b, "--realize", "f32", "--format", "json"
        )
        for b in ("kernel", "mlir")
    ]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    kernel, mlir = (json.loads(p.stdout) for p in outs)
    assert mlir["backend"] == "mlir" and mlir["output"] == kernel["output"]


def test_presk_bench_times_the_native_backend_alone_by_default():
    from conftest import run_in_process

    proc = run_in_process("presk", "bench", *LINEAR, "--repeat", "1", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert list(json.loads(proc.stdout)) == ["mlir"]


def test_presk_bench_gives_a_median_for_each_backend_in_json():
    from conftest import run_in_process

    # at the default layouts, so the kernels are the lowering's own (auto folds the bias)
    argv = [*LINEAR, "--repeat", "2", "--format", "json", "--plan", "default"]
    proc = run_in_process("presk", "bench", *argv, "--backends", "interp,kernel,mlir")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == ["interp", "kernel", "mlir"]
    for entry in out.values():
        assert len(entry["runs"]) == 2 and entry["median_ms"] > 0
    assert out["mlir"]["compile"]["kernels"] == 2
    assert set(out["mlir"]["compile"]["per_kernel"]["k0.dot"]) == {"cold_ms", "warm_ms"}


def test_presk_bench_text_has_the_speed_table_and_compile_times():
    from conftest import run_in_process

    proc = run_in_process(
        "presk",
        "bench",
        *LINEAR,
        "--repeat",
        "1",
        "--backends",
        "kernel,mlir",
        "--realize",
        "f64,bf16",
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines[2:6]] == [
        ["kernel", "f64"],
        ["kernel", "bf16"],
        ["mlir", "f64"],
        ["mlir", "bf16"],
    ]
    assert "kernels compiled in" in proc.stdout


@pytest.mark.parametrize(
    "stage,first", [("affine", "func.func @k0.dot"), ("llvm", "llvm.func @k0.dot")]
)
def test_presk_dump_shows_the_affine_and_llvm_stages_with_their_pipelines(stage, first):
    from conftest import run_in_process

    proc = run_in_process("presk", "dump", *LINEAR, "--stage", stage)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"// {stage} stage, f64, from the kernel stage by:")
    assert "presk-opt --pass-pipeline='builtin.module(psk-kernel-to-affine" in proc.stdout
    assert first in proc.stdout and "psk.tuple" not in proc.stdout


@pytest.mark.parametrize("flag", [["--threads", "0"], ["--threads", "two"]])
def test_a_bad_thread_count_is_refused(flag):
    from conftest import assert_user_error, run_in_process

    proc = run_in_process("presk", "run", *LINEAR, "--backend", "mlir", *flag)
    assert "threads is a positive integer" in assert_user_error(proc)


LIBM = ["square", "root", "cube", "inverse", "two_to", "ten_to"]


@pytest.mark.parametrize("machine", ["f64", "f32"])
@pytest.mark.parametrize("entry", LIBM)
def test_a_c_library_call_llvm_knows_stays_the_call_the_evaluator_makes(entry, machine):
    # glibc's pow is not correctly rounded: pow(x, 2) rewritten as x·x differs in ~0.1%
    case = ConformanceCase(entry, "tests/data/libm.psk", entry, ("N=20000",))
    kernel = machine_output(case, machine, "kernel")
    assert_same_bits(kernel, machine_output(case, machine, "mlir"), f"{entry} {machine}")
