"""Row kernels: a nest over every row of an operand along one axis, the other axes
parallel, and what softmax and cross_entropy compute in a row (its maximum, the sum of its
exponentials). softmax's nest lives here, not with its primitive, because the layout passes
(presk/kernel/relayout.py) build it again in another form."""

from __future__ import annotations

from presk.ir.types import TensorType
from presk.kernel.loops import ANY_ORDER
from presk.kernel.nests import TOGETHER, accumulate, aligned_index, grouped_loops


def row_kernel(kb, x: TensorType, axis: int, body, together: int = 1) -> None:
    """`body(rows, at, n)` for each `together` rows of `x` (the first operand) along `axis`,
    the other axes parallel (`grouped_loops`): `rows` are the rows' indices over the other
    axes, `at(o, j)` the index of row o's element j, n the row's length."""
    rest = [i for i in range(x.rank) if i != axis]

    def at(o, j):
        idx = [None] * x.rank
        for i, v in zip(rest, o, strict=True):
            idx[i] = v
        idx[axis] = j
        return idx

    with grouped_loops(kb, [x.axes[i].size for i in rest], together) as rows:
        body(rows, at, x.axes[axis].size)


def row_maxes(kb, n, values, allowed=None):
    """Each row's maximum (`values[q](j)` its element j): from its first element (or -inf
    with a mask, over the positions `allowed[q]` allows), each larger element taking its
    place; a NaN never does, so a maximum is NaN only where the row's first element is.

    Its loop is marked `ANY_ORDER`: the kernels built on these maxima read each only
    through x − m, and its value does not depend on the order the elements are taken in,
    only the sign of a zero maximum may, which x − m does not show to what reads it
    (exp(±0) = 1; x − (±0) = x for x ≠ 0; and where x − m is a zero whose sign it
    flips, log Σ − (x_t − m) adds it to a log Σ ≥ +0). So psk-vectorize takes it in
    lanes, each lane from the same start."""
    starts = [kb.const("-inf") if allowed else value(kb.index_const(0)) for value in values]

    def step(j, acc):
        out = []
        for q, value in enumerate(values):
            v = value(j)
            take = kb.cmp("ogt", v, acc[q])
            if allowed:
                take = kb.both(allowed[q](j), take)
            out.append(kb.select(take, v, acc[q]))
        return out

    return kb.reduce(n, starts, step, mark=ANY_ORDER)


def kept_sums(kb, n, terms):
    """Each row's terms (`terms[q](j)`) computed in a loop of their own into a scratch row
    (whose iterations run in vector lanes, presk's exp with them), then summed in
    increasing j: the scratch, [rows, n], and the sums. The same bits as summing each
    term as it is computed."""
    kept = kb.scratch([len(terms), n])
    with kb.loop(n) as j:
        for q, term in enumerate(terms):
            kb.store(term(j), [kb.index_const(q), j], kept)

    def step(j, acc):
        return [kb.add(a, kb.load(kept, [kb.index_const(q), j[0]])) for q, a in enumerate(acc)]

    return kept, accumulate(kb, [n], [kb.const("0")] * len(terms), step)


def row_max_and_exp_sum(kb, n, value):
    """(m, exp(x − m) kept in a scratch row [1, n], Σ exp(x − m)) of a row, the sum in
    increasing j: what cross_entropy and its derivative share."""
    (m,) = row_maxes(kb, n, [value])
    kept, (s,) = kept_sums(kb, n, [lambda j: kb.call("exp", kb.sub(value(j), m))])
    return m, kept, s


def softmax_nest(kb, in_types: list[TensorType], axis: int, form: str) -> None:
    """softmax's nest in one of its forms, both exact: `three-pass` (the maximum, Σ exp(x −
    m), then exp(x − m) / s, the exponentials computed again) or `two-pass` (the maximum,
    then each exp(x − m) computed once into a scratch row, summed, and divided); TOGETHER
    rows at a time."""
    masked = len(in_types) == 2
    mask_t = in_types[1] if masked else None

    def rows(os, at, n):
        def value(o):
            return lambda j: kb.load(0, at(o, j))

        def allowed(o):
            return lambda j: kb.truthy(kb.load(1, aligned_index(mask_t, in_types[0], at(o, j))))

        values = [value(o) for o in os]
        allows = [allowed(o) for o in os] if masked else None
        ms = row_maxes(kb, n, values, allows)

        def term(q):
            def t(j):
                e = kb.call("exp", kb.sub(values[q](j), ms[q]))
                return kb.select(allows[q](j), e, kb.const("0")) if masked else e

            return t

        terms = [term(q) for q in range(len(os))]
        if form == "two-pass":
            kept, sums = kept_sums(kb, n, terms)
            with kb.loop(n) as j:
                for q, o in enumerate(os):
                    kb.store(kb.div(kb.load(kept, [kb.index_const(q), j]), sums[q]), at(o, j))
            return
        sums = accumulate(
            kb,
            [n],
            [kb.const("0")] * len(os),
            lambda j, acc: [kb.add(a, terms[q](j[0])) for q, a in enumerate(acc)],
        )
        with kb.loop(n) as j:
            for q, o in enumerate(os):
                kb.store(kb.div(terms[q](j), sums[q]), at(o, j))

    row_kernel(kb, in_types[0], axis, rows, TOGETHER)
