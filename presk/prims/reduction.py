"""Reductions over axes: `sum`, `mean`, `max` (as `reduce_max`) and `argmax`.

`sum[ax…](x)` adds over the named or numbered axes, term by term in increasing index
order; without brackets it adds over every axis to a scalar. `mean` divides the sum by
the count. `max[ax…](x)` is the largest element; `argmax[ax](x)` the index of the last of
equal maxima, an index tensor.
"""

from __future__ import annotations

import math

import numpy as np

from presk.ir.types import TensorType
from presk.kernel.nests import accumulate, grouped_loops, loops
from presk.language import SIGNATURES
from presk.prims import balls, exact
from presk.prims.base import Apply, Prim, TypingError, axis_position, one_axis, without


def _bind_axes(prim, statics, types) -> dict:
    t = types[0]
    if not statics:
        return {"axes": list(range(t.rank))}
    positions = []
    for s in statics:
        if not isinstance(s, (str, int)):
            raise TypingError(f"{prim.name}[...] takes axes, by name or by position")
        p = axis_position(t, s)
        if p in positions:
            raise TypingError(f"{prim.name} names axis {s} twice")
        positions.append(p)
    return {"axes": sorted(positions)}


def _reduce(types, attrs) -> TensorType:
    t = types[0]
    for p in attrs["axes"]:
        if not 0 <= p < t.rank:
            raise TypingError(f"{t.text()} has no axis {p}")
    return without(t, attrs["axes"])


def _argmax(types, attrs) -> TensorType:
    return without(types[0], [attrs["axis"]], kind="index")


# ---- the exact reference -------------------------------------------------------------


def _rows(x: np.ndarray, axes) -> np.ndarray:
    """`x` with the reduced axes flattened into a last axis, row-major in their order."""
    keep = [i for i in range(x.ndim) if i not in axes]
    y = np.transpose(x, keep + sorted(axes))
    return y.reshape(y.shape[: len(keep)] + (-1,))


def _sum(num):
    def rule(ap: Apply, xs: list):
        return np.asarray(num.sequential_sum(xs[0], ap.attrs["axes"]), dtype=object)

    return rule


def _mean(num):
    def rule(ap: Apply, xs: list):
        count = int(np.prod([xs[0].shape[a] for a in ap.attrs["axes"]]))
        return np.asarray(
            num.sequential_sum(xs[0], ap.attrs["axes"]) / num.number(count), dtype=object
        )

    return rule


def row_argmax(y: np.ndarray) -> np.ndarray:
    """The index of the last of equal maxima along the last axis."""
    best = y[..., 0].copy()
    idx = np.zeros(best.shape, dtype=np.int64)
    for r in range(1, y.shape[-1]):
        take = (y[..., r] >= best).astype(bool)
        best = np.where(take, y[..., r], best)
        idx = np.where(take, r, idx)
    return idx


def _max(num):
    def rule(ap: Apply, xs: list):
        return np.asarray(num.row_max(_rows(xs[0], ap.attrs["axes"])), dtype=object)

    return rule


def _argmax_ref(ap: Apply, xs: list):
    return row_argmax(np.moveaxis(xs[0], ap.attrs["axis"], -1))


def _argmax_ball(ap: Apply, xs: list):
    return balls.row_argmax(np.moveaxis(xs[0], ap.attrs["axis"], -1))


def _max_vjp_type(types, attrs) -> TensorType:
    x, ct = types
    if len(attrs["axes"]) != 1:
        raise TypingError("the derivative of max is taken over one axis")
    if without(x, attrs["axes"]) != ct:
        raise TypingError(f"reduce_max_vjp: {ct.text()} is not {x.text()} without its reduced axis")
    return x


def _max_vjp_ref(ap: Apply, xs: list):
    x, ct = xs
    axis = ap.attrs["axes"][0]
    idx = row_argmax(np.moveaxis(x, axis, -1))
    out = np.full(np.moveaxis(x, axis, -1).shape, exact.mpfr(0), dtype=object)
    np.put_along_axis(out, idx[..., None], ct[..., None], axis=-1)
    return np.moveaxis(out, -1, axis).copy()


def _max_vjp_ball(ap: Apply, xs: list):
    # Where a row's maximum is uncertain, each element that could be it gets the union of
    # the cotangent and 0: the exact gradient is one of those.
    x, ct = xs
    axis = ap.attrs["axes"][0]
    rows = np.moveaxis(x, axis, -1)
    last, unsure, can = balls.last_maxima(rows)
    either = np.frompyfunc(lambda c: c.union(balls.ZERO), 1, 1)(ct)
    out = np.where(can & unsure[..., None], np.asarray(either, dtype=object)[..., None], balls.ZERO)
    hit = np.arange(rows.shape[-1]) == last[..., None]
    out = np.where(hit & ~unsure[..., None], ct[..., None], out)
    return np.moveaxis(np.asarray(out, dtype=object), -1, axis).copy()


# ---- adjoints ---------------------------------------------------------------------------


def _sum_vjp(e, ins, out, ct, need):
    return [e.prim("expand", [ct, ins[0]], {"axes": list(e.attrs["axes"])}) if need[0] else None]


def _mean_vjp(e, ins, out, ct, need):
    count = 1
    for a in e.attrs["axes"]:
        count *= ins[0].type.axes[a].size
    scaled = e.prim("div", [ct, e.const(str(count))])
    return [
        e.prim("expand", [scaled, ins[0]], {"axes": list(e.attrs["axes"])}) if need[0] else None
    ]


def _max_vjp(e, ins, out, ct, need):
    # the whole cotangent goes to the last of equal maxima, the element max read
    return [
        e.prim("reduce_max_vjp", [ins[0], ct], {"axes": list(e.attrs["axes"])}) if need[0] else None
    ]


# ---- kernels ----------------------------------------------------------------------------


def _full_index(rank: int, kept: list[int], out_idx, red: list[int], red_idx):
    idx = [None] * rank
    for i, v in zip(kept, out_idx, strict=True):
        idx[i] = v
    for i, v in zip(red, red_idx, strict=True):
        idx[i] = v
    return idx


def _reduce_kernel(kind: str):
    """Each output's terms in increasing index order, `TOGETHER` outputs an iteration
    (`grouped_loops`), their chains interleaved."""

    def lower(kb, ap: Apply) -> None:
        x = ap.in_types[0]
        red = sorted(ap.attrs["axes"])
        kept = [i for i in range(x.rank) if i not in red]
        sizes = [x.axes[i].size for i in red]
        with grouped_loops(kb, [x.axes[i].size for i in kept]) as outs:

            def load(o, r):
                return kb.load(0, _full_index(x.rank, kept, o, red, r))

            if kind == "max":  # the first element, then every larger one
                firsts = [load(o, [kb.index_const(0)] * len(red)) for o in outs]

                def larger(r, acc):
                    vs = [load(o, r) for o in outs]
                    return [
                        kb.select(kb.cmp("ogt", v, a), v, a) for v, a in zip(vs, acc, strict=True)
                    ]

                values = accumulate(kb, sizes, firsts, larger)
            else:

                def added(r, acc):
                    return [kb.add(a, load(o, r)) for o, a in zip(outs, acc, strict=True)]

                values = accumulate(kb, sizes, [kb.const("0")] * len(outs), added)
                if kind == "mean":
                    count = kb.const(str(math.prod(sizes)))
                    values = [kb.div(v, count) for v in values]
            for o, v in zip(outs, values, strict=True):
                kb.store(v, o)

    return lower


def last_argmax(kb, n: int, load):
    """(the row maximum, the index of its last occurrence as i64) over 0..n."""
    first = load(kb.index_const(0))

    def step(r, carried):
        best, at = carried
        v = load(r)
        take = kb.cmp("oge", v, best)
        return [kb.select(take, v, best), kb.select(take, kb.to_i64(r), at)]

    return accumulate(kb, [n], [first, kb.i64(0)], lambda r, c: step(r[0], c))


def _row_axes(x, axis: int):
    return [i for i in range(x.rank) if i != axis]


def _with(o, rest: list[int], axis: int, j):
    idx = [None] * (len(rest) + 1)
    for i, v in zip(rest, o, strict=True):
        idx[i] = v
    idx[axis] = j
    return idx


def _argmax_kernel(kb, ap: Apply) -> None:
    x, axis = ap.in_types[0], ap.attrs["axis"]
    rest = _row_axes(x, axis)
    with loops(kb, [x.axes[i].size for i in rest]) as o:
        _, at = last_argmax(kb, x.axes[axis].size, lambda j: kb.load(0, _with(o, rest, axis, j)))
        kb.store(at, o)


def _max_vjp_kernel(kb, ap: Apply) -> None:
    x, axis = ap.in_types[0], ap.attrs["axes"][0]
    rest = _row_axes(x, axis)
    with loops(kb, [x.axes[i].size for i in rest]) as o:
        _, at = last_argmax(kb, x.axes[axis].size, lambda j: kb.load(0, _with(o, rest, axis, j)))
        ct = kb.load(1, o)
        with kb.loop(x.axes[axis].size) as j:
            hit = kb.icmp("eq", kb.to_i64(j), at)
            kb.store(kb.select(hit, ct, kb.const("0")), _with(o, rest, axis, j))


def _no_vjp(e, ins, out, ct, need):
    return [None] * len(ins)


_AXES = {"axes": "i64s"}
# Each costs the operand elements an output element reads; sum and mean sum over them.
PRIMS = [
    Prim(
        SIGNATURES["sum"],
        _reduce,
        bind=_bind_axes,
        attr_kinds=_AXES,
        reference=_sum(exact),
        ball=_sum(balls),
        vjp=_sum_vjp,
        kernel=_reduce_kernel("sum"),
        work="reads",
        sums=1,
    ),
    Prim(
        SIGNATURES["mean"],
        _reduce,
        bind=_bind_axes,
        attr_kinds=_AXES,
        reference=_mean(exact),
        ball=_mean(balls),
        vjp=_mean_vjp,
        kernel=_reduce_kernel("mean"),
        work="reads",
        sums=1,
    ),
    Prim(
        SIGNATURES["reduce_max"],
        _reduce,
        bind=_bind_axes,
        attr_kinds=_AXES,
        reference=_max(exact),
        ball=_max(balls),
        vjp=_max_vjp,
        kernel=_reduce_kernel("max"),
        work="reads",
    ),
    Prim(
        SIGNATURES["reduce_max_vjp"],
        _max_vjp_type,
        attr_kinds=_AXES,
        reference=_max_vjp_ref,
        ball=_max_vjp_ball,
        kernel=_max_vjp_kernel,
        work="reads",
    ),
    Prim(
        SIGNATURES["argmax"],
        _argmax,
        result="index",
        bind=one_axis,
        attr_kinds={"axis": "i64"},
        reference=_argmax_ref,
        ball=_argmax_ball,
        vjp=_no_vjp,
        kernel=_argmax_kernel,
        work="reads",
    ),
]
