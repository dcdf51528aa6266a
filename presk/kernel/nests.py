"""Loop-nest patterns the primitives' kernels are made of.

- `loops`: a perfect nest of parallel loops, one per axis.
- `accumulate`: a sum (or any scan) over several axes as nested sequential loops in
  row-major order, the running value carried in registers.
- `contraction`: Σ_k a·b over a flattened contracted index, in one of the default forms
  of the seed: row-wise (partial sums kept in the output), or tiled [1, n] (n accumulators
  over n contiguous output columns), [1, 1] being one accumulator an output element.
Every sum starts from 0 and adds its terms in increasing index order, so the forms give
the same bits.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from presk.ir.types import TensorType
from presk.kernel.builder import KernelBuilder
from presk.prims.base import alignment


@contextmanager
def loops(kb: KernelBuilder, sizes, parallel: bool = True):
    """Nested loops over `sizes`, yielding their indices outermost first."""
    with ExitStack() as stack:
        yield [stack.enter_context(kb.loop(n, parallel)) for n in sizes]


def accumulate(kb: KernelBuilder, sizes, inits, step):
    """Carried values through nested sequential loops over `sizes` (row-major):
    `step(indices, carried) -> new carried`."""
    if not sizes:
        return step([], inits)

    def level(depth, prefix, carried):
        if depth == len(sizes):
            return step(prefix, carried)
        return kb.reduce(sizes[depth], carried, lambda i, c: level(depth + 1, prefix + [i], c))

    return level(0, [], list(inits))


def aligned_index(t: TensorType, out: TensorType, out_idx):
    """The indices into a broadcast operand of type `t` for the output element `out_idx`."""
    m = alignment(t, out)
    picked = {src: out_idx[i] for i, src in enumerate(m) if src is not None}
    return [picked[j] for j in range(t.rank)]


@dataclass(frozen=True)
class Contraction:
    """out[o] = Σ_k a[ma(o, k)] · b[mb(o, k)]: each operand axis is ("o", i), an output
    axis, or ("k", j), a contracted axis; `ksizes` are the contracted axes' sizes."""

    a: tuple  # per axis of operand 0: ("o", i) or ("k", j)
    b: tuple
    ksizes: tuple[int, ...]

    def index(self, which: tuple, o, k):
        return [o[i] if src == "o" else k[i] for src, i in which]

    def reads_last(self, which: tuple, rank: int) -> bool:
        return ("o", rank - 1) in which


def contraction(kb: KernelBuilder, c: Contraction, out: TensorType, tile: int | None) -> None:
    """The nest of a contraction: `tile=None` row-wise, else tiled [1, tile]."""
    sizes = out.shape
    if tile is None:
        _rowwise(kb, c, sizes)
    else:
        _tiled(kb, c, sizes, tile)


def _rowwise(kb: KernelBuilder, c: Contraction, sizes) -> None:
    # for each row: zero it, then for each k add a[k]·b[k, j] into every output column
    zero = kb.const("0")
    with loops(kb, sizes[:-1]) as rows:
        with kb.loop(sizes[-1]) as j:
            kb.store(zero, rows + [j])

        def step(k, carried):
            a = kb.load(0, c.index(c.a, rows + [None], k))  # the same along the row
            with kb.loop(sizes[-1]) as j:
                o = rows + [j]
                b = kb.load(1, c.index(c.b, o, k))
                kb.store(kb.add(kb.load(-1, o), kb.mul(a, b)), o)
            return carried

        accumulate(kb, list(c.ksizes), [], step)


def _tiled(kb: KernelBuilder, c: Contraction, sizes, tile: int) -> None:
    # `tile` accumulators over `tile` contiguous output columns, held across the sum
    zero = kb.const("0")
    if not sizes:  # a scalar result: one accumulator

        def one(k, accs):
            return [
                kb.add(
                    accs[0],
                    kb.mul(kb.load(0, c.index(c.a, [], k)), kb.load(1, c.index(c.b, [], k))),
                )
            ]

        kb.store(accumulate(kb, list(c.ksizes), [zero], one)[0], [])
        return
    last = sizes[-1]
    with loops(kb, list(sizes[:-1]) + [last // tile]) as idx:
        rows, jb = idx[:-1], idx[-1]
        cols = [kb.iadd(kb.imul(jb, tile), t) for t in range(tile)]

        def step(k, accs):
            out = []
            for t, acc in enumerate(accs):
                o = rows + [cols[t]]
                a = kb.load(0, c.index(c.a, o, k))
                b = kb.load(1, c.index(c.b, o, k))
                out.append(kb.add(acc, kb.mul(a, b)))
            return out

        accs = accumulate(kb, list(c.ksizes), [zero] * tile, step)
        for t, acc in enumerate(accs):
            kb.store(acc, rows + [cols[t]])


def default_tile(c: Contraction, out: TensorType, machine: str, kind: str) -> int | None:
    """The seed's default form: a dot or matmul is tiled [1, 8] where its last output axis
    is a multiple of eight, row-wise otherwise (tiled [1, 1] in bf16, whose row-wise form
    would sum in bf16); an ein and the derivatives of a dot are tiled [1, 1]."""
    if not out.rank:
        return 1
    if kind in ("dot", "matmul"):
        if out.axes[-1].size % 8 == 0:
            return 8
        if machine == "bf16" or c.reads_last(c.a, out.rank):
            return 1
        return None
    return 1
