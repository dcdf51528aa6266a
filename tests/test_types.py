"""PSK types: the MLIR spelling round-trips through the bindings and the Python model."""

import pytest
from mlir import ir

from presk.ir.context import new_context
from presk.ir.types import (
    Axis,
    RecordType,
    TensorType,
    TupleType,
    leaves,
    parse_mlir_type,
    stacked,
    unstacked,
)

X = TensorType("real", (Axis("batch", 4), Axis(None, 3)))
W = TensorType("real", (Axis(None, 3), Axis(None, 2)))
TYPES = [
    X,
    TensorType("real"),
    TensorType("index", (Axis("B", 2), Axis("T", 8))),
    TensorType("bool", (Axis("seq", 4), Axis("seq2", 4))),
    RecordType((("w", W), ("b", TensorType("real", (Axis(None, 2),))))),
    RecordType(()),
    TupleType((X, TensorType("index"))),
    TupleType(()),
]


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.text())
def test_mlir_spelling_round_trips(t):
    with new_context():
        printed = str(ir.Type.parse(t.mlir()))
    assert printed == t.mlir()
    assert parse_mlir_type(printed) == t


def test_text_spelling():
    assert X.text() == "ℝ[batch: 4, 3]"
    assert TensorType("real").text() == "ℝ"
    assert TensorType("index", (Axis("B", 2),)).text() == "nat[B: 2]"


def test_leaves_have_dotted_paths_and_stacks_add_a_leading_axis():
    block = RecordType((("ff", RecordType((("w", W),))),))
    model = RecordType((("blocks", stacked(block, 3)), ("head", W)))
    assert unstacked(model.field("blocks")) == block
    assert leaves(model) == [
        ("blocks.ff.w", TensorType("real", (Axis(None, 3), Axis(None, 3), Axis(None, 2)))),
        ("head", W),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        '!psk.real<array<i64: 4, 2>, ["batch"]>',
        "!psk.real<array<i64: 4>>",
        "f32",
        "!psk.stack<2 : i64>",
    ],
)
def test_malformed_types_are_refused(bad):
    with pytest.raises(ValueError):
        parse_mlir_type(bad)
