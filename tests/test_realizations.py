"""Realization records (`--realize @R.json`): their refusals, parameter types, integer
weights, storage types by site and orders."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, run_tool

from presk import backends
from presk.backends.host import CallContext
from presk.kernel.machine import MACHINES
from presk.quantize import dequantize, quantize
from presk.realize import Quant
from presk.runtime.values import Tensor, leaves, map_leaves
from presk.toolchain import vector_widths
from tests.conformance.suite import Case, contraction_sites, inputs, module_of

LINEAR = ["tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4"]
MINIGPT = Case("MiniGPT", "tutorial/05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.apply", ("B=2", "T=8"))


def _record(tmp_path, record: dict) -> str:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    return f"@{path}"


@pytest.mark.parametrize(
    "record,code,message",
    [
        ({"default": "f16"}, "E7001", "default: unknown type 'f16' (types: f64, f32, bf16)"),
        ({"defaults": "f32"}, "E7001", "unknown field 'defaults' (fields: default, storage"),
        ({"params": {"w": "f64"}}, "E7001", "params w: unknown type 'f64' (types: f32, bf16)"),
        ({"params": {"v": "bf16"}}, "E7001", "unknown parameter 'v' (parameters: w, b)"),
        (
            {"params": {"w": "bf16"}, "quant": {"w": {"bits": 8, "over": -1}}},
            "E7001",
            "parameter w is both typed (params) and quantised (quant)",
        ),
        ({"quant": {"w": {"bits": 6}}}, "E7001", "bits is 8 or 4, not 6"),
        (
            {"quant": {"w": {"bits": 8, "over": "In"}}},
            "E7001",
            "quant w: over 'In': ℝ[3, 2] has no axis of that name (named: none)",
        ),
        ({"quant": {"w": {"bits": 8, "over": 2}}}, "E7001", "quant w: over 2: ℝ[3, 2] has 2 axes"),
        ({"order": {"Linear.apply/%0": "shuffled"}}, "E7001", "is sequential, blocked(W) or"),
        ({"functions": "glibc"}, "E7001", 'functions is "presk" (presk\'s own exp, erf and tanh'),
        ({"storage": {"Linear.apply/%7": "bf16"}}, "E7001", "unknown site 'Linear.apply/%7'"),
        (
            {"default": "bf16", "accum": {"Linear.apply/%0": "f64"}},
            "E7002",
            "f64 accumulation in a bf16 kernel",
        ),
    ],
)
def test_a_realization_a_backend_cannot_take_is_refused(tmp_path, record, code, message):
    proc = run_tool(
        "presk", "run", *LINEAR, "--backend", "kernel", "--realize", _record(tmp_path, record)
    )
    first = assert_user_error(proc, code)
    assert message in first, first


def test_the_reference_runs_an_accumulation_type_the_machine_backends_refuse(tmp_path):
    record = _record(tmp_path, {"default": "bf16", "accum": {"Linear.apply/%0": "f64"}})
    proc = run_tool("presk", "run", *LINEAR, "--backend", "interp", "--realize", record)
    assert proc.returncode == 0, proc.stderr


def test_presk_train_refuses_integer_weights(tmp_path):
    record = _record(tmp_path, {"quant": {"l1.w": {"bits": 8, "over": -1}}})
    proc = run_tool(
        "presk", "train", "tests/train/mlp_regression.psk", "--steps", "1", "--realize", record
    )
    assert "not integer weights (quant)" in assert_user_error(proc, "E7002")


def _bits(value) -> list:
    """Raw bits of machine numbers; every digit of the reference's exact ones."""
    out = []
    for _, t in leaves(value):
        data = np.asarray(t.data)
        out.append([repr(x) for x in data.flat] if data.dtype == object else data.tobytes())
    return out


def _run(backend: str, realize, params_change=None, case: Case = MINIGPT, plan=None):
    args = inputs(case)
    if params_change is not None:
        args = [params_change(args[0]), *args[1:]]
    b = backends.make(backend, module_of(case), realize=realize, plan=plan)
    return b.call(args, CallContext())


def _rounded(record_params: dict, to):
    def one(path, t):
        if path not in record_params:
            return t
        return Tensor(t.type, to(path, np.asarray(t.data, dtype=np.float64), t.type))

    return lambda params: map_leaves(one, params)


# q is typed but k and v, which the same Proj.apply reads, are not: that kernel reads f32
PARAMS = {"tok": "bf16", "blocks.ff.up.w": "bf16", "head": "f32", "blocks.attn.q.w": "bf16"}


@pytest.mark.parametrize("backend", ["interp", "kernel", "mlir"])
def test_parameter_types_give_the_bits_of_parameters_rounded_beforehand(tmp_path, backend):
    from presk.kernel.machine import to_storage
    from presk.realize import Realization

    mixed = Realization("f32", storage={}, params=PARAMS, spelling="mixed")
    typed = _run(backend, mixed)
    beforehand = _run(
        backend,
        Realization("f32", spelling="plain"),
        _rounded(PARAMS, lambda p, w, t: to_storage(w, PARAMS[p]).astype(np.float64)),
    )
    assert _bits(typed) == _bits(beforehand)


QUANT = {
    "blocks.ff.up.w": Quant(8, -1, "absmax"),
    "blocks.ff.down.w": Quant(4, -2, "absmax"),
    "tok": Quant(8, 0, "pow2"),
}


def _lanes_plan(tmp_path, lanes: int) -> str:
    """A plan putting the columns of every MiniGPT contraction the lanes fit (its columns
    a multiple of them) in tiles of one row and `lanes` columns, in f32 vector lanes."""
    point = {"form": "tiled", "tile": [1, lanes], "lanes": lanes, "pack": "b"}
    sites = contraction_sites(MINIGPT, "f32", lambda nest: nest.j % lanes == 0)
    layout = {site: point for site in sites}
    # the MLP's weights in lanes straight from their int8 buffers, not through a panel
    layout["Linear.apply/%0"] = {**point, "pack": "none"}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"layout": layout}))
    return str(plan)


# f32 lanes: none, then those of every vector width the machine runs (4 and 8 on AVX2)
LANES = [1, *(width // MACHINES["f32"].arith.itemsize for width in vector_widths())]


@pytest.mark.parametrize("backend", ["kernel", "mlir"])
@pytest.mark.parametrize("lanes", LANES, ids=lambda n: f"{n}-lanes" if n > 1 else "scalar")
def test_integer_weights_give_the_bits_of_their_dequantised_values(backend, lanes, tmp_path):
    from presk.realize import Realization

    plan = _lanes_plan(tmp_path, lanes) if lanes > 1 else "default"  # auto may add lanes
    machine = backends.make(
        backend,
        module_of(MINIGPT),
        realize=Realization("f32", quant=QUANT, spelling="q"),
        plan=plan,
    )
    quantised = machine.call(inputs(MINIGPT), CallContext())
    # the kernels read the integers themselves: 8 bits, and 4 bits two to a byte
    read = _integer_loads(machine.module)
    in_lanes = [f"vector<{lanes}xi8>", f"vector<{lanes // 2}xi8>"] if lanes > 1 else ["i8"]
    assert {"q4", *in_lanes} <= read, read

    def dequantised(path, w, t):
        q, s = quantize(w, t, QUANT[path])
        return dequantize(q, s).astype(np.float64)

    plain = _run(backend, Realization("f32", spelling="p"), _rounded(QUANT, dequantised), plan=plan)
    assert _bits(quantised) == _bits(plain)


def _integer_loads(module) -> set[str]:
    """The types integer-weight kernels load int8 in, and `q4` where one unpacks nibbles."""
    from presk.ir.ops import walk_ops

    found = set()
    for f in walk_ops(module.operation, "func.func"):
        if "psk_kernel.quant" not in f.attributes:
            continue
        for op in walk_ops(f, ""):
            if op.name.endswith("load") and "i8" in str(op.results[0].type):
                found.add(str(op.results[0].type))
            found.update(["q4"] if op.name == "arith.shrsi" else [])
    return found


@pytest.mark.parametrize("backend", ["kernel", "mlir"])
@pytest.mark.parametrize("default", ["f64", "bf16"])
def test_typed_and_integer_weights_in_f64_and_bf16_kernels(backend, default):
    from presk.kernel.machine import to_storage
    from presk.realize import Realization

    # b drawn too (it starts at zero), so rounding it to f32 changes it
    case = Case("Linear", LINEAR[0], LINEAR[2], ("batch=4",), drawn=True)
    quant = {"w": Quant(4, -1, "absmax")}
    realized = Realization(default, params={"b": "f32"}, quant=quant, spelling="r")

    def beforehand(path, w, t):
        if path == "b":
            return to_storage(w, "f32").astype(np.float64)
        return dequantize(*quantize(w, t, quant[path])).astype(np.float64)

    plain = Realization(default, spelling="p")
    expected = _run(backend, plain, _rounded({"w": 0, "b": 0}, beforehand), case=case)
    assert _bits(_run(backend, realized, case=case)) == _bits(expected)


def test_a_kernel_shared_by_parameters_of_two_types_reads_its_own():
    from presk import stages
    from presk.ir.ops import string_attr, walk_ops
    from presk.kernel.machine import buffer_tensor
    from presk.realize import Realization

    module = stages.kernel(module_of(MINIGPT), Realization("f32", params=PARAMS, spelling="m"))
    kernels = {string_attr(f, "sym_name"): f for f in walk_ops(module.operation, "func.func")}

    def weight_type(site: str, i: int = 1) -> set[str]:
        """The element types the launches at `site` read their input `i` in."""
        launches = [
            op
            for op in walk_ops(module.operation, "psk_kernel.launch")
            if string_attr(op, "psk.site") == site
        ]
        args = [
            kernels[op.attributes["kernel"].value].regions[0].blocks[0].arguments for op in launches
        ]
        return {buffer_tensor(a[i].type)[0] for a in args}

    assert weight_type("Proj.apply/%0") == {"f32"}  # q's bf16, k's and v's not: converted
    assert weight_type("MiniGPT.apply/%0", 0) == {"bf16"}  # the token table, gathered
    assert "bf16" in weight_type("Linear.apply/%0")  # the MLP's up weight, read as bf16


def test_a_typed_parameter_is_read_in_its_own_type_with_no_copy(tmp_path):
    record = _record(tmp_path, {"default": "f64", "params": {"w": "bf16", "b": "f32"}})
    proc = run_tool("presk", "dump", *LINEAR, "--stage", "kernel", "--realize", record)
    assert proc.returncode == 0, proc.stderr
    assert "kernel dot (%0 : f64[batch: 4, 3], %1 : bf16[3, 2])" in proc.stdout
    assert "kernel add (%0 : f64[batch: 4, 2], %1 : f32[2])" in proc.stdout
    quant = _record(tmp_path, {"default": "f32", "quant": {"w": {"bits": 4, "over": -2}}})
    proc = run_tool("presk", "dump", *LINEAR, "--stage", "kernel", "--realize", quant)
    assert proc.returncode == 0, proc.stderr
    # two 4-bit weights a byte, a scale per column, dequantised at the load
    assert "kernel dot (%0 : f32[batch: 4, 3], %1 : i8[3, 1], %2 : f32[1, 2])" in proc.stdout
    assert "(f32((((i3 % 2) != 0) ? (s1 >> 4) : (((s1 & 15) ^ 8) - 8))) * %2[0, i3])" in (
        proc.stdout
    )


def test_parameters_realized_once_are_not_realized_again():
    from presk.quantize import parameter_values
    from presk.realize import Realization

    r = Realization("f32", params={"head": "bf16"}, quant={"tok": Quant(4, -1, "absmax")})
    once = parameter_values(inputs(MINIGPT)[0], r, native=True)
    twice = parameter_values(once, r, native=True)
    assert twice["tok"].data is once["tok"].data  # the same integers, not requantised
    assert twice["head"].data is once["head"].data  # already bf16: no copy


def test_absmax_and_pow2_scales_and_a_zero_channel():
    from presk.ir.types import Axis, TensorType

    t = TensorType("real", (Axis("In", 2), Axis("Out", 3)))
    w = np.array([[1.0, 0.0, -0.5], [-2.0, 0.0, 0.25]])
    q, s = quantize(w, t, Quant(8, "In", "absmax"))
    assert s.dtype == np.float32 and s.shape == (1, 3)
    assert s[0, 1] == 0 and not q[:, 1].any()  # an all-zero channel: scale 0
    assert s[0, 0] == np.float32(2.0 / 127) and q[1, 0] == -127
    q4, s4 = quantize(w, t, Quant(4, -2, "pow2"))
    assert np.all(np.abs(q4) <= 7) and s4[0, 0] == 0.5  # 2/7 → the power of two above: 0.5


def test_the_uniform_spelling_is_the_record_with_empty_maps(tmp_path):
    record = _record(tmp_path, {"default": "f32"})
    budget = tmp_path / "envelope.json"  # an envelope is kept, and changes no bit
    budget.write_text(json.dumps({"default": "f32", "envelope": {"rel_error": 0.001}}))
    runs = [
        run_tool("presk", "run", *LINEAR, "--backend", "mlir", "--realize", r, "--format", "json")
        for r in ("f32", record, f"@{budget}")
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    outputs = [json.loads(r.stdout)["output"] for r in runs]
    assert outputs[0] == outputs[1] == outputs[2]


def test_storage_by_site_reads_across_types_at_the_kernels_edge(tmp_path):
    record = _record(tmp_path, {"default": "f32", "storage": {"Linear.apply/%1": "bf16"}})
    proc = run_tool("presk", "dump", *LINEAR, "--stage", "kernel", "--realize", record)
    assert proc.returncode == 0, proc.stderr
    # the bf16 add reads the f32 product, and the bias stored in the default f32, rounded
    # at its edge, with no copy
    assert (
        "kernel add (%0 : f32[batch: 4, 2], %1 : f32[2]) -> %2 : bf16[batch: 4, 2]" in proc.stdout
    )
    assert "%2[i0, i1] = (f32(bf16(%0[i0, i1])) + f32(bf16(%1[i1])))" in proc.stdout
    outs = [
        run_tool("presk", "run", *LINEAR, "--backend", b, "--realize", record, "--format", "json")
        for b in ("kernel", "mlir")
    ]
    assert json.loads(outs[0].stdout)["output"] == json.loads(outs[1].stdout)["output"]


def test_blocked_order_keeps_the_bits_interleaved_changes_them(tmp_path):
    from presk.realize import Realization

    case = Case("dot", "tests/data/layouts.psk", "dot_big", ("I=4", "K=64", "J=8"))
    plain = _bits(_run("mlir", Realization("f32", spelling="f32"), case=case))
    blocked = Realization("f32", order={"dot_big/%0": "blocked(16)"}, spelling="b")
    interleaved = Realization("f32", order={"dot_big/%0": "interleaved(4)"}, spelling="i")
    assert _bits(_run("mlir", blocked, case=case)) == plain
    kernel = _bits(_run("kernel", interleaved, case=case))
    assert _bits(_run("mlir", interleaved, case=case)) == kernel
    assert kernel != plain  # four partial sums: another rounding


def test_presk_quantize_lists_parameter_paths_and_shapes():
    proc = run_tool("presk", "quantize", *LINEAR, "--list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["w", "ℝ[3,", "2]", "6", "b", "ℝ[2]", "2"]
    # only the dims the parameters use need binding: MiniGPT's pos table uses T, not B
    gpt = ["tutorial/05_minigpt.psk", "--entry", "MiniGPT{64, 16, 2, 2}.apply", "--list"]
    proc = run_tool("presk", "quantize", *gpt, "--dim", "T=8")
    assert proc.returncode == 0, proc.stderr
    assert "blocks.ff.up.w                   ℝ[2, 16, 64]             2048" in proc.stdout
    assert "dim T is not bound" in assert_user_error(run_tool("presk", "quantize", *gpt), "E3003")
