"""`presk import` of what it cannot take: each refused with a code naming the node and
its op (or the file, the initializer, the input), exit status 1, and nothing written in
the output folder; and a fuzzer that mutates the fixtures' protobufs, bytes and fields
(derandomized, so every run sees the same cases): each mutant imported or refused,
never a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import safetensors.numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from programs import REPO

from bad_input.refusal import accept_or_refuse, refuse

GPT2 = REPO / "tests" / "data" / "onnx" / "gpt2.onnx"
MLP = REPO / "tests" / "data" / "onnx" / "mlp.onnx"


def model(nodes, inputs, outputs, initializers=(), opset=18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vector(name: str, n: int = 4, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, ["batch", n])


def saved(tmp_path: Path, m: onnx.ModelProto, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save_model(m, path)
    return path


def refused_and_unwritten(tmp_path: Path, model_path, *flags, code: str, says: str) -> str:
    out = tmp_path / "out"
    line = refuse(["import", model_path, "--out", out, *flags], code, says)
    assert not out.exists(), f"{out} was written"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")], "a temporary is left"
    return line


def test_an_op_presk_does_not_import_is_named(tmp_path):
    m = model(
        [
            helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top"),
            helper.make_node("Relu", ["v"], ["y"]),
        ],
        [vector("x")],
        [vector("y", 2)],
        [numpy_helper.from_array(np.array([2], dtype=np.int64), "k")],
    )
    line = refused_and_unwritten(
        tmp_path, saved(tmp_path, m), "--dim", "batch=2", code="E4002", says="'top' (TopK)"
    )
    assert "presk imports no TopK" in line


def test_a_known_op_in_a_form_presk_cannot_write_is_named(tmp_path):
    starts, ends, axes, steps = (np.array([v], dtype=np.int64) for v in (0, 4, 1, 2))
    m = model(
        [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"], name="every_other")],
        [vector("x")],
        [vector("y", 2)],
        [
            numpy_helper.from_array(v, n)
            for v, n in zip((starts, ends, axes, steps), "seat", strict=True)
        ],
    )
    refused_and_unwritten(
        tmp_path,
        saved(tmp_path, m),
        "--dim",
        "batch=2",
        code="E4006",
        says="'every_other' (Slice): a Slice with step 2",
    )


def test_a_dynamic_size_left_unbound_is_refused(tmp_path):
    refused_and_unwritten(
        tmp_path, GPT2, "--dim", "batch=1", code="E4003", says="dynamic size 'seq'"
    )


def test_a_dim_the_graph_does_not_have_is_refused(tmp_path):
    refused_and_unwritten(
        tmp_path, MLP, "--dim", "batch=1", "--dim", "seq=3", code="E4003", says="--dim seq"
    )


def test_a_weight_of_a_type_presk_cannot_hold_is_refused(tmp_path):
    w = helper.make_tensor("w", TensorProto.COMPLEX64, [4], [1 + 0j] * 4)
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [vector("x")], [vector("y")], [w])
    refused_and_unwritten(
        tmp_path, saved(tmp_path, m), "--dim", "batch=2", code="E4004", says="'w' is complex64"
    )


def test_an_input_of_a_type_presk_cannot_hold_is_refused(tmp_path):
    m = model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [vector("x", 4, TensorProto.STRING)],
        [vector("y")],
    )
    refused_and_unwritten(
        tmp_path, saved(tmp_path, m), "--dim", "batch=2", code="E4004", says="input 'x' is string"
    )


def external(tmp_path: Path, location: str = "w.bin") -> Path:
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [vector("x")], [vector("y")], [w])
    onnx.save_model(
        m, tmp_path / "m.onnx", save_as_external_data=True, location=location, size_threshold=0
    )
    return tmp_path / "m.onnx"


def test_external_data_that_is_missing_or_short_is_refused(tmp_path):
    path = external(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"\0" * 7)  # 16 bytes were written
    refused_and_unwritten(
        tmp_path, path, "--dim", "batch=2", code="E4005", says="shorter than the tensor"
    )
    (tmp_path / "w.bin").unlink()
    refused_and_unwritten(tmp_path, path, "--dim", "batch=2", code="E4005", says="w.bin is missing")


def test_external_data_outside_the_models_folder_is_refused(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    path = external(inner)
    m = onnx.load_model(path, load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = "../../etc/passwd"
    onnx.save_model(m, path)
    refused_and_unwritten(
        tmp_path, path, "--dim", "batch=2", code="E4005", says="outside the model's folder"
    )


def test_external_data_that_loads_imports(tmp_path):
    path = external(tmp_path)
    out = tmp_path / "out"
    from conftest import run_in_process  # noqa: PLC0415 (tests/ is on the path when pytest runs)

    r = run_in_process("presk", "import", str(path), "--out", str(out), "--dim", "batch=2")
    assert r.returncode == 0, r.stderr
    assert (out / "params.safetensors").exists()


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(0.5, id="half"),
        pytest.param(0.999, id="all_but_the_end"),
        pytest.param(0.01, id="its_start"),
    ],
)
def test_a_truncated_model_is_refused(tmp_path, cut):
    data = GPT2.read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * cut)])
    refused_and_unwritten(
        tmp_path, path, "--dim", "batch=1", "--dim", "seq=4", code="E4001", says="cut.onnx"
    )


def test_bytes_that_are_no_model_are_refused(tmp_path):
    path = tmp_path / "noise.onnx"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    refused_and_unwritten(tmp_path, path, code="E4001", says="noise.onnx")
    path.write_text("")
    refused_and_unwritten(tmp_path, path, code="E4001", says="no graph")


def test_a_graph_the_onnx_checker_refuses_is_refused(tmp_path):
    m = model([helper.make_node("Add", ["x", "nothing"], ["y"])], [vector("x")], [vector("y")])
    refused_and_unwritten(
        tmp_path, saved(tmp_path, m), "--dim", "batch=2", code="E4001", says="checker"
    )


def test_an_old_opset_is_refused(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vector("x")], [vector("y")], opset=13)
    refused_and_unwritten(
        tmp_path, saved(tmp_path, m), "--dim", "batch=2", code="E4001", says="opset 13"
    )


def test_an_output_that_depends_on_no_input_is_refused(tmp_path):
    c = numpy_helper.from_array(np.ones(4, dtype=np.float32), "c")
    m = model(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Identity", ["k"], ["z"])],
        [vector("x")],
        [vector("y"), helper.make_tensor_value_info("z", TensorProto.INT64, [1])],
        [c, numpy_helper.from_array(np.array([1], dtype=np.int64), "k")],
    )
    refused_and_unwritten(
        tmp_path,
        saved(tmp_path, m),
        "--dim",
        "batch=2",
        code="E4006",
        says="output 'z' depends on no input",
    )


def test_a_missing_model_and_an_output_that_is_a_file_are_refused(tmp_path):
    refused_and_unwritten(tmp_path, tmp_path / "none.onnx", code="E0002", says="none.onnx")
    (tmp_path / "file").write_text("mine")
    refuse(
        ["import", MLP, "--out", tmp_path / "file", "--dim", "batch=2"], "E0003", "not a directory"
    )
    assert (tmp_path / "file").read_text() == "mine"


def test_a_malformed_dim_is_refused(tmp_path):
    refused_and_unwritten(tmp_path, MLP, "--dim", "batch", code="E3004", says="NAME=VALUE")
    refused_and_unwritten(tmp_path, MLP, "--dim", "batch=0", code=None, says="batch")


# ---- the way back: presk params --names onnx ----------------------------------------------

REGRESSION = REPO / "tests" / "train" / "mlp_regression.psk"


def names_refused(tmp_path: Path, program: Path, code: str, says: str) -> None:
    out = tmp_path / "back.safetensors"
    argv = ["params", program, "--entry", "loss", "--names", "onnx", "--out", out]
    refuse(argv, code, says)
    assert not out.exists(), f"{out} was written"


def beside(tmp_path: Path, metadata: dict[str, str] | None) -> Path:
    """The regression program in a folder of its own, with a params.safetensors beside it
    whose metadata is `metadata` (no file when None)."""
    program = tmp_path / "model.psk"
    program.write_text(REGRESSION.read_text())
    if metadata is not None:
        safetensors.numpy.save_file(
            {"w": np.zeros(2, np.float32)}, str(tmp_path / "params.safetensors"), metadata
        )
    return program


def test_names_onnx_of_a_program_presk_did_not_import_is_refused(tmp_path):
    names_refused(tmp_path, beside(tmp_path, None), "E0002", "their ONNX names: no such file")
    program = beside(tmp_path, {"format": "presk.params"})  # as presk params writes them
    names_refused(tmp_path, program, "E9006", "no onnx_names in its metadata")


@pytest.mark.parametrize(
    "recorded, says",
    [
        ("{", "not JSON"),
        ('["l1.w"]', "is not of type 'object'"),
        ('{"l1.w": 3}', "onnx_names['l1.w']: 3 is not of type 'string'"),
        ('{"l1.w": "fc.weight", "l2.w": "fc.weight"}', "one initializer for two parameters"),
    ],
)
def test_names_onnx_from_malformed_metadata_is_refused(tmp_path, recorded, says):
    names_refused(tmp_path, beside(tmp_path, {"onnx_names": recorded}), "E9006", says)


def test_names_onnx_that_leave_a_parameter_unnamed_are_refused(tmp_path):
    program = beside(tmp_path, {"onnx_names": '{"l1.w": "fc1.weight"}'})
    names_refused(tmp_path, program, "E9005", "names no ONNX initializer for parameter l1.b")


# ---- the fuzzer ---------------------------------------------------------------------------

SEEDS = {
    "mlp": (MLP.read_bytes(), ("--dim", "batch=2")),
    "gpt2": (GPT2.read_bytes(), ("--dim", "batch=1", "--dim", "seq=4")),
}
OPS = ["Add", "Mul", "MatMul", "Reshape", "Transpose", "Softmax", "Gather", "Slice", "Concat",
       "Split", "Where", "Cast", "Expand", "Unsqueeze", "Squeeze", "LayerNormalization",
       "ReduceMean", "Gemm", "Erf", "Tanh", "Pow", "TopK", "Shape", "Range"]  # fmt: skip
NUMBERS = [-3, -1, 0, 1, 2, 3, 7, 64, 2**40]


@st.composite
def mutants(draw) -> tuple[bytes, tuple[str, ...]]:
    """A fixture with its bytes overwritten, or a field of its protobuf changed: a node's
    op, attribute or input, an initializer's dims, an input's size."""
    name = draw(st.sampled_from(sorted(SEEDS)))
    data, dims = SEEDS[name]
    if draw(st.booleans()):
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
        return bytes(out), dims
    m = onnx.load_model_from_string(data)
    g = m.graph
    node = g.node[draw(st.integers(0, len(g.node) - 1))]
    field = draw(st.sampled_from(["op", "attribute", "input", "initializer", "size"]))
    if field == "op":
        node.op_type = draw(st.sampled_from(OPS))
    elif field == "attribute" and node.attribute:
        a = node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
        if a.type == onnx.AttributeProto.INT:
            a.i = draw(st.sampled_from(NUMBERS))
        elif a.type == onnx.AttributeProto.INTS and a.ints:
            a.ints[draw(st.integers(0, len(a.ints) - 1))] = draw(st.sampled_from(NUMBERS))
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = draw(st.sampled_from([0.0, -1.0, 1e30, float("nan")]))
    elif field == "input" and node.input:
        names = [o for n in g.node for o in n.output] + [t.name for t in g.initializer]
        node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(names))
    elif field == "initializer":
        t = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
        if t.dims:
            t.dims[draw(st.integers(0, len(t.dims) - 1))] = draw(st.sampled_from(NUMBERS))
    elif field == "size":
        dim = g.input[0].type.tensor_type.shape.dim
        d = dim[draw(st.integers(0, len(dim) - 1))]
        if draw(st.booleans()):
            d.dim_value = draw(st.sampled_from(NUMBERS))
        else:
            d.dim_param = draw(st.sampled_from(["batch", "seq", "other"]))
    return m.SerializeToString(), dims


@settings(max_examples=300, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(mutant=mutants())
def test_mutated_models_are_imported_or_refused(tmp_path_factory, mutant):
    data, dims = mutant
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "m.onnx").write_bytes(data)
    line = accept_or_refuse(["import", folder / "m.onnx", "--out", folder / "out", *dims])
    if line:  # refused: nothing written
        assert not (folder / "out").exists()
