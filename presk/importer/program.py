"""An ONNX graph imported: the PSK program printed, its weights by parameter path, and
both written into one folder that appears whole or not at all.

The program is one module whose parameters are the graph's real initializers (named
after them, the ONNX name in a comment and in the weights file's metadata) and whose
one function, the entry, computes the graph's outputs from its inputs, a `let` per value
with the ONNX op it came from. Its dims are the graph's dynamic sizes, declared with the
values they were bound to, since the shape arithmetic was folded at those values.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np
import onnx
import safetensors.numpy

from presk.errors import GraphError, UsageError
from presk.fileio import check_writable, write_atomic
from presk.importer import ops
from presk.importer.graph import Graph, identifier
from presk.importer.names import PROGRAM, WEIGHTS, metadata
from presk.importer.translate import Live, Names, Translator, Unsupported, fold_node, is_live


@dataclass
class Imported:
    source: str  # model.psk
    weights: dict[str, np.ndarray]  # by parameter path
    onnx_names: dict[str, str]  # parameter path -> the initializer it holds
    module: str
    entry: str  # the function's name in the module
    signature: str  # `(x : …) -> …`
    dims: dict[str, int]  # each PSK dim and the value it was imported at
    loss: str | None  # the loss function's name, if one was asked for


def translate(graph: Graph, module: str, entry: str, loss: bool = False) -> Imported:
    """The program and weights of `graph` at its bound sizes, with a `loss` function
    when `loss` (next-token cross-entropy); a node presk cannot take is refused, naming
    it and its op (E4002, E4006)."""
    names = Names()
    dim_names = {d: names.fresh(d) for d in graph.sizes}
    module_name = names.fresh(module)
    entry_name = names.fresh(entry)
    loss_name = names.fresh("loss") if loss else None
    t = Translator(graph, dim_names, names)
    bounds = _token_bounds(graph)
    arguments, argument_lives = [], []
    for i in graph.inputs:
        psk = names.fresh(i.name)
        live = t.input_value(i.name, i.kind, i.dims, psk)
        argument_lives.append(live)
        arguments.append((psk, _type_text(live, dim_names.values(), bounds.get(i.name))))
    for node in _needed(graph):
        ins = [t.get(n) if n else None for n in node.input] if _known(t, node) else None
        try:
            if ins is None:
                raise Unsupported(f"reads {_unknown(t, node)!r}, which no node makes", "E4001")
            outs = _node(t, node, ins)
        except Unsupported as e:
            where = node.name or node.output[0]
            raise GraphError(
                f"{graph.path}: node {where!r} ({node.op_type}): {e}", code=e.code
            ) from None
        for name, v in zip(node.output, outs, strict=False):
            if name:
                comment = f"{node.op_type} ({node.name})" if node.name else node.op_type
                t.values[name] = t.bind(v, name, comment) if is_live(v) else v
    results, types, finished = [], [], []
    declared = {o.name: o for o in graph.model.graph.output}
    for name in graph.outputs:
        v = t.values.get(name)
        if not is_live(v):
            raise GraphError(f"{graph.path}: output {name!r} depends on no input", code="E4006")
        axis_names = _output_names(declared[name], v, dim_names)
        try:
            y = t.finish(v, axis_names)
        except Unsupported as e:
            raise GraphError(f"{graph.path}: output {name!r}: {e}", code=e.code) from None
        results.append(y.expr)
        types.append(_type_text(y, dim_names.values(), None))
        finished.append(y)
    result = results[0] if len(results) == 1 else f"({', '.join(results)})"
    result_type = types[0] if len(types) == 1 else f"({', '.join(types)})"
    signature = f"({', '.join(f'{n} : {ty}' for n, ty in arguments)}) -> {result_type}"
    weights = {p.name: _stored(p.array) for p in t.params.values()}
    extra = []
    if loss_name:
        extra = _loss(graph, entry_name, loss_name, names, argument_lives, arguments, finished)
    source = _print(graph, module_name, entry_name, signature, t, result, dim_names, extra)
    dims = {dim_names[d]: n for d, n in graph.sizes.items()}
    onnx_names = {p.name: p.onnx_name for p in t.params.values()}
    return Imported(
        source, weights, onnx_names, module_name, entry_name, signature, dims, loss_name
    )


def _loss(graph, entry, loss, names, inputs: list[Live], arguments, outputs: list[Live]):
    """`loss(tokens, targets)`: the mean cross-entropy of the entry's logits against the
    targets, as corpus/nlp/05_gpt.psk has it; for a graph from tokens [B, T] to logits
    [B, T, V] only (E0001 otherwise)."""
    fits = (
        len(inputs) == 1
        and inputs[0].type.kind == "index"
        and inputs[0].type.rank == 2
        and len(outputs) == 1
        and outputs[0].type.rank == 3
        and outputs[0].type.axes[:2] == inputs[0].type.axes
        and outputs[0].type.axes[2].name is None
    )
    if not fits:
        raise UsageError(
            f"--loss next-token: {graph.path} is not a language model's graph, from tokens "
            "[B, T] to logits [B, T, V]"
        )
    tokens, token_type = arguments[0]
    targets = names.fresh("targets")
    target_type = f"nat{{{outputs[0].type.axes[2].size}}}{token_type[token_type.index('[') :]}"
    return [
        "  # The mean cross-entropy of the logits against the next tokens (`--loss next-token`),",
        "  # what `presk train` trains.",
        f"  fn {loss}({tokens} : {token_type}, {targets} : {target_type}) -> ℝ {{",
        f"    mean(cross_entropy[-1]({entry}({tokens}), {targets}))",
        "  }",
    ]


def _node(t: Translator, node: onnx.NodeProto, ins) -> list:
    if node.op_type in ("Shape", "Size") and ins and is_live(ins[0]):
        shape = np.array(ins[0].shape, dtype=np.int64)
        if node.op_type == "Size":
            return [np.array(math.prod(ins[0].shape), dtype=np.int64)]
        rank = len(shape)
        start, end = ops.attr(node, "start", 0), ops.attr(node, "end", rank)
        start, end = (max(0, min(rank, a + rank if a < 0 else a)) for a in (start, end))
        return [shape[start:end]]
    if not any(is_live(v) for v in ins):
        return fold_node(t, node, ins)
    handler = ops.HANDLERS.get(node.op_type)
    if handler is None:
        raise Unsupported(
            f"presk imports no {node.op_type} (docs/import.md lists what it does)", "E4002"
        )
    try:
        outs = handler(t, node, ins)
    except (IndexError, ValueError, KeyError, ZeroDivisionError) as e:
        # operands the checker let through (it infers no shape of a computed size) that
        # do not fit the op: a rank or size it cannot take
        raise Unsupported(f"inputs that do not fit it ({type(e).__name__}: {e})", "E4001") from None
    if len(outs) < len([o for o in node.output if o]):
        raise Unsupported(f"{node.op_type} with {len(node.output)} outputs")
    return outs


def _known(t: Translator, node: onnx.NodeProto) -> bool:
    return _unknown(t, node) is None


def _unknown(t: Translator, node: onnx.NodeProto) -> str | None:
    for n in node.input:
        if n and n not in t.values and n not in t.graph.initializers:
            return n
    return None


def _needed(graph: Graph) -> list[onnx.NodeProto]:
    """The nodes an output depends on, in the graph's order (which the checker has
    found topological)."""
    makers = {o: node for node in graph.nodes for o in node.output if o}
    want = set(graph.outputs)
    needed = set()
    stack = list(want)
    while stack:
        node = makers.get(stack.pop())
        if node is None or id(node) in needed:
            continue
        needed.add(id(node))
        stack.extend(n for n in node.input if n)
    return [n for n in graph.nodes if id(n) in needed]


def _token_bounds(graph: Graph) -> dict[str, int]:
    """For an index input whose values (reshaped, perhaps) choose rows of a table, the
    table's rows: its values' bound (`nat{V}`)."""
    source = {i.name: i.name for i in graph.inputs}
    for node in graph.nodes:  # values that are an input's, rearranged
        if node.op_type in RESHAPING and node.input and node.input[0] in source:
            for o in node.output:
                source[o] = source[node.input[0]]
    bounds: dict[str, int] = {}
    for node in graph.nodes:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[1] in source:
            table = graph.initializers.get(node.input[0])
            axis = ops.attr(node, "axis", 0)
            if table is not None and table.ndim and -table.ndim <= axis < table.ndim:
                name, rows = source[node.input[1]], table.shape[axis]
                bounds[name] = min(rows, bounds.get(name, rows))
    return bounds


RESHAPING = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Transpose", "Expand"}


def _output_names(value: onnx.ValueInfoProto, y: Live, dims: dict[str, str]) -> list[str | None]:
    """Each output axis's name: the dim its declared dim_param is, else none."""
    shape = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
    out = []
    for j in range(len(y.groups)):
        d = shape[j] if j < len(shape) else None
        out.append(dims.get(d.dim_param) if d is not None and d.HasField("dim_param") else None)
    return out


def _type_text(y: Live, dims, bound: int | None) -> str:
    """A PSK type as source: a dim written alone names its axis."""
    kind = {"real": "ℝ", "index": "nat", "bool": "bool"}[y.type.kind]
    if bound is not None and kind == "nat":
        kind = f"nat{{{bound}}}"
    axes = []
    for a in y.type.axes:
        if a.name in dims:
            axes.append(a.name)
        elif a.name:
            axes.append(f"{a.name}: {a.size}")
        else:
            axes.append(str(a.size))
    return f"{kind}[{', '.join(axes)}]" if axes else kind


def _stored(array: np.ndarray) -> np.ndarray:
    """A weight as the file keeps it: float32 and float64 as they are, narrower floats
    widened to float32 (exactly)."""
    if array.dtype in (np.float32, np.float64):
        return np.ascontiguousarray(array)
    return np.ascontiguousarray(array.astype(np.float32))


def _initializer(array: np.ndarray) -> str:
    """A parameter's initializer for training from scratch: the imported weights' scale."""
    if not array.size or np.all(array == 0):
        return "zeros"
    if np.all(array == 1):
        return "ones"
    rms = float(np.sqrt(np.mean(np.square(array.astype(np.float64)))))
    return f"normal(scale = {float(f'{rms:.2g}')!r})" if math.isfinite(rms) and rms > 0 else "zeros"


def _print(graph, module, entry, signature, t: Translator, result: str, dims, extra) -> str:
    at = ", ".join(f"{d}={n}" for d, n in graph.sizes.items())
    lines = [
        f"# Imported by `presk import` from {os.path.basename(graph.path)} (opset {graph.opset})"
        + (f" at {at}." if at else "."),
    ]
    if at:
        lines.append(
            "# The graph's shape arithmetic is folded at these sizes: import again for others."
        )
    lines += [
        f"# The weights are {WEIGHTS} beside this file (`--weights`); each parameter's",
        "# comment names the ONNX initializer it holds.",
        "",
    ]
    if dims:
        lines.append("dim " + ", ".join(f"{dims[d]} = {n}" for d, n in graph.sizes.items()))
        lines.append("")
    lines.append(f"module {module} {{")
    for p in t.params.values():
        shape = ", ".join(str(n) for n in p.array.shape)
        decl = f"  param {p.name} : ℝ[{shape}] = {_initializer(p.array)}"
        lines.append(f"{decl}  # {p.onnx_name}")
    lines.append("")
    lines.append(f"  fn {entry}{signature} {{")
    lines.extend(f"    {line}" for line in t.lines)
    lines.append(f"    {result}")
    lines.append("  }")
    if extra:
        lines.append("")
        lines.extend(extra)
    lines.append("}")
    return "\n".join(lines) + "\n"


def encode_weights(imported: Imported) -> bytes:
    meta = {"format": "presk.params", **metadata(imported.onnx_names)}
    return safetensors.numpy.save(imported.weights, metadata=meta)


def write(folder: str, imported: Imported) -> None:
    """model.psk and params.safetensors in `folder`: written into a new folder beside it
    and renamed into place when `folder` does not exist; else each file replaced
    atomically. Nothing is written before both are ready."""
    weights = encode_weights(imported)
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise UsageError(f"cannot write {folder}: it is not a directory", code="E0003")
    if os.path.isdir(folder):
        for name in (PROGRAM, WEIGHTS):
            check_writable(os.path.join(folder, name))
        write_atomic(os.path.join(folder, WEIGHTS), weights)
        write_atomic(os.path.join(folder, PROGRAM), imported.source)
        return
    parent = os.path.dirname(os.path.abspath(folder))
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(folder)}.", suffix=".tmp")
    except OSError as e:
        raise UsageError(f"cannot write {folder}: {e.strerror or e}", code="E0003") from None
    try:
        write_atomic(os.path.join(tmp, WEIGHTS), weights)
        write_atomic(os.path.join(tmp, PROGRAM), imported.source)
        os.chmod(tmp, 0o777 & ~_umask())
        os.rename(tmp, folder)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UsageError(f"cannot write {folder}: {e.strerror or e}", code="E0003") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def module_name(path: str) -> str:
    return identifier(os.path.splitext(os.path.basename(path))[0])
