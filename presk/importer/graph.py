"""Reading an ONNX file for `presk import`: the model parsed and checked, its weights
loaded (external data included), its inputs' sizes bound.

Everything a file can get wrong ends here in one coded line: bytes that are no ONNX
model, or one the ONNX checker refuses (E4001), an opset older than 17 or a domain
presk does not read (E4001), an external-data file that is missing or short (E4005),
a tensor type presk cannot hold (E4004), an input size that is dynamic and not bound by
`--dim` (E4003).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper, numpy_helper
from onnx.shape_inference import InferenceError

from presk.errors import GraphError, UsageError

# protobuf's own limit on one message; past it the file cannot be an ONNX model.
MAX_ONNX_BYTES = 2 << 30
OLDEST_OPSET = 17

# ONNX element types presk holds: reals (in any float width) and whole numbers; bool
# for masks. The rest (strings, complex numbers, 8-bit and 4-bit floats, 4-bit integers)
# it refuses.
REAL_TYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
}
INDEX_TYPES = {
    onnx.TensorProto.INT64,
    onnx.TensorProto.INT32,
    onnx.TensorProto.INT16,
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT64,
    onnx.TensorProto.UINT32,
    onnx.TensorProto.UINT16,
    onnx.TensorProto.UINT8,
}
BOOL_TYPES = {onnx.TensorProto.BOOL}


def type_name(elem_type: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def kind_of(elem_type: int) -> str | None:
    """`real`, `index` or `bool`: what presk holds a tensor of this type as, or None."""
    if elem_type in REAL_TYPES:
        return "real"
    if elem_type in INDEX_TYPES:
        return "index"
    if elem_type in BOOL_TYPES:
        return "bool"
    return None


@dataclass(frozen=True)
class Input:
    name: str
    kind: str  # real, index or bool
    elem_type: int
    dims: tuple[int | str, ...]  # a size, or the dim_param it is bound by


@dataclass
class Graph:
    path: str
    model: onnx.ModelProto
    opset: int
    inputs: list[Input]
    outputs: list[str]
    initializers: dict[str, np.ndarray]  # in the file's order
    sizes: dict[str, int]  # each dim_param the inputs use, bound

    @property
    def nodes(self) -> list[onnx.NodeProto]:
        return list(self.model.graph.node)


def refused(path: str, code: str, what: str) -> GraphError:
    return GraphError(f"{path}: {what}", code=code)


def read(path: str, dims: dict[str, int]) -> Graph:
    """The model in `path` read and checked, its weights loaded, its sizes bound by `dims`."""
    data = _read_bytes(path)
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise refused(path, "E4001", f"not an ONNX model ({_reason(e)})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise refused(path, "E4001", "not an ONNX model (no graph, or a graph of no node)")
    opset = _opset(path, model)
    _load_external(path, model)
    # the types presk holds first: the checker would refuse some of them less plainly
    initializers = _initializers(path, model)
    inputs = _inputs(path, model, set(initializers))
    try:  # the full check infers every value's shape, strictly: ranks and sizes agree
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, InferenceError, ValueError, RuntimeError) as e:
        raise refused(path, "E4001", f"the ONNX checker refuses it: {_reason(e)}") from None
    sizes = _bind(path, inputs, dims)
    outputs = [o.name for o in model.graph.output]
    return Graph(path, model, opset, inputs, outputs, initializers, sizes)


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_ONNX_BYTES + 1)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}", code="E0002") from None
    if len(data) > MAX_ONNX_BYTES:
        raise UsageError(f"cannot read {path}: larger than 2 GiB", code="E0002")
    return data


def _reason(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def _opset(path: str, model: onnx.ModelProto) -> int:
    opset = None
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            opset = o.version
    if opset is None:
        raise refused(path, "E4001", "imports no version of the standard ONNX operators")
    if opset < OLDEST_OPSET:
        raise refused(
            path,
            "E4001",
            f"opset {opset}: presk imports opset {OLDEST_OPSET} and later (re-export)",
        )
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            raise refused(
                path,
                "E4002",
                f"node {node.name or node.output[0]!r} ({node.domain}.{node.op_type}): presk "
                f"imports the standard ONNX operators only",
            )
    return opset


def _load_external(path: str, model: onnx.ModelProto) -> None:
    """Each external initializer's bytes read from beside the model, its file checked
    to be there, inside the model's folder, and long enough."""
    base = os.path.dirname(os.path.abspath(path))
    for t in external_data_helper._get_all_tensors(model):
        if not external_data_helper.uses_external_data(t):
            continue
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        where = os.path.normpath(os.path.join(base, location))
        if not location or os.path.isabs(location) or not where.startswith(base + os.sep):
            raise refused(
                path,
                "E4005",
                f"initializer {t.name!r} names external data {location!r} outside "
                "the model's folder",
            )
        if not os.path.isfile(where):
            raise refused(
                path,
                "E4005",
                f"initializer {t.name!r}: its external data file {location} is missing",
            )
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise refused(
                path, "E4005", f"initializer {t.name!r}: a malformed offset or length"
            ) from None
        size = os.path.getsize(where)
        if (
            offset < 0
            or offset > size
            or (length is not None and (length < 0 or offset + length > size))
        ):
            raise refused(
                path,
                "E4005",
                f"initializer {t.name!r}: its external data file {location} is "
                f"{size} bytes, shorter than the tensor it holds",
            )
        try:
            external_data_helper.load_external_data_for_tensor(t, base)
        except (OSError, ValueError, RuntimeError) as e:
            raise refused(path, "E4005", f"initializer {t.name!r}: {_reason(e)}") from None
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def _initializers(path: str, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    out = {}
    for t in model.graph.initializer:
        if kind_of(t.data_type) is None:
            raise refused(
                path,
                "E4004",
                f"initializer {t.name!r} is {type_name(t.data_type)}, a type presk cannot hold "
                "(reals, whole numbers and booleans)",
            )
        try:
            array = numpy_helper.to_array(t)
        except (ValueError, TypeError, RuntimeError) as e:
            raise refused(path, "E4001", f"initializer {t.name!r}: {_reason(e)}") from None
        if array.dtype.kind == "f" and array.dtype != np.float64:
            array = array.astype(np.float64) if array.dtype.itemsize < 4 else array
        out[t.name] = array
    return out


def _inputs(path: str, model: onnx.ModelProto, initialized: set[str]) -> list[Input]:
    inputs = []
    for v in model.graph.input:
        if v.name in initialized:  # an input with a default, as older exporters write weights
            continue
        t = v.type
        if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            raise refused(path, "E4003", f"input {v.name!r} has no tensor shape")
        kind = kind_of(t.tensor_type.elem_type)
        if kind is None:
            raise refused(
                path,
                "E4004",
                f"input {v.name!r} is {type_name(t.tensor_type.elem_type)}, a type "
                "presk cannot hold",
            )
        dims: list[int | str] = []
        for i, d in enumerate(t.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(d.dim_value)
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(d.dim_param)
            else:
                dims.append(f"{v.name}_{i}")
        inputs.append(Input(v.name, kind, t.tensor_type.elem_type, tuple(dims)))
    if not inputs:
        raise refused(path, "E4001", "the graph has no input")
    return inputs


def _bind(path: str, inputs: list[Input], dims: dict[str, int]) -> dict[str, int]:
    """Each dynamic size of the inputs, from `--dim`; one the flags leave unbound is
    E4003, as is a `--dim` that names none."""
    wanted = [d for i in inputs for d in i.dims if isinstance(d, str)]
    for name in dims:
        if name not in wanted:
            have = ", ".join(dict.fromkeys(wanted)) or "none"
            raise refused(
                path,
                "E4003",
                f"--dim {name}: the graph's inputs have no size {name} (theirs: {have})",
            )
    for i in inputs:
        for axis, d in enumerate(i.dims):
            if isinstance(d, str) and d not in dims:
                raise refused(
                    path,
                    "E4003",
                    f"input {i.name!r} has a dynamic size {d!r} (axis {axis}): bind it with "
                    f"--dim {d}=N",
                )
    return {d: dims[d] for d in dict.fromkeys(wanted)}


def identifier(text: str) -> str:
    """A PSK name made of `text`: what is not a letter, digit or `_` becomes `_`."""
    name = re.sub(r"\W", "_", text).strip("_") or "v"
    return name if not name[0].isdigit() else f"v{name}"
