"""Loop-nest patterns the primitives' kernels are made of.

- `loops`: a perfect nest of parallel loops, one per axis; `grouped_loops`, the same with
  the last stepping over several outputs an iteration.
- `accumulate`: a sum (or any scan) over several axes as nested sequential loops in
  row-major order, the running value carried in registers.
- `Contraction`: what Σ_k a·b reads, which presk/kernel/contraction.py builds at any
  point of its layout space.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from presk.ir.types import TensorType, alignment
from presk.kernel.builder import KernelBuilder


@contextmanager
def loops(kb: KernelBuilder, sizes, parallel: bool = True):
    """Nested loops over `sizes`, yielding their indices outermost first."""
    with ExitStack() as stack:
        yield [stack.enter_context(kb.loop(n, parallel)) for n in sizes]


# Outputs a reduction's nest computes together: their chains of dependent operations (each
# output's own, an element at a time in order) interleave, where one output's would leave
# the core waiting on each step. Each output's operations are the same, so are its bits.
TOGETHER = 4


@contextmanager
def grouped_loops(kb: KernelBuilder, sizes, together: int = TOGETHER):
    """Parallel loops over `sizes`, the last stepped by `together` where its size is a
    multiple of it (else by 1): yields the index lists of the outputs an iteration covers."""
    r = together if sizes and sizes[-1] % together == 0 else 1
    with loops(kb, [*sizes[:-1], sizes[-1] // r] if sizes else []) as o:
        yield [o] if r == 1 else [[*o[:-1], kb.iadd(kb.imul(o[-1], r), q)] for q in range(r)]


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
