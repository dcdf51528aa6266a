"""Folding at import: a node whose inputs are all known (constants, integer initializers,
shapes at the bound sizes) evaluated once, by ONNX's own reference implementation of
the op at the graph's opset, so its meaning is the standard's and not presk's reading.

What a fold could make is bounded before it runs (`MAX_FOLDED` elements), so a graph
cannot ask presk to allocate without limit; an op that draws at random is never folded.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

# The largest tensor a fold may make: far above any shape arithmetic or mask of a model
# presk can run, far below this machine's memory.
MAX_FOLDED = 1 << 26

RANDOM_OPS = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}


class FoldError(Exception):
    """A node that cannot be folded; the caller names it in a coded error."""


def output_size(node: onnx.NodeProto, values: list[np.ndarray | None]) -> int | None:
    """An upper bound on the elements of what `node` makes, for the ops whose output can
    be far larger than their inputs; None for the others."""
    op = node.op_type
    try:
        if op == "ConstantOfShape":
            return int(np.prod(values[0].astype(np.float64)))
        if op == "Expand":
            shape = np.broadcast_shapes(values[0].shape, tuple(int(d) for d in values[1]))
            return int(np.prod(np.array(shape, dtype=np.float64)))
        if op == "Tile":
            return int(np.prod(values[0].shape) * np.prod(values[1].astype(np.float64)))
        if op == "Range":
            start, limit, delta = (float(v) for v in values[:3])
            return int(abs((limit - start) / delta)) + 1 if delta else 0
    except (ValueError, TypeError, OverflowError, IndexError, AttributeError) as e:
        raise FoldError(str(e)) from None
    return None


def _gather_elements(node: onnx.NodeProto, values: list[np.ndarray]) -> list[np.ndarray]:
    # The reference's own GatherElements goes through np.choose, which takes at most 32
    # choices along the axis: a position table of 64 rows is past it.
    data, index = values
    axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
    try:
        axis = axis + data.ndim if axis < 0 else axis
        index = np.where(index < 0, index + data.shape[axis], index)
        return [np.take_along_axis(data, index.astype(np.int64), axis=axis)]
    except (ValueError, IndexError, TypeError) as e:
        raise FoldError(str(e)) from None


OWN = {"GatherElements": _gather_elements}


def fold(node: onnx.NodeProto, values: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    """The outputs of `node` on `values` (None for an omitted optional input)."""
    if node.op_type in RANDOM_OPS:
        raise FoldError(f"{node.op_type} draws at random")
    size = output_size(node, values)
    if size is not None and size > MAX_FOLDED:
        raise FoldError(f"it would make {size} elements, more than the {MAX_FOLDED} presk folds")
    if node.op_type in OWN and all(v is not None for v in values):
        return OWN[node.op_type](node, values)
    names = [f"in{i}" if v is not None else "" for i, v in enumerate(values)]
    single = helper.make_node(
        node.op_type, names, [f"out{i}" for i in range(len(node.output))], domain=node.domain
    )
    single.attribute.extend(node.attribute)
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in zip(names, values, strict=True)
        if v is not None
    ]
    outputs = [
        helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in single.output
    ]
    graph = helper.make_graph([single], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: v for n, v in zip(names, values, strict=True) if v is not None}
    try:
        with np.errstate(all="ignore"):
            results = ReferenceEvaluator(model).run(None, feeds)
    except Exception as e:  # the reference implementation's own refusal, of any kind
        raise FoldError(" ".join(str(e).split())[:200] or type(e).__name__) from None
    out = []
    for r in results:
        array = np.asarray(r)
        if array.size > MAX_FOLDED:
            raise FoldError(
                f"it made {array.size} elements, more than the {MAX_FOLDED} presk folds"
            )
        out.append(array)
    return out
