"""Primitives that move axes: heads, renames, broadcasting and its adjoint, masks.

- `split_heads[H](x)`: [..., S, D] → [..., heads: H, S, hd: D/H], element
  (…, h, s, e) being x[…, s, h·(D/H) + e]; `merge_heads(x)` is its inverse, ending in one
  positional axis of size H·hd.
- `rename[a → b, …](x)`: the same elements, axis a (a name or a position) now named b
  (`_` for positional).
- `broadcast_like(x, like)`: x repeated to like's axes; `sum_to(x, like)`: x summed
  down to like's axes (broadcasting's adjoint), in increasing index order.
- `causal_mask[i: n, j: n]`: the mask with mask[i, j] = (j ≤ i).
"""

from __future__ import annotations

import numpy as np

from presk.ir.types import Axis, TensorType
from presk.kernel.nests import accumulate, aligned_index, loops
from presk.language import SIGNATURES
from presk.prims import balls, exact
from presk.prims.base import (
    Apply,
    AxisSpec,
    Number,
    Prim,
    Rename,
    TypingError,
    aligned,
    alignment,
    axis_position,
    broadcast_fits,
    check_unique_names,
)


def _split_bind(prim, statics, types) -> dict:
    if len(statics) != 1 or not isinstance(statics[0], Number) or not statics[0].text.isdigit():
        raise TypingError("split_heads[H] takes the number of heads")
    return {"heads": int(statics[0].text)}


def _split(types, attrs) -> TensorType:
    x, h = types[0], attrs["heads"]
    if x.rank < 2:
        raise TypingError(f"split_heads needs [..., S, D], not {x.text()}")
    d = x.axes[-1].size
    if h <= 0:
        raise TypingError(f"split_heads[H] needs at least one head, not {h}")
    if d % h:
        raise TypingError(f"split_heads[{h}] needs a last axis divisible by {h}, not {d}")
    axes = x.axes[:-2] + (Axis("heads", h), x.axes[-2], Axis("hd", d // h))
    return TensorType("real", check_unique_names(axes, "split_heads's result"))


def _merge(types, attrs) -> TensorType:
    x = types[0]
    if x.rank < 3 or x.axes[-3].name != "heads" or x.axes[-1].name != "hd":
        raise TypingError(f"merge_heads needs [..., heads: H, S, hd: E], not {x.text()}")
    axes = x.axes[:-3] + (x.axes[-2], Axis(None, x.axes[-3].size * x.axes[-1].size))
    return TensorType("real", axes)


def _rename_bind(prim, statics, types) -> dict:
    x = types[0]
    names = list(x.names)
    for s in statics:
        if not isinstance(s, Rename):
            raise TypingError("rename[a → b, ...] takes renames")
        names[axis_position(x, s.src)] = s.dst
    return {"names": ["" if n is None else n for n in names]}


def _rename(types, attrs) -> TensorType:
    x, names = types[0], attrs["names"]
    if len(names) != x.rank:
        raise TypingError(f"rename gives {len(names)} names to {x.text()}")
    axes = tuple(Axis(n or None, a.size) for n, a in zip(names, x.axes, strict=True))
    return x.with_axes(check_unique_names(axes, "rename's result"))


def _broadcast_like(types, attrs) -> TensorType:
    x, like = types
    if not broadcast_fits(x, like, like):
        raise TypingError(f"{x.text()} does not broadcast to {like.text()}")
    return TensorType("real", like.axes)


def _sum_to(types, attrs) -> TensorType:
    x, like = types
    if not broadcast_fits(like, x, x):
        raise TypingError(f"{x.text()} does not sum down to {like.text()}")
    return TensorType("real", like.axes)


def _mask_bind(prim, statics, types) -> dict:
    if len(statics) != 2 or not all(isinstance(s, AxisSpec) for s in statics):
        raise TypingError("causal_mask[i: n, j: n] takes two named axes with their sizes")
    (a, b) = statics
    if a.name == b.name:
        raise TypingError("causal_mask's two axes need different names")
    return {"names": [a.name, b.name], "sizes": [a.size, b.size]}


def _mask(types, attrs) -> TensorType:
    axes = tuple(Axis(n, s) for n, s in zip(attrs["names"], attrs["sizes"], strict=True))
    return TensorType("bool", axes)


# ---- the exact reference (data movement, and sum_to's sums in index order) -------------


def _split_ref(ap: Apply, xs: list):
    x, h = xs[0], ap.attrs["heads"]
    y = x.reshape(x.shape[:-1] + (h, x.shape[-1] // h))  # [..., S, H, hd]
    return np.swapaxes(y, -3, -2).copy()


def _merge_ref(ap: Apply, xs: list):
    y = np.swapaxes(xs[0], -3, -2)  # [..., S, H, hd]
    return y.reshape(ap.out_type.shape).copy()


def _broadcast_like_ref(ap: Apply, xs: list):
    return np.broadcast_to(aligned(xs[0], ap.in_types[0], ap.out_type), ap.out_type.shape).copy()


def _sum_to_rule(num):
    def rule(ap: Apply, xs: list):
        x, t, like = xs[0], ap.in_types[0], ap.out_type
        m = alignment(like, t)  # for each axis of x, the axis of `like` it becomes
        summed = [i for i, j in enumerate(m) if j is None]
        kept = [j for j in m if j is not None]
        y = num.sequential_sum(x, summed) if summed else x
        return np.asarray(np.transpose(y, np.argsort(kept)), dtype=object).copy()

    return rule


def _mask_ref(ap: Apply, xs: list):
    n, m = ap.attrs["sizes"]
    return np.arange(m)[None, :] <= np.arange(n)[:, None]


# ---- expand: the adjoint of a reduction ----------------------------------------------
# expand[axes](x, like): x repeated along the axes of `like` at positions `axes`, which x
# lacks (x's axes are like's without them).


def _expand(types, attrs) -> TensorType:
    x, like = types
    drop = set(attrs["axes"])
    rest = tuple(a for i, a in enumerate(like.axes) if i not in drop)
    if rest != x.axes:
        raise TypingError(f"expand: {x.text()} is not {like.text()} without axes {sorted(drop)}")
    return TensorType("real", like.axes)


def _expand_ref(ap: Apply, xs: list):
    return np.broadcast_to(np.expand_dims(xs[0], tuple(ap.attrs["axes"])), ap.out_type.shape).copy()


# ---- adjoints ---------------------------------------------------------------------------


def _split_vjp(e, ins, out, ct, need):
    return [e.conform(e.prim("merge_heads", [ct]), ins[0]) if need[0] else None]


def _merge_vjp(e, ins, out, ct, need):
    heads = ins[0].type.axes[-3].size
    return [e.conform(e.prim("split_heads", [ct], {"heads": heads}), ins[0]) if need[0] else None]


def _rename_vjp(e, ins, out, ct, need):
    return [e.conform(ct, ins[0]) if need[0] else None]


def _broadcast_like_vjp(e, ins, out, ct, need):
    return [e.unbroadcast(ct, ins[0]) if need[0] else None, None]


def _sum_to_vjp(e, ins, out, ct, need):
    return [e.prim("broadcast_like", [ct, ins[0]]) if need[0] else None, None]


def _expand_vjp(e, ins, out, ct, need):
    return [e.prim("sum", [ct], {"axes": list(e.attrs["axes"])}) if need[0] else None, None]


# ---- kernels: data movement, and sum_to's sums ---------------------------------------


def _split_kernel(kb, ap: Apply) -> None:
    # out[..., h, s, e] = x[..., s, h·hd + e]
    out = ap.out_type
    hd = out.axes[-1].size
    with loops(kb, out.shape) as o:
        *lead, h, s, e = o
        kb.store(kb.load(0, [*lead, s, kb.iadd(kb.imul(h, hd), e)]), o)


def _merge_kernel(kb, ap: Apply) -> None:
    # out[..., s, h·hd + e] = x[..., h, s, e]
    x = ap.in_types[0]
    hd = x.axes[-1].size
    with loops(kb, x.shape) as i:
        *lead, h, s, e = i
        kb.store(kb.load(0, i), [*lead, s, kb.iadd(kb.imul(h, hd), e)])


def _broadcast_kernel(kb, ap: Apply) -> None:
    with loops(kb, ap.out_type.shape) as o:
        kb.store(kb.load(0, aligned_index(ap.in_types[0], ap.out_type, o)), o)


def _expand_kernel(kb, ap: Apply) -> None:
    drop = set(ap.attrs["axes"])
    with loops(kb, ap.out_type.shape) as o:
        kb.store(kb.load(0, [v for i, v in enumerate(o) if i not in drop]), o)


# The most elements of an output row `_sum_leading` sums at a time, in a scratch row: 1 KB
# of f32, in L1 beside the rows of x streaming past.
SUM_BLOCK = 256


def _sum_to_kernel(kb, ap: Apply) -> None:
    # each output element sums the axes of x it lacks, row-major in x's order
    x, like = ap.in_types[0], ap.out_type
    m = alignment(like, x)
    summed = [i for i, j in enumerate(m) if j is None]
    lead = len(summed)
    if 0 < lead < x.rank and summed == list(range(lead)) and m[lead:] == tuple(range(like.rank)):
        _sum_leading(kb, x, like, lead)
        return
    with loops(kb, like.shape) as o:

        def step(r, acc):
            idx, it = [], iter(r)
            for j in m:
                idx.append(o[j] if j is not None else next(it))
            return [kb.add(acc[0], kb.load(0, idx))]

        total = accumulate(kb, [x.axes[i].size for i in summed], [kb.const("0")], step)[0]
        kb.store(total, o)


def _sum_leading(kb, x: TensorType, like: TensorType, lead: int) -> None:
    """`sum_to` over x's `lead` leading axes (a bias's or a LayerNorm's gradient, summed
    over the batch and the sequence). Summing an output element at a time reads x down a
    column, an element a cache line; here a block of an output row is a scratch row of
    sums, to which each row of x is added in turn, in x's order, in lanes. Each element's
    sum is the same chain (0, then x's terms in row-major order), so the same bits."""
    *keep, n = like.shape
    block = max(d for d in range(1, min(n, SUM_BLOCK) + 1) if n % d == 0)
    with loops(kb, [*keep, n // block]) as o:
        *k, b = o
        sums = kb.scratch([block])
        with kb.loop(block) as j:
            kb.store(kb.const("0"), [j], sums)
        with loops(kb, x.shape[:lead], parallel=False) as r:
            with kb.loop(block) as j:
                column = kb.iadd(kb.imul(b, block), j)
                kb.store(kb.add(kb.load(sums, [j]), kb.load(0, [*r, *k, column])), [j], sums)
        with kb.loop(block) as j:
            kb.store(kb.load(sums, [j]), [*k, kb.iadd(kb.imul(b, block), j)])


def _mask_kernel(kb, ap: Apply) -> None:
    with loops(kb, ap.out_type.shape) as (i, j):
        kb.store(kb.mask_value(kb.icmp("sle", j, i)), [i, j])


def _flat(e, ins, out, ct, need):
    return [None] * len(ins)


PRIMS = [
    Prim(
        SIGNATURES["split_heads"],
        _split,
        bind=_split_bind,
        attr_kinds={"heads": "i64"},
        reference=_split_ref,
        ball=_split_ref,
        vjp=_split_vjp,
        kernel=_split_kernel,
    ),
    Prim(
        SIGNATURES["merge_heads"],
        _merge,
        reference=_merge_ref,
        ball=_merge_ref,
        vjp=_merge_vjp,
        kernel=_merge_kernel,
    ),
    # a rename moves no element: the host relabels the buffer
    Prim(
        SIGNATURES["rename"],
        _rename,
        bind=_rename_bind,
        attr_kinds={"names": "strs"},
        kinds=("any",),
        result="any",
        reference=lambda ap, xs: xs[0],
        ball=lambda ap, xs: xs[0],
        vjp=_rename_vjp,
    ),
    Prim(
        SIGNATURES["broadcast_like"],
        _broadcast_like,
        kinds=("real", "any"),
        reference=_broadcast_like_ref,
        ball=_broadcast_like_ref,
        vjp=_broadcast_like_vjp,
        kernel=_broadcast_kernel,
    ),
    Prim(
        SIGNATURES["sum_to"],
        _sum_to,
        kinds=("real", "any"),
        reference=_sum_to_rule(exact),
        ball=_sum_to_rule(balls),
        vjp=_sum_to_vjp,
        kernel=_sum_to_kernel,
        work="reads",
        sums=1,
    ),
    Prim(
        SIGNATURES["expand"],
        _expand,
        attr_kinds={"axes": "i64s"},
        kinds=("real", "any"),
        reference=_expand_ref,
        ball=_expand_ref,
        vjp=_expand_vjp,
        kernel=_expand_kernel,
    ),
    Prim(
        SIGNATURES["causal_mask"],
        _mask,
        result="bool",
        bind=_mask_bind,
        attr_kinds={"names": "strs", "sizes": "i64s"},
        reference=_mask_ref,
        ball=_mask_ref,
        vjp=_flat,
        kernel=_mask_kernel,
    ),
]
