"""Row-wise primitives over one axis: `softmax`, `cross_entropy`, `sample`, and `embed`.

- `softmax[ax](x)` is exp(x − m) / Σ exp(x − m) along the axis, m the row's maximum;
  with a mask `softmax[ax](x, mask)` only the allowed positions take part (refused ones
  give 0), a mask that empties a row is an error at run time.
- `cross_entropy[ax](logits, targets)` is −log softmax(logits)[target] per row: the
  targets are an index tensor with the logits' axes but `ax`, and so is the result.
- `sample[ax](logits)` draws an index per row from softmax(logits), on the host, from the
  key of its site.
- `embed(table, tokens)` gathers rows of `table` ([V, …]) by the index tensor `tokens`:
  the result has the tokens' axes, then the table's axes after the first.
"""

from __future__ import annotations

import numpy as np
from mlir import ir

from presk.errors import RuntimeDataError
from presk.ir.types import Axis, TensorType
from presk.kernel.contraction import Layout
from presk.kernel.nests import loops
from presk.kernel.rows import row_kernel, row_max_and_exp_sum, softmax_nest
from presk.language import SIGNATURES
from presk.prims import balls, exact
from presk.prims.base import (
    Apply,
    Prim,
    TypingError,
    aligned,
    broadcast_fits,
    check_unique_names,
    one_axis,
    without,
)


def _softmax(types, attrs) -> TensorType:
    x = types[0]
    if not 0 <= attrs["axis"] < x.rank:
        raise TypingError(f"{x.text()} has no axis {attrs['axis']}")
    if len(types) == 2 and not broadcast_fits(x, types[1], x):
        raise TypingError(f"the mask {types[1].text()} does not fit {x.text()}")
    return x


def _cross_entropy(types, attrs) -> TensorType:
    logits, targets = types
    rows = without(logits, [attrs["axis"]])
    if targets.axes != rows.axes:
        raise TypingError(
            f"cross_entropy's targets must have the axes {rows.with_kind('index').text()}, "
            f"not {targets.text()}"
        )
    return rows


def _sample(types, attrs) -> TensorType:
    return without(types[0], [attrs["axis"]], kind="index")


def _embed(types, attrs) -> TensorType:
    table, tokens = types
    if table.rank == 0:
        raise TypingError(f"embed's table needs a first axis to gather along, not {table.text()}")
    return TensorType("real", check_unique_names(tokens.axes + table.axes[1:], "embed's result"))


# ---- the exact reference -------------------------------------------------------------


def _softmax_rows(y: np.ndarray, allowed: np.ndarray | None, num=exact) -> np.ndarray:
    """softmax along the last axis of `y`; refused positions (where `allowed` is False)
    take no part and give 0. `num`: the arithmetic, MPFR numbers or balls (which subtract
    a point near the maximum, `num.shift`: the exact softmax is the same)."""
    if allowed is None:
        m = num.shift(y)
        e = num.exp(y - m[..., None])
        return e / num.sequential_sum(e, [-1])[..., None]
    if not allowed.any(axis=-1).all():
        raise RuntimeDataError("the mask refuses every position of a softmax row", code="E8002")
    first = allowed.argmax(axis=-1)
    start = np.take_along_axis(y, first[..., None], axis=-1)
    filled = np.where(allowed, y, start)  # refused positions cannot raise the maximum
    m = np.broadcast_to(num.shift(filled)[..., None], y.shape)
    zero = num.number(0)
    e = np.full(y.shape, zero, dtype=object)  # exp and / only where allowed: half a causal row
    e[allowed] = num.exp(y[allowed] - m[allowed])
    s = np.broadcast_to(num.sequential_sum(e, [-1])[..., None], y.shape)
    out = np.full(y.shape, zero, dtype=object)
    out[allowed] = e[allowed] / s[allowed]
    return out


def _softmax_rule(num):
    def rule(ap: Apply, xs: list):
        axis = ap.attrs["axis"]
        y = np.moveaxis(xs[0], axis, -1)
        allowed = None
        if len(xs) == 2:
            mask = np.broadcast_to(aligned(xs[1], ap.in_types[1], ap.in_types[0]), xs[0].shape)
            allowed = np.moveaxis(mask, axis, -1)
        return np.moveaxis(_softmax_rows(y, allowed, num), -1, axis).copy()

    return rule


_largest = np.maximum.reduce  # `max` without ndarray.max's Python wrapper


def check_indices(ix: np.ndarray, bound: int, what: str) -> None:
    # int64 indices read as uint64 put every negative one past any bound: one reduction
    # where min and max took two (a tiny model's call checks its tokens and targets)
    wide = ix.view(np.uint64) if ix.dtype == np.int64 else ix
    if ix.size and (_largest(wide, None) >= bound or (wide is ix and ix.min() < 0)):
        bad = ix[(ix < 0) | (ix >= bound)].flat[0]
        raise RuntimeDataError(f"{what} {bad} is outside [0, {bound})", code="E8003")


def _cross_entropy_rule(num):
    # −log softmax(x)[t] = log Σ_j exp(x_j − m) − (x_t − m), m the row maximum (`num.shift`).
    def rule(ap: Apply, xs: list):
        y = np.moveaxis(xs[0], ap.attrs["axis"], -1)
        t = xs[1]
        check_indices(t, y.shape[-1], "target")
        m = num.shift(y)
        s = num.sequential_sum(num.exp(y - m[..., None]), [-1])
        xt = np.take_along_axis(y, t[..., None], axis=-1)[..., 0]
        return np.asarray(num.log(s) - (xt - m), dtype=object)

    return rule


def _sample_rule(num):
    def rule(ap: Apply, xs: list):
        p = _softmax_rows(np.moveaxis(xs[0], ap.attrs["axis"], -1), None, num)
        u = num.exact(ap.draw().random(p.shape[:-1]))
        acc = p[..., 0].copy()
        pick = np.full(u.shape, p.shape[-1] - 1, dtype=np.int64)
        chosen = np.zeros(u.shape, dtype=bool)
        for r in range(p.shape[-1]):
            if r:
                acc = acc + p[..., r]
            hit = (~chosen) & num.greater(acc, u, "sample's running sum")
            pick = np.where(hit, r, pick)
            chosen |= hit
        return pick

    return rule


def _embed_ref(ap: Apply, xs: list):
    table, tokens = xs
    check_indices(tokens, table.shape[0], "token")
    return np.take(table, tokens, axis=0)


# ---- derivatives -------------------------------------------------------------------------
# cross_entropy_vjp[ax](logits, targets, ct) = (softmax(logits) − onehot(targets)) · ct, the
# cotangent repeated along the axis; embed_vjp[rows](ct, tokens) adds each position's row
# of ct into row tokens[p] of a table of `rows` rows, positions in row-major order.


def _ce_vjp_type(types, attrs) -> TensorType:
    logits, targets, ct = types
    _cross_entropy([logits, targets], attrs)
    if ct.axes != targets.axes:
        raise TypingError(
            f"cross_entropy_vjp: the cotangent {ct.text()} does not fit {targets.text()}"
        )
    return logits


def _ce_vjp_rule(num):
    def rule(ap: Apply, xs: list):
        axis = ap.attrs["axis"]
        y = np.moveaxis(xs[0], axis, -1)
        t, ct = xs[1], xs[2]
        check_indices(t, y.shape[-1], "target")
        p = _softmax_rows(y, None, num)
        onehot = np.arange(y.shape[-1]) == t[..., None]
        d = np.where(onehot, p - 1, p)
        return np.moveaxis(d * ct[..., None], -1, axis).copy()

    return rule


def _embed_vjp_type(types, attrs) -> TensorType:
    ct, tokens = types
    if ct.axes[: tokens.rank] != tokens.axes:
        raise TypingError(f"embed_vjp: {ct.text()} does not start with the axes of {tokens.text()}")
    return TensorType("real", (Axis(None, attrs["rows"]),) + ct.axes[tokens.rank :])


def _embed_vjp_rule(num):
    def rule(ap: Apply, xs: list):
        ct, tokens = xs
        rows = ap.attrs["rows"]
        check_indices(tokens, rows, "token")
        out = np.full(ap.out_type.shape, num.number(0), dtype=object)
        flat_ct = ct.reshape((-1,) + ct.shape[tokens.ndim :])
        for p, tok in enumerate(tokens.reshape(-1)):
            out[tok] = out[tok] + flat_ct[p]
        return out

    return rule


def _softmax_vjp(e, ins, out, ct, need):
    # y · (ct − Σ_axis ct·y)
    axes = [e.attrs["axis"]]
    s = e.prim("sum", [e.prim("mul", [ct, out])], {"axes": axes})
    d = e.prim("mul", [out, e.prim("sub", [ct, e.prim("expand", [s, out], {"axes": axes})])])
    return [d if need[0] else None] + [None] * (len(ins) - 1)


def _ce_vjp(e, ins, out, ct, need):
    return [
        e.prim("cross_entropy_vjp", [ins[0], ins[1], ct], dict(e.attrs)) if need[0] else None,
        None,
    ]


def _embed_vjp(e, ins, out, ct, need):
    table = ins[0]
    d = e.prim("embed_vjp", [ct, ins[1]], {"rows": table.type.axes[0].size})
    return [e.conform(d, table) if need[0] else None, None]


# ---- kernels: one row at a time, the other axes parallel -----------------------------


def _softmax_kernel(kb, ap: Apply) -> None:
    layout = Layout(form="three-pass")
    with kb.ctx:  # what the layout passes need to build the nest again
        kb.func.attributes["psk_kernel.layout"] = layout.attr()
        kb.func.attributes["psk_kernel.rows"] = ir.Attribute.parse(
            f"{{axis = {ap.attrs['axis']} : i64}}"
        )
    softmax_nest(kb, ap.in_types, ap.attrs["axis"], layout.form)


def _cross_entropy_kernel(kb, ap: Apply) -> None:
    # log Σ exp(x − m) − (x_t − m)
    def row(rows, at, n):
        (o,) = rows
        value = lambda j: kb.load(0, at(o, j))  # noqa: E731
        m, _, s = row_max_and_exp_sum(kb, n, value)
        xt = value(kb.to_index(kb.load(1, o)))
        kb.store(kb.sub(kb.call("log", s), kb.sub(xt, m)), o)

    row_kernel(kb, ap.in_types[0], ap.attrs["axis"], row)


def _ce_vjp_kernel(kb, ap: Apply) -> None:
    # (exp(x − m) / s − [j = t]) · ct
    def row(rows, at, n):
        (o,) = rows
        value = lambda j: kb.load(0, at(o, j))  # noqa: E731
        m, kept, s = row_max_and_exp_sum(kb, n, value)
        t = kb.load(1, o)
        ct = kb.load(2, o)
        with kb.loop(n) as j:
            p = kb.div(kb.load(kept, [kb.index_const(0), j]), s)
            d = kb.select(kb.icmp("eq", kb.to_i64(j), t), kb.sub(p, kb.const("1")), p)
            kb.store(kb.mul(d, ct), at(o, j))

    row_kernel(kb, ap.in_types[0], ap.attrs["axis"], row)


def _embed_kernel(kb, ap: Apply) -> None:
    table, tokens = ap.in_types
    with loops(kb, tokens.shape) as p:
        row = kb.to_index(kb.load(1, p))
        with loops(kb, table.shape[1:]) as d:
            kb.store(kb.load(0, [row, *d]), p + d)


def _embed_vjp_kernel(kb, ap: Apply) -> None:
    # a scatter-add: positions in row-major order (sequential, as two may share a row)
    ct, tokens = ap.in_types
    rows = ap.out_type.shape
    with loops(kb, rows) as z:
        kb.store(kb.const("0"), z)
    with loops(kb, tokens.shape, parallel=False) as p:
        row = kb.to_index(kb.load(1, p))
        with loops(kb, rows[1:]) as d:
            dest = [row, *d]
            kb.store(kb.add(kb.load(-1, dest), kb.load(0, p + d)), dest)


def _no_vjp(e, ins, out, ct, need):
    return [None] * len(ins)


# Each but embed costs the row an output element reads. The gathers (embed by its tokens,
# cross_entropy and its adjoint by their targets) index by data.
PRIMS = [
    Prim(
        SIGNATURES["cross_entropy_vjp"],
        _ce_vjp_type,
        attr_kinds={"axis": "i64"},
        kinds=("real", "index", "real"),
        reference=_ce_vjp_rule(exact),
        ball=_ce_vjp_rule(balls),
        partial=True,  # a division by a row's sum, or its logarithm
        kernel=_ce_vjp_kernel,
        gathers=True,
        work="reads",
    ),
    Prim(
        SIGNATURES["embed_vjp"],
        _embed_vjp_type,
        attr_kinds={"rows": "i64"},
        kinds=("real", "index"),
        reference=_embed_vjp_rule(exact),
        ball=_embed_vjp_rule(balls),
        kernel=_embed_vjp_kernel,
        work="reads",
    ),
    Prim(
        SIGNATURES["softmax"],
        _softmax,
        bind=one_axis,
        attr_kinds={"axis": "i64"},
        kinds=("real", "bool"),
        reference=_softmax_rule(exact),
        ball=_softmax_rule(balls),
        partial=True,  # a division by a row's sum, or its logarithm
        vjp=_softmax_vjp,
        kernel=_softmax_kernel,
        work="reads",
    ),
    Prim(
        SIGNATURES["cross_entropy"],
        _cross_entropy,
        bind=one_axis,
        attr_kinds={"axis": "i64"},
        kinds=("real", "index"),
        reference=_cross_entropy_rule(exact),
        ball=_cross_entropy_rule(balls),
        partial=True,  # a division by a row's sum, or its logarithm
        vjp=_ce_vjp,
        kernel=_cross_entropy_kernel,
        gathers=True,
        work="reads",
    ),
    Prim(
        SIGNATURES["sample"],
        _sample,
        result="index",
        bind=one_axis,
        attr_kinds={"axis": "i64"},
        reference=_sample_rule(exact),
        ball=_sample_rule(balls),
        vjp=_no_vjp,
        draws="always",
        work="reads",
    ),
    Prim(
        SIGNATURES["embed"],
        _embed,
        kinds=("real", "index"),
        reference=_embed_ref,
        ball=_embed_ref,
        vjp=_embed_vjp,
        kernel=_embed_kernel,
        gathers=True,
    ),
]
