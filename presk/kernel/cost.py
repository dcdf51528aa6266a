"""The cost model `presk plan` picks contraction and softmax layouts with (docs/layouts.md).

It predicts a nest's time in cycles from what each point of the layout space makes the
machine do, counted from the nest's sizes:

- compute: one cycle a vector multiply and add (the two run on separate units);
- register loads: two a cycle from L1; an operand read across J that is not contiguous
  (and not packed) costs a cache line a load;
- registers: accumulators, the operand vectors of one k and a broadcast beyond the
  machine's vector registers spill, a load and a store each a k;
- cache traffic: the bytes the block loops read again, from L2 where what they sweep
  fits in it, else from memory; an unpacked b whose rows are more than 512 bytes apart
  costs a cache miss a k (measured: the prefetchers do not follow it), and a TLB walk
  where a row is wider than a page;
- a k-block's stores and loads of the accumulators; a pack's copy, which every worker
  of a split makes for itself; handing pieces to the workers.

A softmax nest (`Rows`) is priced by its calls to the C library's exp, one an element
and a pass in the three-pass form, one an element in the two-pass form, which pays
instead for a scratch row (allocated and freed a row) and a store an element.

The constants are this machine class's (x86-64, two loads and one vector multiply-add a
cycle); the model ranks points, and `presk bench --sweep` measures them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from presk.kernel.contraction import Layout, Nest
from presk.toolchain import default_threads, vector_bytes

LOAD = 0.5  # cycles a load from L1
L2_BYTE = 1 / 32  # cycles a byte from L2
DRAM_BYTE = 1 / 4  # cycles a byte from memory, one core
PAGE = 4096
TLB_WALK = 4.0  # cycles a k when each k's row of b is on another page
STRIDE = 512  # bytes between b's rows beyond which an unpacked read misses
STRIDED = 16.0  # cycles a k a tile reading such a b (measured at 1024³, docs/layouts.md)
SPLIT = 60_000.0  # cycles to hand a kernel to the workers and wait for them
EXP = 20.0  # cycles a call of the C library's exp, an element (kernels keep every call)
DIVIDE = 5.0  # cycles a vector division
SCRATCH = 60.0  # cycles to allocate and free a softmax's scratch row
GHZ = 2.5  # to show cycles as time


@dataclass(frozen=True)
class Target:
    vector_bytes: int
    cores: int
    registers: int = 16
    l1: int = 32 << 10
    l2: int = 512 << 10

    @staticmethod
    def host() -> Target:
        width = vector_bytes()
        return Target(width, default_threads(), registers=32 if width == 64 else 16)


@dataclass(frozen=True)
class Rows:
    """A softmax nest as the model sees it: the sizes of its parallel loops (the axes other
    than the row's, in order), the row's length, whether the row is the last axis (so the
    output pass runs in vector lanes) and whether a mask takes part."""

    lead: tuple[int, ...]
    n: int
    contiguous: bool
    masked: bool


def predict(nest: Nest | Rows, layout: Layout, element: int, target: Target) -> float:
    """The predicted cycles of one launch of `nest` at `layout`; `element` the bytes of
    the arithmetic type."""
    if isinstance(nest, Rows):
        return _softmax(nest, layout, element, target)
    lead = math.prod(nest.lead)
    if layout.form == "rowwise":
        body, traffic, pack = _rowwise(nest, layout, element, target)
    else:
        body, traffic, pack = _tiled(nest, layout, element, target)
    total = lead * (body + traffic)
    if layout.split is None:
        return total + lead * pack
    depth, workers = layout.split
    share = _share(_trips(nest, layout, depth), workers)
    # every worker packs for itself the panels above the split
    return total * share + lead * pack * (share if depth < len(nest.lead) else 1) + SPLIT


def _share(trips: int, workers: int) -> float:
    """The busiest worker's part of a loop of `trips` divided over `workers`."""
    return math.ceil(trips / workers) / trips


def _trips(nest: Nest, layout: Layout, depth: int) -> int:
    sizes = list(nest.lead)
    if layout.form == "rowwise":
        sizes.append(nest.i)
    else:
        m, n = layout.tile
        per = {"I": nest.i // m, "J": nest.j // n, "K": nest.k // (layout.kblock or 1)}
        sizes += [per[x] for x in layout.order]
    return sizes[depth]


def _rowwise(nest: Nest, layout: Layout, e: int, target: Target):
    i, j, k, w = nest.i, nest.j, nest.k, layout.lanes
    # a row's J/w vectors each k: load the partial sums and b, multiply, add, store
    body = i * k * math.ceil(j / w) * (1 + 3 * LOAD)
    b_bytes = k * j * e
    traffic = i * b_bytes * (L2_BYTE if b_bytes <= target.l2 else DRAM_BYTE)
    return body, traffic, 0.0


def _tiled(nest: Nest, layout: Layout, e: int, target: Target):
    i, j, k = nest.i, nest.j, nest.k
    m, n = layout.tile
    w = layout.lanes
    vn = math.ceil(n / w)
    tiles = (i // m) * (j // n)
    packed_a, packed_b = layout.pack == "ab", "b" in layout.pack
    a_i, a_j = nest.depends(nest.c.a, "i"), nest.depends(nest.c.a, "j")
    b_i, b_j = nest.depends(nest.c.b, "i"), nest.depends(nest.c.b, "j")
    a_loads = (m if a_i else 1) * (vn if a_j else 1)
    b_loads = (vn if b_j else 1) * (m if b_i else 1)
    load = (a_loads + b_loads) * LOAD
    if b_j and not packed_b and not nest.contiguous_j(nest.c.b):
        load += b_loads * (n / vn) * LOAD * 4  # a cache line an element
    regs = m * vn + (vn if b_j else 1) + 1
    load += max(0, regs - target.registers) * 2 * LOAD * 2
    per_k = max(m * vn, load)
    kb = layout.kblock or k
    if b_j and not packed_b:
        if j * e > STRIDE:  # each k's row of b lines apart: the prefetchers lose it
            per_k += STRIDED
        if j * e >= PAGE:
            per_k += TLB_WALK / m  # shared by the tile's rows
    body = tiles * k * per_k
    if layout.kblock:
        body += tiles * (k // kb) * m * vn * 2
    # what the block loops sweep again
    order = layout.order.replace("K", "")
    a_bytes, b_bytes = i * kb * e, kb * j * e
    if order == "IJ":  # for each row block, all of b's columns
        again = (i // m) * b_bytes * (k // kb) + i * k * e
    else:  # for each column block, all of a's rows
        again = (j // n) * a_bytes * (k // kb) + k * j * e
    swept = b_bytes if order == "IJ" else a_bytes
    traffic = again * (L2_BYTE if swept <= target.l2 else DRAM_BYTE)
    pack = (k * j if packed_b else 0) + (i * k if packed_a else 0)
    pack *= 1 + 2 * LOAD  # a load and a store an element
    return body, traffic, pack


def _softmax(rows: Rows, layout: Layout, e: int, target: Target) -> float:
    total = math.prod(rows.lead) * _softmax_row(rows, layout, e, target)
    if layout.split is None:
        return total
    depth, workers = layout.split
    return total * _share(rows.lead[depth], workers) + SPLIT


def _softmax_row(rows: Rows, layout: Layout, e: int, target: Target) -> float:
    """One row: its maximum, the sum of its exponentials, then the output divided in
    vectors; the three-pass form calls exp again for the output, the two-pass form keeps
    each exponential in its scratch row instead."""
    n = rows.n
    read = LOAD * (2 if rows.masked else 1)  # an element, and its mask's
    vectors = math.ceil(n / (target.vector_bytes // e if rows.contiguous else 1))
    total = n * (1 + read) + n * (EXP + read)  # the maximum, the sum
    if layout.form == "two-pass":
        return total + n * LOAD + vectors * (DIVIDE + 2 * LOAD) + SCRATCH
    return total + n * (EXP + read) + vectors * (DIVIDE + LOAD)


def milliseconds(cycles: float) -> float:
    return cycles / (GHZ * 1e6)
