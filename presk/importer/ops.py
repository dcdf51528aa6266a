"""The ONNX operators `presk import` translates, one function an operator: each takes the
translator, the node and its inputs (a `Live` value or a folded constant), and gives its
outputs. An operator missing here is refused (E4002) unless all its inputs are known,
in which case it was folded.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import onnx

from presk.importer.translate import (
    ATOM,
    PRODUCT,
    Atom,
    Live,
    Translator,
    Unsupported,
    Value,
    as_live,
    attr,
    compress,
    is_range,
    wrap,
)


def _int_list(v: Value | None, what: str) -> list[int] | None:
    if v is None:
        return None
    if isinstance(v, Live):
        raise Unsupported(f"its {what} depends on the inputs; presk folds only those it can know")
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _axis(axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise Unsupported(f"axis {axis} of a tensor of rank {rank}", "E4001")
    return a


# ---- elementwise ------------------------------------------------------------------------

UNARY = {"Sqrt": "sqrt", "Exp": "exp", "Log": "log", "Tanh": "tanh", "Erf": "erf", "Sin": "sin",
         "Cos": "cos", "Abs": "abs", "Relu": "relu"}  # fmt: skip


def unary(t: Translator, node, ins) -> list[Value]:
    return [t.call(UNARY[node.op_type], [as_live(t, ins[0])])]


def neg(t: Translator, node, ins) -> list[Value]:
    return [t.negate(as_live(t, ins[0]))]


def reciprocal(t: Translator, node, ins) -> list[Value]:
    return [t.binary("/", t.number(1), as_live(t, ins[0]))]


def sigmoid(t: Translator, node, ins) -> list[Value]:
    # 1 / (1 + e^−x): the logistic function as ONNX defines it
    x = as_live(t, ins[0])
    e = t.call("exp", [t.negate(x)])
    return [t.binary("/", t.number(1), t.binary("+", t.number(1), e))]


def gelu(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    if attr(node, "approximate", b"none") in (b"none", "none"):
        return [t.call("gelu", [x])]
    # x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))
    cube = t.binary("*", t.binary("*", x, x), x)
    inner = t.binary(
        "*",
        t.number(math.sqrt(2 / math.pi), np.float64),
        t.binary("+", x, t.binary("*", t.number(0.044715, np.float64), cube)),
    )
    half = t.binary("*", t.number(0.5), x)
    return [t.binary("*", half, t.binary("+", t.number(1), t.call("tanh", [inner])))]


# A bias at or below this is the graph's −∞: transformers add float's lowest
# (−3.4028235e38) to the scores a softmax must not weigh.
MINUS_INFINITY = -1e30


def masked_scores(t: Translator, node, ins) -> Live | None:
    """`scores + bias` read only by softmaxes along the last axis, the bias 0 where a
    causal mask allows and −∞ elsewhere: the scores, that mask attached. Each allowed
    weight is then exactly what the graph's softmax gives it, each refused one exactly 0
    (the graph's is e^(−3.4·10³⁸) of the others, which no float holds)."""
    readers = t.readers.get(node.output[0], [])
    if not readers or node.output[0] in t.graph.outputs:
        return None
    for r in readers:
        if r.op_type != "Softmax" or attr(r, "axis", -1) not in (-1, len(_shape(ins[0])) - 1):
            return None
    for x, bias in ((ins[0], ins[1]), (ins[1], ins[0])):
        if not isinstance(x, Live) or isinstance(bias, Live):
            continue
        bias = np.asarray(bias)
        allowed = bias == 0
        if bias.dtype.kind != "f" or not np.all(allowed | (bias <= MINUS_INFINITY)):
            continue
        if np.broadcast_shapes(x.shape, bias.shape) != x.shape or not np.all(allowed.any(axis=-1)):
            continue
        try:
            mask = t.constant(allowed)
        except Unsupported:
            continue
        return replace(x, mask=mask)
    return None


def arithmetic(t: Translator, node, ins) -> list[Value]:
    if node.op_type == "Add":
        scores = masked_scores(t, node, ins)
        if scores is not None:
            return [scores]
    op = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}[node.op_type]
    a, b = (as_live(t, v) for v in ins[:2])
    return [t.binary(op, a, b)]


def power(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    e = ins[1]
    if not isinstance(e, Live):
        core, _ = compress(np.asarray(e))
        if core.ndim == 0:
            k = float(core)
            if k == 1:
                return [x]
            if k == 2:
                return [t.binary("*", x, x)]
            if k == 3:
                return [t.binary("*", t.binary("*", x, x), x)]
            if k == 0.5:
                return [t.call("sqrt", [x])]
    return [t.call("pow", [x, as_live(t, e)])]


def extremum(t: Translator, node, ins) -> list[Value]:
    xs = [as_live(t, v) for v in ins if v is not None]
    fn = "max" if node.op_type == "Max" else "min"
    out = xs[0]
    for x in xs[1:]:
        out = t.call(fn, [out, x])
    return [out]


def where(t: Translator, node, ins) -> list[Value]:
    c, a, b = ins
    if not isinstance(c, Live):
        core, _ = compress(np.asarray(c, dtype=bool))
        if core.ndim == 0:  # one branch everywhere
            chosen = as_live(t, a if core else b)
            if list(chosen.shape) != list(np.broadcast_shapes(np.shape(c), _shape(a), _shape(b))):
                raise Unsupported("a Where whose one branch is smaller than its result")
            return [chosen]
    cond, x, y = as_live(t, c), as_live(t, a), as_live(t, b)
    return [
        t.elementwise(
            "where",
            [cond, x, y],
            lambda zs: (f"where({zs[0].expr}, {zs[1].expr}, {zs[2].expr})", ATOM),
        )
    ]


def _shape(v: Value) -> tuple[int, ...]:
    return v.shape if isinstance(v, Live) else np.shape(v)


def identity(t: Translator, node, ins) -> list[Value]:
    outs = [ins[0]]
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        raise Unsupported("a Dropout whose mask is read")
    return outs


def cast(t: Translator, node, ins) -> list[Value]:
    x = ins[0]
    to = attr(node, "to")
    target = (
        "real"
        if to
        in (
            onnx.TensorProto.FLOAT,
            onnx.TensorProto.DOUBLE,
            onnx.TensorProto.FLOAT16,
            onnx.TensorProto.BFLOAT16,
        )
        else "other"
    )
    if node.op_type == "CastLike":
        target = "real" if isinstance(ins[1], Live) and ins[1].type.kind == "real" else target
        if not isinstance(ins[1], Live) and np.asarray(ins[1]).dtype.kind == "f":
            target = "real"
    if x.type.kind == "real" and target == "real":
        return [x]
    if x.type.kind == "index" and target == "real":
        return [x]  # read as ℝ wherever a real is expected
    if x.type.kind == "bool" and target == "real":
        return [
            t.elementwise(
                "where",
                [x, t.number(1), t.number(0)],
                lambda zs: (f"where({zs[0].expr}, 1, 0)", ATOM),
            )
        ]
    if x.type.kind == "index" and to in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        return [x]
    raise Unsupported(
        f"a Cast of computed {x.type.kind} values to {onnx.TensorProto.DataType.Name(to).lower()}"
    )


# ---- contractions -----------------------------------------------------------------------


def matmul(t: Translator, a: Live, b: Live) -> Live:
    """ONNX MatMul: numpy's matmul, its batch axes broadcast."""
    drop_m, drop_n = len(a.groups) == 1, len(b.groups) == 1
    if drop_m:
        a = replace(a, groups=((),) + a.groups)
    if drop_n:
        b = replace(b, groups=b.groups + ((),))
    if a.shape[-1] != b.shape[-2]:
        raise Unsupported(f"MatMul of shapes {list(a.shape)} and {list(b.shape)}", "E4001")
    k_a, k_b = a.groups[-1], b.groups[-2]
    if [x.size for x in k_a] != [x.size for x in k_b] or any(x.id is None for x in k_a + k_b):
        a, b = t.merge(a, len(a.groups) - 1), t.merge(b, len(b.groups) - 2)
        k_a, k_b = a.groups[-1], b.groups[-2]
    if any(x.id is None for x in k_a + k_b):
        raise Unsupported("a MatMul over an axis one operand repeats")
    fast = dot(t, a, b)
    if fast is not None:
        out = fast
    else:
        out = einsum(t, a, b)
    if drop_n:
        out = replace(out, groups=out.groups[:-1])
    if drop_m:
        out = replace(out, groups=out.groups[:-2] + out.groups[-1:])
    return out


def dot(t: Translator, a: Live, b: Live) -> Live | None:
    """`a · b` when a's contracted axis is its last, b is [K, N…] with nothing else, and
    the result's names stay distinct."""
    if len(b.groups) != 2 or len(a.groups[-1]) != 1 or len(b.groups[-2]) != 1:
        return None
    k_a, k_b = a.groups[-1][0].id, b.groups[-2][0].id
    n_ids = [x.id for x in b.groups[-1]]
    if a.ids[-1] != k_a or list(b.ids) != [k_b, *n_ids] or None in n_ids:
        return None
    expr = f"{wrap(a, PRODUCT)} · {wrap(b, PRODUCT + 1)}"
    try:
        ty = t.apply("dot", [a, b], [], expr)
    except Unsupported:
        return None
    ids = a.ids[:-1] + b.ids[1:]
    groups = a.groups[:-1] + (b.groups[-1],)
    return Live(expr, PRODUCT, ty, ids, groups)


def einsum(t: Translator, a: Live, b: Live) -> Live:
    """MatMul as `ein`: batch atoms paired, the contracted ones summed, M and N kept."""
    r = max(len(a.groups), len(b.groups))
    ga = ((),) * (r - len(a.groups)) + a.groups
    gb = ((),) * (r - len(b.groups)) + b.groups
    roles: list[list[tuple[int, int]]] = []
    out: list[int] = []

    def kept(role, size) -> tuple[int | None, int]:
        if not role:
            return None, size
        roles.append(role)
        out.append(len(roles) - 1)
        return len(roles) - 1, size

    spec = []
    for sa, sb in zip(ga[:-2], gb[:-2], strict=True):
        if sa and sb and [x.size for x in sa] != [x.size for x in sb]:
            raise Unsupported("a MatMul whose batch axes are grouped differently")
        width = max(len(sa), len(sb))
        spec.append(
            [
                kept(
                    [
                        (n, s[k].id)
                        for n, s in ((0, sa), (1, sb))
                        if len(s) == width and s[k].id is not None
                    ],
                    max(s[k].size for s in (sa, sb) if len(s) == width),
                )
                for k in range(width)
            ]
        )
    spec.append([kept([(0, x.id)] if x.id is not None else [], x.size) for x in ga[-2]])
    for xa, xb in zip(ga[-1], gb[-2], strict=True):
        roles.append([(0, xa.id), (1, xb.id)])
    spec.append([kept([(1, x.id)] if x.id is not None else [], x.size) for x in gb[-1]])
    y, ids = t.ein([a, b], roles, out)
    new = dict(zip(out, ids, strict=True))
    groups = tuple(
        tuple(Atom(new[r], s) if r is not None else Atom(None, s) for r, s in g) for g in spec
    )
    return replace(y, groups=groups)


def matmul_op(t: Translator, node, ins) -> list[Value]:
    return [matmul(t, as_live(t, ins[0]), as_live(t, ins[1]))]


def transposed(x: Live, perm: list[int] | None = None) -> Live:
    perm = perm if perm is not None else list(range(len(x.groups)))[::-1]
    return replace(x, groups=tuple(x.groups[p] for p in perm))


def gemm(t: Translator, node, ins) -> list[Value]:
    a, b = as_live(t, ins[0]), as_live(t, ins[1])
    if attr(node, "transA", 0):
        a = transposed(a)
    if attr(node, "transB", 0):
        b = transposed(b)
    y = matmul(t, a, b)
    alpha, beta = attr(node, "alpha", 1.0), attr(node, "beta", 1.0)
    if alpha != 1.0:
        y = t.binary("*", t.number(alpha), y)
    if len(ins) > 2 and ins[2] is not None:
        c = as_live(t, ins[2])
        if beta != 1.0:
            c = t.binary("*", t.number(beta), c)
        y = t.binary("+", y, c)
    return [y]


# ---- reductions and rows ----------------------------------------------------------------


def reduce(t: Translator, x: Live, axes: list[int], keepdims: bool, how: str) -> Live:
    """mean, sum or max over ONNX axes: their PSK axes reduced, a repeat counted."""
    atoms = [a for j in axes for a in x.groups[j]]
    ids = [a.id for a in atoms if a.id is not None]
    repeat = math.prod(a.size for a in atoms if a.id is None)
    keep = [i for i in x.ids if i not in ids]
    groups = tuple(
        () if j in axes else g for j, g in enumerate(x.groups) if keepdims or j not in axes
    )
    if ids:
        refs = ", ".join(t.axis_ref(x, i) for i in ids)
        prim = {"mean": "mean", "sum": "sum", "max": "reduce_max"}[how]
        statics = [t.axis_static(x, i) for i in ids]
        expr = f"{how}[{refs}]({x.expr})"
        ty = t.apply(prim, [x], statics, expr)
        y = Live(expr, ATOM, ty, tuple(keep), groups)
    else:
        y = replace(x, groups=groups)
    if how == "sum" and repeat > 1:
        y = t.binary("*", y, t.number(repeat))
    return y


def reduce_op(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    rank = len(x.groups)
    axes = attr(node, "axes")
    if axes is None and len(ins) > 1:
        axes = _int_list(ins[1], "axes")
    if not axes:
        if attr(node, "noop_with_empty_axes", 0):
            return [x]
        axes = list(range(rank))
    axes = sorted({_axis(a, rank) for a in axes})
    keepdims = bool(attr(node, "keepdims", 1))
    how = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min"}[
        node.op_type
    ]
    if how == "min":
        return [t.negate(reduce(t, t.negate(x), axes, keepdims, "max"))]
    return [reduce(t, x, axes, keepdims, how)]


def softmax(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    j = _axis(attr(node, "axis", -1), len(x.groups))
    x = t.merge(x, j)
    if not x.groups[j]:
        raise Unsupported("a softmax over an axis of size 1")
    if x.mask is not None:
        return [masked_softmax(t, node, x, j)]
    i = x.groups[j][0].id
    expr = f"softmax[{t.axis_ref(x, i)}]({x.expr})"
    ty = t.apply("softmax", [x], [t.axis_static(x, i)], expr)
    y = replace(x, expr=expr, level=ATOM, type=ty)
    if node.op_type == "LogSoftmax":
        y = t.call("log", [y])
    return [y]


def masked_softmax(t: Translator, node, x: Live, j: int) -> Live:
    """`softmax[ax](x, mask)`: the mask renamed to x's axes as `where` would pair them."""
    paired: dict[str, Live] = {}

    def render(zs: list[Live]) -> tuple[str, int]:
        paired["mask"], paired["x"] = zs[0], zs[1]
        return f"where({zs[0].expr}, {zs[1].expr}, {zs[2].expr})", ATOM

    plain = replace(x, mask=None)
    y = t.elementwise("where", [x.mask, plain, plain], render, prefer=1)
    mask, scores = paired["mask"], paired["x"]
    i = y.groups[j][0].id
    expr = f"softmax[{t.axis_ref(y, i)}]({scores.expr}, {mask.expr})"
    ty = t.apply("softmax", [scores, mask], [t.axis_static(y, i)], expr)
    if ty != y.type:
        raise Unsupported("a masked softmax whose mask does not pair with its scores")
    return replace(y, expr=expr, level=ATOM, type=ty)


def layer_norm(t: Translator, node, ins) -> list[Value]:
    if any(o for o in node.output[1:]):
        raise Unsupported("a LayerNormalization whose mean or inverse deviation is read")
    x = as_live(t, ins[0])
    rank = len(x.groups)
    axes = list(range(_axis(attr(node, "axis", -1), rank), rank))
    eps = t.number(attr(node, "epsilon", 1e-5))
    hint = node.output[0]
    mu = t.bind(reduce(t, x, axes, True, "mean"), f"{hint}_mean", "LayerNormalization: the mean")
    c = t.bind(t.binary("-", x, mu), f"{hint}_centred", "LayerNormalization: centred")
    var = reduce(t, t.binary("*", c, c), axes, True, "mean")
    y = t.binary("/", c, t.call("sqrt", [t.binary("+", var, eps)]))
    y = t.binary("*", y, as_live(t, ins[1]))
    if len(ins) > 2 and ins[2] is not None:
        y = t.binary("+", y, as_live(t, ins[2]))
    return [y]


# ---- shapes -----------------------------------------------------------------------------


def transpose(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    perm = attr(node, "perm")
    if perm is not None and sorted(perm) != list(range(len(x.groups))):
        raise Unsupported(f"perm {list(perm)} of a tensor of rank {len(x.groups)}", "E4001")
    return [transposed(x, list(perm) if perm is not None else None)]


def unsqueeze(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    axes = attr(node, "axes")
    if axes is None:
        axes = _int_list(ins[1], "axes")
    rank = len(x.groups) + len(axes)
    at = sorted(_axis(a, rank) for a in axes)
    groups = list(x.groups)
    for a in at:
        groups.insert(a, ())
    return [replace(x, groups=tuple(groups))]


def squeeze(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    axes = attr(node, "axes")
    if axes is None and len(ins) > 1 and ins[1] is not None:
        axes = _int_list(ins[1], "axes")
    rank = len(x.groups)
    drop = {_axis(a, rank) for a in axes} if axes else {j for j, n in enumerate(x.shape) if n == 1}
    for j in drop:
        if x.shape[j] != 1:
            raise Unsupported(f"a Squeeze of axis {j}, of size {x.shape[j]}", "E4001")
        if x.groups[j]:
            raise Unsupported("a Squeeze of a size-1 axis PSK holds")
    return [replace(x, groups=tuple(g for j, g in enumerate(x.groups) if j not in drop))]


def reshape(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    if node.op_type == "Flatten":
        axis = _axis(attr(node, "axis", 1), len(x.groups) + 1)
        dims = [math.prod(x.shape[:axis]), math.prod(x.shape[axis:])]
    else:
        dims = _int_list(ins[1], "shape")
        allowzero = attr(node, "allowzero", 0)
        dims = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(dims)]
        if dims.count(-1) > 1:
            raise Unsupported("a Reshape with two inferred sizes", "E4001")
        total = math.prod(x.shape)
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            if known <= 0 or total % known:
                raise Unsupported(f"a Reshape of {list(x.shape)} to {dims}", "E4001")
            dims[dims.index(-1)] = total // known
        if math.prod(dims) != total or any(d < 0 for d in dims):
            raise Unsupported(f"a Reshape of {list(x.shape)} to {dims}", "E4001")
    flat = tuple(a for g in x.groups for a in g)
    return [t.carve(replace(x, groups=(flat,)), 0, dims)]


def expand(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    dims = _int_list(ins[1], "shape")
    try:
        shape = np.broadcast_shapes(x.shape, tuple(dims))
    except ValueError:
        raise Unsupported(f"an Expand of {list(x.shape)} to {dims}", "E4001") from None
    r = len(shape)
    groups = ((),) * (r - len(x.groups)) + x.groups
    out = []
    for g, n, have in zip(groups, shape, (1,) * (r - len(x.groups)) + x.shape, strict=True):
        out.append(g if have == n else ((Atom(None, n),) if n != 1 else ()))
    return [replace(x, groups=tuple(out))]


def concat(t: Translator, node, ins) -> list[Value]:
    pieces = [as_live(t, v) for v in ins]
    j = _axis(attr(node, "axis"), len(pieces[0].groups))
    sizes = {p.shape[j] for p in pieces}
    if len(sizes) != 1:
        raise Unsupported("a Concat of pieces of different lengths")
    out = None
    for k, p in enumerate(pieces):
        s = t.stack(t.merge(p, j), j, len(pieces), k)
        out = s if out is None else t.binary("+", out, s)
    return [out]


def split(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    j = _axis(attr(node, "axis", 0), len(x.groups))
    n = x.shape[j]
    sizes = (
        _int_list(ins[1], "split") if len(ins) > 1 and ins[1] is not None else attr(node, "split")
    )
    if sizes is None:
        parts = attr(node, "num_outputs", len(node.output))
        step = -(-n // parts)
        sizes = [min(step, n - i * step) for i in range(parts)]
    if sum(sizes) != n or len(sizes) != len(node.output):
        raise Unsupported(f"a Split of {n} into {list(sizes)}", "E4001")
    outs, start = [], 0
    for s in sizes:
        outs.append(t.select(x, j, start, s))
        start += s
    return outs


def slice_op(t: Translator, node, ins) -> list[Value]:
    x = as_live(t, ins[0])
    rank = len(x.groups)
    starts, ends = _int_list(ins[1], "starts"), _int_list(ins[2], "ends")
    axes = (
        _int_list(ins[3], "axes")
        if len(ins) > 3 and ins[3] is not None
        else list(range(len(starts)))
    )
    steps = _int_list(ins[4], "steps") if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        j = _axis(a, rank)
        n = x.shape[j]
        if st != 1:
            raise Unsupported(f"a Slice with step {st}")
        lo = max(0, min(n, s + n if s < 0 else s))
        hi = max(0, min(n, e + n if e < 0 else e))
        if hi <= lo:
            raise Unsupported("a Slice that is empty")
        x = t.select(x, j, lo, hi - lo)
    return [x]


def gather(t: Translator, node, ins) -> list[Value]:
    data, idx = ins
    x = as_live(t, data)
    j = _axis(attr(node, "axis", 0), len(x.groups))
    if isinstance(idx, Live):
        return [embed(t, x, j, idx)]
    idx = np.asarray(idx)
    idx = np.where(idx < 0, idx + x.shape[j], idx)
    core, kept = compress(idx)
    if core.ndim == 0:
        k = int(core)
        y = t.select(x, j, k, 1)
        groups = (
            y.groups[:j]
            + tuple((Atom(None, n),) if n != 1 else () for n in idx.shape)
            + y.groups[j + 1 :]
        )
        return [replace(y, groups=groups)]
    if core.ndim == 1 and is_range(core):
        pos = t.indices(len(core))
        positions = replace(
            pos,
            groups=tuple(
                pos.groups[0] if a in kept else ((Atom(None, n),) if n != 1 else ())
                for a, n in enumerate(idx.shape)
            ),
        )
        return [embed(t, x, j, positions)]
    raise Unsupported("a Gather of constant indices that are no single index or range")


def embed(t: Translator, table: Live, j: int, idx: Live) -> Live:
    """`embed(table, idx)`: the rows of `table` along its first axis."""
    if j != 0:
        raise Unsupported("a Gather along another axis than the first, by computed indices")
    table = t.merge(table, 0)
    if not table.groups[0] or table.ids[0] != table.groups[0][0].id:
        table = (
            t.moved(
                table,
                [table.groups[0][0].id] + [i for i in table.ids if i != table.groups[0][0].id],
            )
            if table.groups[0]
            else table
        )
    if idx.type.kind != "index":
        raise Unsupported("a Gather by indices that are not whole numbers")
    expr = f"embed({table.expr}, {idx.expr})"
    ty = t.apply("embed", [table, idx], [], expr)
    ids_rows = tuple(t.new_id() for _ in idx.ids)
    ids = ids_rows + table.ids[1:]
    new = dict(zip(idx.ids, ids_rows, strict=True))
    groups = Translator.regroup(idx.groups, new) + table.groups[1:]
    return Live(expr, ATOM, ty, ids, groups)


HANDLERS = {
    **dict.fromkeys(UNARY, unary),
    "Neg": neg,
    "Reciprocal": reciprocal,
    "Sigmoid": sigmoid,
    "Gelu": gelu,
    **dict.fromkeys(("Add", "Sub", "Mul", "Div"), arithmetic),
    "Pow": power,
    "Max": extremum,
    "Min": extremum,
    "Where": where,
    "Identity": identity,
    "Dropout": identity,
    "Cast": cast,
    "CastLike": cast,
    "MatMul": matmul_op,
    "Gemm": gemm,
    **dict.fromkeys(("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"), reduce_op),
    "Softmax": softmax,
    "LogSoftmax": softmax,
    "LayerNormalization": layer_norm,
    "Transpose": transpose,
    "Unsqueeze": unsqueeze,
    "Squeeze": squeeze,
    "Reshape": reshape,
    "Flatten": reshape,
    "Expand": expand,
    "Concat": concat,
    "Split": split,
    "Slice": slice_op,
    "Gather": gather,
}
