"""Row kernels: a nest over every row of an operand along one axis, the other axes
parallel, and what softmax and cross_entropy compute in a row (its maximum, the sum of its
exponentials). softmax's nest lives here, not with its primitive, because the layout passes
(presk/kernel/relayout.py) build it again in another form."""

from __future__ import annotations

from presk.ir.types import TensorType
from presk.kernel.nests import accumulate, aligned_index, loops


def row_kernel(kb, x: TensorType, axis: int, body) -> None:
    """`body(o, at, n)` once a row of `x` (the first operand) along `axis`, the other
    axes parallel: `at(o, j)` is the index of the row's element j, n the row's length."""
    rest = [i for i in range(x.rank) if i != axis]

    def at(o, j):
        idx = [None] * x.rank
        for i, v in zip(rest, o, strict=True):
            idx[i] = v
        idx[axis] = j
        return idx

    with loops(kb, [x.axes[i].size for i in rest]) as o:
        body(o, at, x.axes[axis].size)


def row_max(kb, n, value, allowed=None):
    """The row's maximum: from its first element (or -inf with a mask, over the allowed
    positions), each larger element taking its place."""
    start = kb.const("-inf") if allowed else value(kb.index_const(0))

    def step(j, acc):
        v = value(j[0])
        take = kb.cmp("ogt", v, acc[0])
        if allowed:
            take = kb.both(allowed(j[0]), take)
        return [kb.select(take, v, acc[0])]

    return accumulate(kb, [n], [start], step)[0]


def kept_sum(kb, n, term):
    """A row's terms computed in a loop of their own into a scratch row (whose iterations
    run in vector lanes, presk's exp with them), then summed in increasing j: the scratch
    and the sum. The same bits as summing each term as it is computed."""
    kept = kb.scratch([n])
    with kb.loop(n) as j:
        kb.store(term(j), [j], kept)
    s = accumulate(kb, [n], [kb.const("0")], lambda j, acc: [kb.add(acc[0], kb.load(kept, j))])
    return kept, s[0]


def row_max_and_exp_sum(kb, n, value):
    """(m, exp(x − m) kept in a scratch row, Σ exp(x − m)) of a row, the sum in increasing
    j: what cross_entropy and its derivative share."""
    m = row_max(kb, n, value)
    kept, s = kept_sum(kb, n, lambda j: kb.call("exp", kb.sub(value(j), m)))
    return m, kept, s


def softmax_nest(kb, in_types: list[TensorType], axis: int, form: str) -> None:
    """softmax's nest in one of its forms, both exact: `three-pass` (the maximum, Σ exp(x −
    m), then exp(x − m) / s, the exponentials computed again) or `two-pass` (the maximum,
    then each exp(x − m) computed once into a scratch row, summed, and divided)."""
    masked = len(in_types) == 2
    mask_t = in_types[1] if masked else None

    def row(o, at, n):
        def value(j):
            return kb.load(0, at(o, j))

        def allowed(j):
            return kb.truthy(kb.load(1, aligned_index(mask_t, in_types[0], at(o, j))))

        m = row_max(kb, n, value, allowed if masked else None)

        def term(j):
            e = kb.call("exp", kb.sub(value(j), m))
            return kb.select(allowed(j), e, kb.const("0")) if masked else e

        if form == "two-pass":
            kept, s = kept_sum(kb, n, term)
            with kb.loop(n) as j:
                kb.store(kb.div(kb.load(kept, [j]), s), at(o, j))
            return
        s = accumulate(kb, [n], [kb.const("0")], lambda j, acc: [kb.add(acc[0], term(j[0]))])[0]
        with kb.loop(n) as j:
            kb.store(kb.div(term(j), s), at(o, j))

    row_kernel(kb, in_types[0], axis, row)
