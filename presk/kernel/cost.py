"""The cost model `presk plan` picks contraction and softmax layouts with (docs/layouts.md).

It predicts a nest's time in cycles from what each point of the layout space makes the
machine do, counted from the nest's sizes. A tile's k costs the longest of what overlaps:

- compute: one cycle a vector multiply and add; on znver4 an operand broadcast to more
  than one vector of the tile is one more operation for them (a broadcast used once is
  folded into the multiply's load);
- the chain of adds on each accumulator (its latency, with few accumulators);
- register loads: two of up to 32 bytes a cycle from L1; an operand read across J that is
  not contiguous (and not packed) costs a cache line a load; accumulators, one k's
  operand vectors and a broadcast beyond the machine's vector registers spill, a load and
  a store each a k;
- streams: each operand is read again at the innermost loop around the tile it does not
  move with, from the cache that holds what that loop's body touches (its reuse
  distance): L1, L2, the last level or memory, each at its bandwidth;
- an unpacked b whose rows are more than 512 bytes apart (the prefetchers lose it): on
  znver1 (AVX2) a miss a k on top and a page walk where a row is wider than a page; on
  znver4 a miss a k only where a tile sweeps more rows than L2 keeps at their stride, a
  shorter wait where a is read a row a k as well, both hidden behind the multiply-adds as
  far as they last, and a page walk a line of a row wider than a page on top.

To the tiles' time it adds a k-block's stores and loads of the accumulators; a pack's
copy (in vectors where the operand's elements are consecutive along the panel's), which
every worker of a split makes for itself (of b only its own panels, where the split is
over J's blocks); and handing pieces to the workers.

A softmax nest (`Rows`) is priced by its exponentials: one an element and a pass in the
three-pass form, one an element in the two-pass form, which pays instead for a scratch
row (allocated and freed a row), a store and a load an element. An exp in the sum's loop
runs an element at a time; one in a loop of its own (the two-pass form's, the output's)
runs in f64 vector lanes if it is presk's own and the row is contiguous, else it is a
call of the C library's an element.

The constants are x86-64's, measured on znver1 (AVX2), znver4 and Intel's emeraldrapids
(AVX-512); what differs between them is the `Target`'s (its vector width, registers,
caches, whether it hides a strided b's misses, what a broadcast and an accumulator's chain
cost), chosen by the vector width and the core's name. The model ranks points, and
`presk bench --sweep` and bench/nests.py measure them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from presk.kernel.contraction import Layout, Nest
from presk.toolchain import default_threads, host_cpu, vector_bytes

LOAD = 0.5  # cycles a load from L1 of up to 32 bytes (two a cycle); a 64-byte one takes two
ADD_LATENCY = 3.0  # cycles from a vector add to the next add on its accumulator
FMA_LATENCY = 4.0  # the same for a fused multiply-add (a realization's "contract": "fma")
INTEL_CHAIN = 10.0  # the same as Intel's AVX-512 cores' kernels see it (fitted, bench/nests.py)
INTEL_A_ROWS = 12.0  # cycles a k for a transposed a on them (Target.a_rows, fitted likewise)
L2_BYTE = 1 / 32  # cycles a byte from L2
L3_BYTE = 1 / 16  # cycles a byte from the last level, one core
DRAM_BYTE = 1 / 4  # cycles a byte from memory, one core
LINE = 64  # bytes a cache line
PAGE = 4096
TLB_WALK = 4.0  # cycles a k when each k's row of b is on another page
STRIDE = 512  # bytes between b's rows beyond which an unpacked read misses
STRIDED = 16.0  # cycles a k a tile reading such a b (measured at 1024³, docs/layouts.md)
ROW = 5.0  # cycles a k waits for such a row that L2 holds, read beside another (znver4)
SPLIT = 60_000.0  # cycles to hand a kernel to the workers and wait for them
EXP = 20.0  # cycles an exp an element: the C library's call, or presk's own not in lanes
PRESK_EXP = 22.0  # cycles presk's own exp on a vector of f64 lanes (45 operations, 2 a cycle)
DIVIDE = 5.0  # cycles a vector division
SCRATCH = 60.0  # cycles to allocate and free a softmax's scratch row
GHZ = 2.5  # to show cycles as time
# The cores the constants were measured on, by LLVM's name, with their vector width
FITTED = {"znver1": 32, "znver4": 64, "znver5": 64, "emeraldrapids": 64}


def fitted(cpu: str, width: int) -> bool:
    """Whether the model was fitted on the core LLVM calls `cpu`, at `width`-byte vectors:
    on another it prices the nearest it knows (`Target.for_machine`)."""
    return FITTED.get(cpu) == width


@dataclass(frozen=True)
class Target:
    vector_bytes: int
    cores: int
    registers: int = 16
    l1: int = 32 << 10  # a core's data cache, bytes
    l2: int = 512 << 10  # a core's second level
    l3: int = 8 << 20  # the shared last level
    l2_ways: int = 8  # L2's associativity: lines a stride of a power of two can keep
    # whether the core hides a strided b's misses behind the multiply-adds (measured on
    # znver4, with AVX-512), or pays them on top (znver1, AVX2)
    hides_misses: bool = False
    # cycles from a vector add to the next add on its accumulator, and from a fused
    # multiply-add to the next, as the kernels' loops see them
    add_latency: float = ADD_LATENCY
    fma_latency: float = FMA_LATENCY
    # whether an operand broadcast to more than one vector of a tile costs a vector
    # operation (znver4) or only its load (Intel's AVX-512 cores)
    broadcast_op: bool = False
    l3_byte: float = L3_BYTE
    # cycles a k waits, on top of the multiply-adds, for an unpacked a read a row a k (a
    # transposed operand, a weight gradient's activations) whose rows lie more than
    # STRIDE apart: on Intel's AVX-512 cores such a tile of the course GPT's weight
    # gradient ran at 0.56 of the rate of its twin packing a (bench/nests.py, K = 4096)
    a_rows: float = 0.0
    # vector multiplies (and as many adds) issued a cycle, and the bytes a load moves at
    # its rate of two a cycle: on znver4 a 64-byte operation runs as two halves, on
    # znver5 whole
    multiplies: float = 1.0
    load_bytes: int = 32

    @staticmethod
    def for_machine(width: int, cores: int, cpu: str) -> Target:
        """A machine with `width`-byte vectors and LLVM's CPU name `cpu`, as the model knows
        it: AVX-512 on AMD (`znver4`, `znver5`) as measured on znver4, 32 registers and
        1 MiB of L2; AVX-512 on another core as measured on Intel's `emeraldrapids`, where
        a broadcast is only its load, an accumulator's chain needs more vectors in flight
        (bench/nests.py: four accumulators ran at half the rate of sixteen) and the last
        level is further; narrower vectors as znver1 (AVX2). The name, not this machine's
        caches, decides, so that a pipeline naming both chooses alike anywhere."""
        if width != 64:
            return Target(width, cores)
        if cpu.startswith("znver"):
            # znver4 runs a 64-byte operation as two 32-byte halves; znver5 runs it whole,
            # two multiplies and two adds a cycle (bench/nests.py: with znver4's model the
            # picks' four accumulators ran the GPTs' products 1.01-1.53x slower, in turns)
            whole = cpu != "znver4"
            return Target(
                width,
                cores,
                32,
                l2=1 << 20,
                l3=32 << 20,
                hides_misses=True,
                broadcast_op=True,
                multiplies=2.0 if whole else 1.0,
                load_bytes=64 if whole else 32,
            )
        return Target(
            width,
            cores,
            32,
            l1=48 << 10,
            l2=2 << 20,
            l3=256 << 20,
            hides_misses=True,
            add_latency=INTEL_CHAIN,
            fma_latency=INTEL_CHAIN,
            l3_byte=L3_BYTE * 2,
            a_rows=INTEL_A_ROWS,
        )

    @staticmethod
    def host() -> Target:
        return Target.for_machine(vector_bytes(), default_threads(), host_cpu()[0])


@dataclass(frozen=True)
class Rows:
    """A softmax nest as the model sees it: the sizes of its parallel loops (the axes other
    than the row's, in order), the row's length, whether the row is the last axis (so the
    output pass runs in vector lanes) and whether a mask takes part."""

    lead: tuple[int, ...]
    n: int
    contiguous: bool
    masked: bool
    presk: bool = False  # whether its exp is presk's own (psk-functions marked it)


def predict(nest: Nest | Rows, layout: Layout, element: int, target: Target) -> float:
    """The predicted cycles of one launch of `nest` at `layout`; `element` the bytes of
    the arithmetic type."""
    if isinstance(nest, Rows):
        return _softmax(nest, layout, element, target)
    lead = math.prod(nest.lead)
    if layout.form == "rowwise":
        body, traffic = _rowwise(nest, layout, element, target)
    else:
        body, traffic = _tiled(nest, layout, element, target)
    total = lead * (body + traffic)
    pack_a, pack_b = _packs(nest, layout)
    if layout.split is None:
        return total + lead * (pack_a + pack_b)
    depth, workers = layout.split
    share = _share(_trips(nest, layout, depth), workers)
    if depth < len(nest.lead):  # each worker packs for its own leading indices
        return (total + lead * (pack_a + pack_b)) * share + SPLIT
    # every worker packs a for itself, and b too but where the split is over J's blocks,
    # whose panels it packs alone (psk-kernel-to-affine)
    own_b = share if depth == len(nest.lead) and layout.order[0] == "J" else 1
    return total * share + lead * (pack_a + pack_b * own_b) + SPLIT


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
    return body, traffic


def _tiled(nest: Nest, layout: Layout, e: int, target: Target):
    i, j, k = nest.i, nest.j, nest.k
    m, n = layout.tile
    w = layout.lanes
    vn = math.ceil(n / w)
    tiles = (i // m) * (j // n)
    packed_a, packed_b = layout.pack == "ab", "b" in layout.pack
    a_i, a_j = nest.depends(nest.c.a, "i"), nest.depends(nest.c.a, "j")
    b_i, b_j = nest.depends(nest.c.b, "i"), nest.depends(nest.c.b, "j")
    vector = LOAD * max(1, w * e // target.load_bytes)  # a vector; a broadcast one element
    a_loads = (m if a_i else 1) * (vn if a_j else 1)
    b_loads = (vn if b_j else 1) * (m if b_i else 1)
    load = a_loads * (vector if a_j else LOAD) + b_loads * (vector if b_j else LOAD)
    if b_j and not packed_b and not nest.contiguous_j(nest.c.b):
        load += b_loads * (n / vn) * LOAD * 4  # a cache line an element
    regs = m * vn + (vn if b_j else 1) + 1
    load += max(0, regs - target.registers) * 2 * LOAD * 2
    # the multiplies and adds on two vector units; on AVX-512 an operand broadcast to the
    # tile's vn vectors is one more operation for them (used once, it is folded into the
    # multiply's load instead)
    broadcasts = 0
    if target.broadcast_op and w > 1 and vn > 1:
        broadcasts = (0 if a_j else a_loads) + (0 if b_j else b_loads)
    compute = (m * vn + broadcasts / 2) / target.multiplies
    near, far = _streamed(nest, layout, e, target)
    chain = target.fma_latency if layout.fma else target.add_latency
    hidden, added = _strided(nest, layout, e, target) if b_j and not packed_b else (0.0, 0.0)
    if not packed_a and a_i and nest.c.a[-1][0] != "k" and nest.i * e > STRIDE:
        added += target.a_rows
    # a k's multiply-adds, loads, the accumulators' chains of adds and the prefetched
    # streams overlap; what L1 misses in L2 waits as long as the longest of them
    per_k = max(compute, chain, load, far, near, hidden) + added
    kb = layout.kblock or k
    body = tiles * k * per_k
    if layout.kblock:
        body += tiles * (k // kb) * m * vn * 2
    return body, 0.0


def _packs(nest: Nest, layout: Layout) -> tuple[float, float]:
    """The cycles of packing a and b (0 for an operand not packed): a load and a store an
    element copied, in vectors where the operand's elements are consecutive along the
    panel's (LLVM vectorizes that copy), else one by one."""
    copy = 1 + 2 * LOAD
    a = nest.i * nest.k * copy if layout.pack == "ab" else 0.0
    b = 0.0
    if "b" in layout.pack:
        b = nest.k * nest.j * copy / (layout.lanes if nest.contiguous_j(nest.c.b) else 1)
    return a, b


def _strided(nest: Nest, layout: Layout, e: int, target: Target) -> tuple[float, float]:
    """The cycles a k an unpacked b costs where its rows are more than STRIDE bytes apart
    (the prefetchers lose them), as (hidden behind the multiply-adds, added to them). On
    znver1 (AVX2) every k paid STRIDED on top, and a page walk a k where a row is wider than
    a page. On znver4 a k waits STRIDED where the tile sweeps more rows than L2 keeps at
    their stride, else ROW where a too is read a row a k (measured: the prefetchers follow
    one such stream, not two), both hidden behind the multiply-adds as far as they last,
    and pays a page walk a line of the row where a row is wider than a page."""
    m, n = layout.tile
    row = nest.j * e
    if row <= STRIDE:
        return 0.0, 0.0
    if not target.hides_misses:
        return 0.0, STRIDED + (TLB_WALK / m if row >= PAGE else 0.0)
    if _conflicts(nest, layout, e, target):
        wait = STRIDED
    else:  # L2 holds the rows; a k waits for one only where a is read a row a k as well
        a_rows = layout.pack != "ab" and nest.c.a[-1][0] != "k"
        wait = ROW if a_rows else 0.0
    return wait, TLB_WALK / m * math.ceil(n * e / LINE) if row >= PAGE else 0.0


def _conflicts(nest: Nest, layout: Layout, e: int, target: Target) -> bool:
    """Whether an unpacked b's rows, read down a column a k at a time, miss L2: a tile
    sweeps more of them before it reads them again than L2 keeps at their stride (a stride
    of 2^p lines falls in 1/2^p of L2's sets)."""
    row = nest.j * e
    kb = layout.kblock
    rows = nest.k if not kb or layout.order.endswith("K") else kb
    sets = target.l2 // (LINE * target.l2_ways)
    return rows > sets // math.gcd(max(1, row // LINE), sets) * target.l2_ways


def _streamed(nest: Nest, layout: Layout, e: int, target: Target) -> tuple[float, float]:
    """The cycles a tile's k waits for operand bytes from beyond L1: (from L2, from
    further). Each operand is read again at the innermost loop around the tile that it
    does not move with, from the cache that holds what the loops inside that one touch
    (its reuse distance); one no loop reuses streams from memory."""
    m, n = layout.tile
    kb = layout.kblock or nest.k
    ops = {"a": nest.c.a, "b": nest.c.b}
    own = {
        x: (m if nest.depends(o, "i") else 1) * (n if nest.depends(o, "j") else 1)
        for x, o in ops.items()
    }
    packed = {"a": layout.pack == "ab", "b": "b" in layout.pack}
    # the bytes a tile's k keeps in cache: whole lines where an operand's rows are its k
    # (unpacked, k not its last axis), so that each k reads other lines
    held = {
        x: own[x] * e if packed[x] or ops[x][-1][0] == "k" else math.ceil(own[x] * e / LINE) * LINE
        for x in ops
    }
    trips = {"I": nest.i // m, "J": nest.j // n, "K": nest.k // kb}
    around = [(x, trips[x]) for x in reversed(layout.order)]
    around += [(("o", p), size) for p, size in reversed(list(enumerate(nest.lead)))]

    def moves(x: str, axis) -> bool:
        if axis in ("I", "J"):
            return nest.depends(ops[x], axis.lower())
        return axis == "K" or axis in ops[x]

    near = far = 0.0
    for name in ops:
        footprint = {x: held[x] * kb for x in ops}
        distance = None
        for axis, count in around:
            if count == 1:
                continue
            if not moves(name, axis):
                distance = sum(footprint.values())
                break
            for x in footprint:
                footprint[x] *= count if moves(x, axis) else 1
        per_k = own[name] * e
        if distance is None or distance > target.l3:
            far += per_k * DRAM_BYTE
        elif distance > target.l2:
            far += per_k * target.l3_byte
        elif distance > target.l1 // 2:
            near += per_k * L2_BYTE
    return near, far


def _softmax(rows: Rows, layout: Layout, e: int, target: Target) -> float:
    total = math.prod(rows.lead) * _softmax_row(rows, layout, e, target)
    if layout.split is None:
        return total
    depth, workers = layout.split
    return total * _share(rows.lead[depth], workers) + SPLIT


def _softmax_row(rows: Rows, layout: Layout, e: int, target: Target) -> float:
    """One row: its maximum, the sum of its exponentials, then the output divided in
    vectors; the three-pass form computes each exponential in the sum's loop and again for
    the output, the two-pass form once, in a loop of its own into its scratch row."""
    n = rows.n
    read = LOAD * (2 if rows.masked else 1)  # an element, and its mask's
    vectors = math.ceil(n / (target.vector_bytes // e if rows.contiguous else 1))
    apart = PRESK_EXP / (target.vector_bytes // 8) if rows.presk and rows.contiguous else EXP
    total = n * (1 + read)  # the maximum
    if layout.form == "two-pass":
        total += n * (apart + read + LOAD) + n * (1 + LOAD)  # the exps kept, their sum
        return total + vectors * (DIVIDE + 2 * LOAD) + SCRATCH
    return total + n * (EXP + read) + n * (apart + read) + vectors * (DIVIDE + LOAD)


def milliseconds(cycles: float) -> float:
    return cycles / (GHZ * 1e6)
