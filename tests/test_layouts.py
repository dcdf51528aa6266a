"""The layout space changes no bit: every point of four nests (a Linear's dot, with and
without its bias add folded in, attention's two eins, softmax in its two forms), in f64,
f32 and bf16, at every vector width this machine runs (lanes of 16 bytes up to its own),
gives the default's bits on the kernel evaluator and natively; some points also split at
depths 0, 1 and 2 over the machine's workers and half of them. `make test` runs a sample
of each nest's points, half of them in vector lanes; the whole space is `slow`
(`make test-all`)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from presk import stages
from presk.backends.host import CallContext
from presk.backends.kernel import KernelBackend
from presk.backends.mlir import MlirBackend
from presk.backends.tuning import measured_points
from presk.core.program import read_host_program
from presk.errors import RealizationError
from presk.ir.ops import string_attr, walk_ops
from presk.ir.types import Axis, TensorType
from presk.kernel.contraction import (
    ROW_FORMS,
    Layout,
    Nest,
    check,
    check_rows,
    read_nest,
    space,
)
from presk.kernel.cost import Target, _conflicts, predict
from presk.kernel.epilogue import fold_epilogues
from presk.kernel.machine import MACHINES
from presk.kernel.nests import Contraction
from presk.kernel.planner import choose, offers, sweep_and_pick
from presk.kernel.relayout import layout_kernels, relayout
from presk.runtime.values import leaves
from presk.toolchain import default_threads, vector_bytes, vector_widths
from tests.conformance.suite import TYPES, Case, inputs, module_of

LINEAR = Case("Linear", "tests/data/layouts.psk", "Linear{128, 64}.apply", ("B=4",))
ATTENTION = Case("attention", "tutorial/03_attention.psk", "attention", ("B=1", "T=8"))
# (case, the kernel kind, which of them in launch order)
NESTS = {
    "Linear's dot": (LINEAR, "dot", 0),
    "attention's q·kᵀ": (ATTENTION, "ein", 0),
    "attention's p·v": (ATTENTION, "ein", 1),
    "softmax": (ATTENTION, "softmax", 0),
}
SAMPLE = 10
# every width the machine runs, so 2 f64 lanes (16 bytes) are tested as well as its own
WIDTHS = pytest.mark.parametrize("width", vector_widths(), ids=lambda w: f"{w}B")


def _lowered(case: Case, machine: str):
    module = module_of(case)
    stages.kernel(module, machine)
    return module


def _site(module, kind: str, nth: int) -> str:
    kernels = layout_kernels(module.operation)
    sites = [
        string_attr(op, "psk.site")
        for op in walk_ops(module.operation, "psk_kernel.launch")
        if op.attributes["kernel"].value in kernels
        and string_attr(kernels[op.attributes["kernel"].value], "psk_kernel.kernel") == kind
    ]
    return sites[nth]


def _run(case: Case, machine: str, width: int, site: str | None, layout: Layout | None):
    """The case's output bits on the kernel evaluator and natively in vectors of `width`
    bytes, one nest moved."""
    module = _lowered(case, machine)
    if layout is not None:
        if layout.epilogue:
            fold_epilogues(module.operation, site)
        relayout(module.operation, site, lambda _old: layout)
    program = read_host_program(module)
    kernel = KernelBackend(program, module, MACHINES[machine]).call(inputs(case), CallContext())
    stages.affine(module, width)
    native = MlirBackend(program, module, MACHINES[machine], threads=default_threads())
    return _bits(kernel), _bits(native.call(inputs(case), CallContext()))


def _bits(value) -> list[bytes]:
    return [np.asarray(t.data).tobytes() for _, t in leaves(value)]


def _points(name: str, machine: str, width: int) -> tuple[str, list[Layout], object]:
    """The nest's site, every point of its layout space with lanes of `width` bytes, and
    the nest (None: a softmax)."""
    case, kind, nth = NESTS[name]
    module = _lowered(case, machine)
    site = _site(module, kind, nth)
    if kind == "softmax":
        return site, [Layout(form=form) for form in ROW_FORMS], None
    symbol = next(
        op.attributes["kernel"].value
        for op in walk_ops(module.operation, "psk_kernel.launch")
        if string_attr(op, "psk.site") == site
    )
    nest, _ = read_nest(layout_kernels(module.operation)[symbol])
    return site, space(nest, machine, width // MACHINES[machine].arith.itemsize), nest


def _splits(nest, machine: str, layout: Layout) -> list[Layout]:
    """The layout split at depths 0, 1 and 2 over the workers the nest may take."""
    cores = default_threads()
    out = []
    for depth in (0, 1, 2):
        for workers in sorted({cores, cores // 2} - {0}):
            split = replace(layout, split=(depth, workers))
            try:
                check(nest, split, machine) if nest else check_rows(split, 3)
            except RealizationError:
                continue
            out.append(split)
    return out


def _sample(points: list[Layout], seed: str) -> list[Layout]:
    """SAMPLE of the points, half of them in vector lanes where the nest has such points."""
    rng = random.Random(seed)
    lanes = [p for p in points if p.lanes > 1]
    scalar = [p for p in points if p.lanes == 1]
    picked = rng.sample(lanes, min(SAMPLE // 2, len(lanes)))
    picked += rng.sample(scalar, min(SAMPLE - len(picked), len(scalar)))
    rng.shuffle(picked)
    return picked


def _assert_exact(name: str, machine: str, width: int, points: list[Layout], site: str) -> None:
    case = NESTS[name][0]
    default_kernel, default_native = _run(case, machine, width, None, None)
    assert default_kernel == default_native, f"{name} {machine}: the default's native bits"
    for layout in points:
        kernel, native = _run(case, machine, width, site, layout)
        assert kernel == default_kernel, f"{name} {machine}: {layout.text()} on the evaluator"
        assert native == default_kernel, f"{name} {machine}: {layout.text()} natively"


@WIDTHS
@pytest.mark.parametrize("machine", TYPES)
@pytest.mark.parametrize("name", list(NESTS))
def test_a_sample_of_the_layout_space_gives_the_defaults_bits(name, machine, width):
    site, points, nest = _points(name, machine, width)
    assert points, f"{name} {machine}: no point"
    sample = _sample(points, f"{name}{machine}{width}")
    if name == "Linear's dot":  # its 64 columns take the lanes of every width
        assert any(p.lanes > 1 for p in sample), f"{name} {machine}: no point in lanes"
    split = [s for p in sample[:2] for s in _splits(nest, machine, p)]
    if name == "Linear's dot":  # its bias add folded into the product's kernel
        split += [replace(p, epilogue=True) for p in sample[:4]]
    _assert_exact(name, machine, width, sample + split, site)


@WIDTHS
@pytest.mark.parametrize("machine", TYPES)
def test_a_split_over_js_blocks_with_b_packed_gives_the_defaults_bits(machine, width):
    """Split over J's blocks with b packed, each worker packs only its blocks' panels (the
    panel loop bounded as the split loop, psk-kernel-to-affine): the default's bits."""
    site, _, nest = _points("Linear's dot", machine, width)
    lanes = width // MACHINES[machine].arith.itemsize
    layout = Layout("tiled", (1, lanes), 0, "JI", lanes, "b", (0, default_threads()))
    check(nest, layout, machine)
    assert nest.j // lanes >= 2, "J has one block: no worker's panels to leave out"
    _assert_exact("Linear's dot", machine, width, [layout], site)


@pytest.mark.slow
@WIDTHS
@pytest.mark.parametrize("machine", TYPES)
@pytest.mark.parametrize("name", list(NESTS))
def test_every_point_of_the_layout_space_gives_the_defaults_bits(name, machine, width):
    site, points, nest = _points(name, machine, width)
    split = [s for p in points[:: max(1, len(points) // 6)] for s in _splits(nest, machine, p)]
    if name == "Linear's dot":
        split += [replace(p, epilogue=True) for p in points]
    _assert_exact(name, machine, width, points + split, site)


@pytest.mark.parametrize("machine", ["f32", "bf16"])
def test_the_auto_plans_softmax_form_gives_the_defaults_bits_on_a_masked_softmax(machine):
    """The cost model covers softmax nests: it moves attention's masked softmax from its
    default three-pass form (exp twice an element) to the two-pass form, whose bits are the
    default's on the evaluator and natively."""
    site, _, _ = _points("softmax", machine, vector_bytes())
    module = _lowered(ATTENTION, machine)
    choices = {c.site: c for c in choose(module.operation, machine, Target.host())}
    assert site in choices, f"{machine}: the auto plan leaves the softmax {site} out"
    layout = choices[site].layout
    assert layout.form == "two-pass", f"{machine}: {layout.text()}"
    _assert_exact("softmax", machine, vector_bytes(), [layout], site)


@pytest.mark.parametrize("machine", TYPES)
@pytest.mark.parametrize("name", list(NESTS))
def test_every_point_tuning_measures_gives_the_defaults_bits(name, machine):
    """`--plan tuned` may pick any point it measures of a nest, the cost model's cheapest
    (presk/backends/tuning.py): each gives the default's bits."""
    site, _, _ = _points(name, machine, vector_bytes())
    module = _lowered(NESTS[name][0], machine)
    (offer,) = [o for o in offers(module.operation, machine, Target.host()) if o.site == site]
    points = measured_points(offer)
    assert len(points) > 1, f"{name} {machine}: one point, nothing measured"
    _assert_exact(name, machine, vector_bytes(), points, site)


DOT = [
    "tests/data/layouts.psk",
    "--entry",
    "dot_big",
    "--dim",
    "I=8",
    "--dim",
    "K=32",
    "--dim",
    "J=16",
]


def test_presk_plan_writes_a_plan_that_changes_no_bit(tmp_path):
    import json

    from conftest import run_in_process

    plan = tmp_path / "plan.json"
    proc = run_in_process("presk", "plan", *DOT, "--realize", "f32", "--out", str(plan))
    assert proc.returncode == 0, proc.stderr
    written = json.loads(plan.read_text())
    assert written["realize"] == "f32" and list(written["layout"]) == ["dot_big/%0"]
    assert "predicted" in proc.stdout
    runs = [
        run_in_process(
            "presk", "run", *DOT, "--backend", "mlir", "--realize", "f32", "--format", "json", *p
        )
        for p in ([], ["--plan", f"@{plan}"])
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert json.loads(runs[0].stdout)["output"] == json.loads(runs[1].stdout)["output"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("{", "not JSON"),
        ('{"layout": {"dot_big/%0": {"tile": [3, 16]}}}', "error[E7002]: nest dot_big/%0"),
        ('{"layout": {"nowhere/%0": {}}}', "no contraction or softmax at nest nowhere/%0"),
        ('{"plans": {}}', "unknown field 'plans'"),
    ],
)
def test_a_bad_plan_is_refused_in_one_line(tmp_path, text, message):
    from conftest import assert_user_error, run_in_process

    plan = tmp_path / "plan.json"
    plan.write_text(text)
    proc = run_in_process(
        "presk", "run", *DOT, "--backend", "kernel", "--realize", "f32", "--plan", f"@{plan}"
    )
    first = assert_user_error(proc)
    assert message in first, first


def test_presk_bench_sweep_times_every_point_and_marks_the_plans_pick():
    from conftest import run_in_process

    proc = run_in_process(
        "presk",
        "bench",
        *DOT[:-4],
        "--dim",
        "K=4",
        "--dim",
        "J=8",
        "--realize",
        "f64",
        "--sweep",
        "--repeat",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("dot_big/%0: ") and "points" in lines[0]
    assert sum("<- presk plan" in line for line in lines) == 1


# The cost model ranks points as measured on the machines it was tuned on (docs/layouts.md,
# section 5): znver4, znver5 and emeraldrapids with AVX-512, znver1 with AVX2.
def _target(width: int) -> Target:
    return Target.for_machine(width, default_threads(), "znver4" if width == 64 else "znver1")


def _nest(a: tuple, b: tuple, ksizes: tuple, shape: tuple) -> Nest:
    out = TensorType("real", tuple(Axis(None, size) for size in shape))
    return Nest(Contraction(a, b, ksizes), out)


O0, O1, O2, K0, K1 = ("o", 0), ("o", 1), ("o", 2), ("k", 0), ("k", 1)
GEMM = _nest((O0, K0), (K0, O1), (1024,), (1024, 1024))
# the course GPT's feed-forward products over 1024 rows (bench/nests.py)
FORWARD = _nest((O0, O1, K0), (K0, O2), (384,), (4, 256, 1536))
DOT_VJP_L = _nest((O0, O1, K0), (O2, K0), (1536,), (4, 256, 384))
DOT_VJP_R = _nest((K0, K1, O0), (K0, K1, O1), (4, 256), (384, 1536))


def _pick(nest: Nest, target: Target) -> Layout:
    return sweep_and_pick(nest, "f32", target, [])[1]


@pytest.mark.parametrize(
    "nest", [GEMM, FORWARD, DOT_VJP_L, DOT_VJP_R], ids=["gemm", "dot", "dot_vjp_l", "dot_vjp_r"]
)
def test_the_cost_model_picks_four_rows_of_one_vector_on_avx512(nest):
    """Measured on znver4 (bench/gemm.py, bench/nests.py): [4, 16] tiles in 16 lanes were
    the fastest or within a few percent of it on each; the model once picked one row,
    [1, 64], 1.6 to 4.4 times slower there (the b panel streamed from L2 each k)."""
    pick = _pick(nest, _target(64))
    assert (pick.form, pick.tile, pick.lanes) == ("tiled", (4, 16), 16), pick


@pytest.mark.parametrize("cpu", ["emeraldrapids", "znver5"])
@pytest.mark.parametrize(
    "nest", [GEMM, FORWARD, DOT_VJP_L, DOT_VJP_R], ids=["gemm", "dot", "dot_vjp_l", "dot_vjp_r"]
)
def test_the_cost_model_keeps_sixteen_accumulators_where_avx512_runs_whole(nest, cpu):
    """Measured on emeraldrapids and znver5 (bench/nests.py, bench/gemm.py), whose cores run
    a 64-byte operation whole: znver4's [4, 16] tiles, four accumulators, ran up to twice
    as slow as [4, 64]'s sixteen on these nests (on znver5 1.01 to 1.53 times, in turns)."""
    target = Target.for_machine(64, default_threads(), cpu)
    pick = _pick(nest, target)
    assert (pick.form, pick.tile, pick.lanes) == ("tiled", (4, 64), 16), pick
    assert _pick(nest, _target(64)).tile == (4, 16)  # the same width, another core


@pytest.mark.parametrize("rows", [(4, 256), (16, 256)], ids=["1024", "4096"])
def test_the_cost_model_packs_a_transposed_a_on_intel_avx512(rows):
    """Measured on emeraldrapids (bench/nests.py): the course GPT's weight gradient, whose
    a (the activations) is read a row of 1536 bytes a k, ran 1.16 times (over 1024 rows,
    one thread) and 1.78 times (4096 rows, two threads) faster with a packed beside b;
    no product whose a is read along k packs it."""
    target = Target.for_machine(64, 2, "emeraldrapids")
    nest = _nest((K0, K1, O0), (K0, K1, O1), rows, (384, 1536))
    assert _pick(nest, target).pack == "ab"
    assert all(_pick(n, target).pack != "ab" for n in [GEMM, FORWARD, DOT_VJP_L])
    assert _pick(nest, _target(64)).pack != "ab"  # znver4's, measured, unchanged


def test_the_cost_model_keeps_packed_rows_on_avx2():
    """On znver1 the best 1024³ f32 point was one row of 64 columns, JI, b packed; the
    AVX-512 terms leave that machine's pick among its kind."""
    pick = _pick(GEMM, _target(32))
    assert (pick.tile[0], pick.order, pick.pack, pick.lanes) == (1, "JI", "b", 8), pick


def test_a_strided_b_misses_only_where_l2_cannot_keep_its_rows():
    """1024³'s b rows, 4 KiB apart, fall in 1/64 of L2's sets: a column of 1024 of them
    does not stay; the course GPT's weight rows, 6 KiB apart, do (2× fewer sets lost)."""
    target, tile = _target(64), Layout(tile=(4, 16), lanes=16)
    assert _conflicts(GEMM, tile, 4, target)
    assert not _conflicts(FORWARD, tile, 4, target)
    assert predict(GEMM, tile, 4, target) > 2 * predict(GEMM, replace(tile, pack="b"), 4, target)
