"""The contraction layout space: one builder lowers a contraction at any point of it.

A contraction out[o] = Σ_k a[ma(o, k)] · b[mb(o, k)] (`nests.Contraction`) has output axes
L… (leading), I (the second last; a size-one axis if the output has fewer than two) and J
(the last), and contracted axes K, taken in row-major order as one index k. A `Layout`
chooses how the nest computes it:

- form: `rowwise` keeps a row's partial sums in the output, each k adding a·b into every
  column of the row; `tiled` keeps a tile of accumulators in registers across the sum.
- tile (m, n): m rows × n columns of accumulators (tiled).
- kblock: 0, or the sum in blocks of that many k, the accumulators stored to the output
  after each block and loaded back before the next.
- order: the order of the block loops: IJ or JI; with a k-block, a permutation of IJK.
- lanes: 1, or the tile's columns in vectors of that many lanes (consecutive columns).
- pack: `b` copies operand b to a panel [J/n][K][n] before the sum, so the columns of a
  tile are consecutive whatever b's layout; `ab` also copies a to [I/m][K][m].
- split: (depth, workers): the loop at that depth of the nest divided over the workers.

Every output element adds its terms a·b in increasing k from 0 in every form, each
product and sum rounded to the arithmetic type, so every point gives the same bits; only
a k-block's stores could round, which `check` refuses where they would (bf16). Two
fields are a realization's, not layouts, and change the bits: `partials` (an
interleaved order) and `fma` (each acc + a·b one fused multiply-add, rounded once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from mlir import ir

from presk.errors import RealizationError
from presk.ir.ops import python_value
from presk.ir.types import TensorType, alignment, i64_array
from presk.kernel.builder import KernelBuilder
from presk.kernel.loops import PANELS
from presk.kernel.machine import buffer_tensor
from presk.kernel.nests import Contraction, accumulate, aligned_index, loops
from presk.toolchain import default_threads

ORDERS = ("IJ", "JI", "IJK", "IKJ", "JIK", "JKI", "KIJ", "KJI")
PACKS = ("none", "b", "ab")


@dataclass(frozen=True)
class Layout:
    form: str = "tiled"
    tile: tuple[int, int] = (1, 1)
    kblock: int = 0
    order: str = "IJ"
    lanes: int = 1
    pack: str = "none"
    split: tuple[int, int] | None = None  # (depth, workers)
    epilogue: bool = False  # a bias add folded into the kernel (presk/kernel/epilogue.py)
    partials: int = 1  # a realization's interleaved(P) order: P partial sums (not exact)
    fma: bool = False  # a realization's "contract": "fma": acc + a·b rounded once

    def text(self) -> str:
        """The layout as an MLIR dictionary attribute's text."""
        parts = [
            f'form = "{self.form}"',
            f"tile = {i64_array(self.tile)}",
            f"kblock = {self.kblock} : i64",
            f'order = "{self.order}"',
            f"lanes = {self.lanes} : i64",
            f'pack = "{self.pack}"',
        ]
        if self.split:
            parts.append(f"split = {i64_array(self.split)}")
        if self.epilogue:
            parts.append("epilogue")
        if self.partials > 1:
            parts.append(f"partials = {self.partials} : i64")
        if self.fma:
            parts.append("fma")
        return "{" + ", ".join(parts) + "}"

    def attr(self) -> ir.Attribute:
        return ir.Attribute.parse(self.text())

    @staticmethod
    def read(attr: ir.Attribute) -> Layout:
        d = python_value(attr)
        split = d.get("split")
        return Layout(
            d["form"],
            tuple(d["tile"]),
            d["kblock"],
            d["order"],
            d["lanes"],
            d["pack"],
            tuple(split) if split else None,
            "epilogue" in d,
            d.get("partials", 1),
            "fma" in d,
        )


@dataclass(frozen=True)
class Nest:
    """A contraction with its output type, read as L, I, J and K."""

    c: Contraction
    out: TensorType

    # read hundreds of thousands of times as the cost model prices a module's layouts
    @cached_property
    def rank(self) -> int:
        return self.out.rank

    @property
    def lead(self) -> list[int]:
        return list(self.out.shape[: max(0, self.rank - 2)])

    @cached_property
    def i(self) -> int:
        return self.out.shape[-2] if self.rank >= 2 else 1

    @cached_property
    def j(self) -> int:
        return self.out.shape[-1] if self.rank >= 1 else 1

    @cached_property
    def k(self) -> int:
        return math.prod(self.c.ksizes)

    def depends(self, which: tuple, axis: str) -> bool:
        """Whether an operand's index moves with the I or J axis."""
        pos = self.rank - 2 if axis == "i" else self.rank - 1
        return pos >= 0 and ("o", pos) in which

    def contiguous_j(self, which: tuple) -> bool:
        """The operand's last axis is J: consecutive columns are consecutive elements."""
        return self.rank >= 1 and bool(which) and which[-1] == ("o", self.rank - 1)

    def out_index(self, lead: list, i, j) -> list:
        return [*lead, *([i] if self.rank >= 2 else []), *([j] if self.rank >= 1 else [])]


ROW_FORMS = ("three-pass", "two-pass")


def check_rows(layout: Layout, loops: int) -> None:
    """A softmax's layout: its form, and a split of one of its `loops` parallel loops (over
    the axes other than the row's)."""

    def refuse(why: str):
        raise RealizationError(f"layout {layout.text()}: {why}", code="E7002")

    if layout.form not in ROW_FORMS:
        refuse("a softmax's form is three-pass or two-pass")
    if layout.fma:
        refuse("a softmax has no multiply-add to fuse")
    if layout != Layout(form=layout.form, split=layout.split):
        refuse("a softmax has no tile, k-block, order, lanes or pack")
    if layout.split:
        _check_split(layout, [True] * loops, refuse)


def _check_split(layout: Layout, chain: list[bool], refuse) -> None:
    """`chain`: whether each loop down the nest is parallel."""
    depth, workers = layout.split
    if not 0 <= depth < len(chain) or not all(chain[: depth + 1]):
        refuse(f"a split at depth {depth}: the loops down to it are not all parallel")
    cores = default_threads()
    if workers not in (cores, cores // 2) or workers < 1:
        refuse(f"a split over {workers} workers: the machine's {cores}, or half of it")


class _Refused(Exception):
    """Why a nest cannot take a layout (`check` reports it as E7002; `space`, which tries
    some 1 700 points a nest, only skips the point)."""


def _refuse(why: str):
    raise _Refused(why)


def check(nest: Nest, layout: Layout, machine: str, epilogue: Epilogue | None = None) -> None:
    """Refuse a point of the space the nest cannot take (E7002, naming the condition)."""
    try:
        _check(nest, layout, machine, epilogue)
    except _Refused as why:
        raise RealizationError(f"layout {layout.text()}: {why}", code="E7002") from None


def _check(nest: Nest, layout: Layout, machine: str, epilogue: Epilogue | None) -> None:
    if layout.partials > 1:
        if layout.form != "tiled" or layout.kblock:
            _refuse("an interleaved order needs the tiled form without a k-block")
        if nest.k % layout.partials:
            _refuse(f"{layout.partials} interleaved partial sums do not divide K = {nest.k}")
    if layout.lanes > 1 and epilogue is not None:
        m = alignment(epilogue.type, nest.out)
        if m[-1] is not None and m[-1] != epilogue.type.rank - 1:
            _refuse("lanes need the bias of the epilogue contiguous along J")

    m, n = layout.tile
    if layout.form not in ("rowwise", "tiled"):
        _refuse(f"form is rowwise or tiled, not {layout.form!r}")
    if layout.order not in ORDERS or (len(layout.order) == 3) != bool(layout.kblock):
        _refuse("the order is IJ or JI, or with a k-block a permutation of IJK")
    if layout.pack not in PACKS:
        _refuse(f"pack is none, b or ab, not {layout.pack!r}")
    if layout.form == "rowwise":
        if machine == "bf16":
            _refuse("the row-wise form in bf16 would sum in the bf16 output")
        if layout.kblock:
            _refuse("a k-block needs the tiled form (the row-wise form has no accumulators)")
        if layout.tile != (1, 1) or layout.pack != "none" or layout.order != "IJ":
            _refuse("the row-wise form has no tile, pack or order")
        if nest.depends(nest.c.a, "j"):
            _refuse("the row-wise form reads operand a once a row, and a varies along J")
    if layout.kblock:
        if machine == "bf16":
            _refuse("a k-block in bf16 would round the partial sums it stores")
        if nest.k % layout.kblock:
            _refuse(f"the k-block {layout.kblock} does not divide K = {nest.k}")
    if nest.i % m or nest.j % n:
        _refuse(f"the tile [{m}, {n}] does not divide [I, J] = [{nest.i}, {nest.j}]")
    if layout.lanes > 1:
        if n % layout.lanes if layout.form == "tiled" else nest.j % layout.lanes:
            _refuse(f"{layout.lanes} lanes do not divide the tile's {n} columns")
        packed_b = "b" in layout.pack
        for name, which in (("a", nest.c.a), ("b", nest.c.b)):
            if name == "b" and packed_b:
                continue
            if nest.depends(which, "j") and not nest.contiguous_j(which):
                _refuse(f"lanes need operand {name} contiguous along J (pack it)")
    if layout.split:
        blocks = [True] if layout.form == "rowwise" else [x != "K" for x in layout.order]
        _check_split(layout, [True] * len(nest.lead) + blocks, _refuse)
    if "b" in layout.pack and nest.depends(nest.c.b, "i"):
        _refuse("packing b needs b constant along I")
    if layout.pack == "ab" and nest.depends(nest.c.a, "j"):
        _refuse("packing a needs a constant along J")


def default_layout(nest: Nest, machine: str, kind: str) -> Layout:
    """The seed's default form: a dot or matmul is tiled [1, 8] where its last output axis
    is a multiple of eight, row-wise otherwise (tiled [1, 1] in bf16, whose row-wise form
    would sum in bf16, or where a reads along J); an ein and a dot's derivatives are tiled
    [1, 1]."""
    if kind in ("dot", "matmul") and nest.rank:
        if nest.j % 8 == 0:
            return Layout(tile=(1, 8))
        if machine != "bf16" and not nest.c.reads_last(nest.c.a, nest.rank):
            return Layout(form="rowwise")
    return Layout()


@dataclass(frozen=True)
class Epilogue:
    """A bias added to the product in its kernel: input buffer `buffer`, of type `type`
    (aligned to the output as the add aligns it). In bf16 the product is stored and read
    back before the add, as the add's own kernel would read it."""

    buffer: int
    type: TensorType

    def add(self, kb: KernelBuilder, nest: Nest, value, o: list, lanes: int):
        m = alignment(self.type, nest.out)
        if lanes > 1 and m[-1] is not None and m[-1] != self.type.rank - 1:
            raise AssertionError("check refuses lanes over a bias not contiguous along J")
        lanes_here = lanes if m[-1] is not None else 1
        bias = kb.load(self.buffer, aligned_index(self.type, nest.out, o), lanes_here)
        return kb.add(value, kb.broadcast(bias, lanes) if lanes_here == 1 else bias)


def build(kb: KernelBuilder, nest: Nest, layout: Layout, epilogue: Epilogue | None = None) -> None:
    """The nest of `nest` at `layout` (checked), into the kernel being built."""
    with loops(kb, nest.lead) as lead:
        if layout.form == "rowwise":
            _rowwise(kb, nest, layout, lead, epilogue)
        else:
            _Tiled(kb, nest, layout, lead, epilogue).emit()


def _rowwise(kb: KernelBuilder, nest: Nest, layout: Layout, lead: list, epilogue=None) -> None:
    # for each row: zero it, then for each k add a[k]·b[k, j] into every output column
    c, w = nest.c, layout.lanes
    zero = kb.broadcast(kb.const("0"), w)
    with kb.loop(nest.i) as i:
        with kb.loop(nest.j // w) as jv:
            kb.store(zero, nest.out_index(lead, i, kb.imul(jv, w)))

        def step(k, carried):
            a = kb.broadcast(kb.load(0, c.index(c.a, nest.out_index(lead, i, None), k)), w)
            with kb.loop(nest.j // w) as jv:
                o = nest.out_index(lead, i, kb.imul(jv, w))
                b = kb.load(1, c.index(c.b, o, k), w)
                kb.store(multiply_add(kb, layout, kb.load(-1, o, w), a, b), o)
            return carried

        accumulate(kb, list(c.ksizes), [], step)
        if epilogue is not None:  # the row's sums are in the output: read, add, store
            with kb.loop(nest.j // w) as jv:
                o = nest.out_index(lead, i, kb.imul(jv, w))
                kb.store(epilogue.add(kb, nest, kb.load(-1, o, w), o, w), o)


class _Tiled:
    def __init__(self, kb: KernelBuilder, nest: Nest, layout: Layout, lead: list, epilogue):
        self.kb, self.nest, self.layout, self.lead = kb, nest, layout, lead
        self.epilogue = epilogue
        self.m, self.n = layout.tile
        self.w = layout.lanes
        self.panels: dict[str, ir.Value] = {}

    def emit(self) -> None:
        if "b" in self.layout.pack:
            self.panels["b"] = self._pack("b")
        if self.layout.pack == "ab":
            self.panels["a"] = self._pack("a")
        self._blocks(list(self.layout.order), {})

    # ---- packing: a panel [blocks][K][tile] of an operand, per index of L ----
    def _pack(self, name: str) -> ir.Value:
        kb, nest = self.kb, self.nest
        which = nest.c.a if name == "a" else nest.c.b
        size, t = (nest.i, self.m) if name == "a" else (nest.j, self.n)
        panel = kb.scratch([size // t, nest.k, t])
        # b's panels marked: a split over J packs only its own (psk-kernel-to-affine)
        with kb.loop(size // t, mark=PANELS if name == "b" else None) as blk:

            def copy(ks, carried):
                k = self._flat(ks)
                with kb.loop(t) as x:
                    pos = kb.iadd(kb.imul(blk, t), x)
                    i, j = (pos, None) if name == "a" else (None, pos)
                    value = kb.load(
                        0 if name == "a" else 1,
                        nest.c.index(which, nest.out_index(self.lead, i, j), ks),
                    )
                    kb.store(value, [blk, k, x], panel)
                return carried

            accumulate(kb, list(nest.c.ksizes), [], copy)
        return panel

    def _flat(self, ks: list) -> ir.Value:
        """The row-major position of a multi-index of K."""
        kb, sizes = self.kb, self.nest.c.ksizes
        flat = ks[0]
        for k, size in zip(ks[1:], sizes[1:], strict=True):
            flat = kb.iadd(kb.imul(flat, size), k)
        return flat

    def _unflat(self, k: ir.Value) -> list:
        kb, sizes = self.kb, self.nest.c.ksizes
        if len(sizes) == 1:
            return [k]
        out, stride = [], math.prod(sizes)
        for size in sizes:
            stride //= size
            out.append(kb.irem(kb.idiv(k, stride), size) if stride > 1 else kb.irem(k, size))
        return out

    # ---- the block loops, in the layout's order ----
    def _blocks(self, order: list[str], idx: dict) -> None:
        kb, nest = self.kb, self.nest
        if not order:
            self._tile(idx)
            return
        axis, rest = order[0], order[1:]
        trips = {
            "I": nest.i // self.m,
            "J": nest.j // self.n,
            "K": nest.k // (self.layout.kblock or 1),
        }[axis]
        with kb.loop(trips, parallel=axis != "K") as x:
            self._blocks(rest, {**idx, axis: x})

    def _tile(self, idx: dict) -> None:
        kb, nest, m, n, w = self.kb, self.nest, self.m, self.n, self.w
        rows = [kb.iadd(kb.imul(idx["I"], m), r) for r in range(m)]
        cols = [kb.iadd(kb.imul(idx["J"], n), c * w) for c in range(n // w)]
        outs = [[nest.out_index(self.lead, i, j) for j in cols] for i in rows]
        zero = kb.broadcast(kb.const("0"), w)
        if self.layout.kblock:  # the partial sums of the blocks before, or 0 for the first
            first = kb.icmp("eq", idx["K"], kb.index_const(0))
            inits = [kb.select(first, zero, kb.load(-1, o, w)) for row in outs for o in row]
            start = kb.imul(idx["K"], self.layout.kblock)
            accs = kb.reduce(
                self.layout.kblock,
                inits,
                lambda k, a: self._step(kb.iadd(start, k), None, a, idx, rows, cols),
            )
        elif self.layout.partials > 1:
            accs = self._interleaved(zero, idx, rows, cols)
        else:
            n_acc = m * len(cols)
            accs = accumulate(
                kb,
                list(nest.c.ksizes),
                [zero] * n_acc,
                lambda ks, a: self._step(None, ks, a, idx, rows, cols),
            )
        for acc, o in zip(accs, [o for row in outs for o in row], strict=True):
            if self.epilogue is None:
                kb.store(acc, o)
                continue
            value = acc
            if kb.machine.name == "bf16":  # stored and read back, as the add's kernel reads it
                kb.store(acc, o)
                value = kb.load(-1, o, w)
            total = self.epilogue.add(kb, nest, value, o, w)
            if self.layout.kblock:  # the bias once, after the last block
                last = kb.icmp("eq", idx["K"], kb.index_const(nest.k // self.layout.kblock - 1))
                total = kb.select(last, total, value)
            kb.store(total, o)

    def _interleaved(self, zero, idx, rows, cols):
        """P partial sums, partial r over the k ≡ r (mod P) in increasing k, then added in
        order: the sum reassociated, a realization's order, not a layout."""
        kb, p = self.kb, self.layout.partials
        n = len(rows) * len(cols)

        def block(kk, accs):
            out = []
            for r in range(p):
                k = kb.iadd(kb.imul(kk, p), r)
                out += self._step(k, None, accs[r * n : (r + 1) * n], idx, rows, cols)
            return out

        partial = kb.reduce(self.nest.k // p, [zero] * (n * p), block)
        totals = partial[:n]
        for r in range(1, p):
            totals = [
                kb.add(t, x) for t, x in zip(totals, partial[r * n : (r + 1) * n], strict=True)
            ]
        return totals

    def _step(self, k, ks, accs, idx, rows, cols):
        """One k: every accumulator adds its a·b."""
        kb, nest, w = self.kb, self.nest, self.w
        if ks is None:
            ks = self._unflat(k)
        flat = k if k is not None else (self._flat(ks) if self.panels else None)
        loaded: dict = {}

        def operand(name: str, r: int, c: int):
            which = nest.c.a if name == "a" else nest.c.b
            di, dj = nest.depends(which, "i"), nest.depends(which, "j")
            key = (name, r if di else None, c if dj else None)
            if key not in loaded:
                if name in self.panels:
                    blk, pos = (idx["I"], r) if name == "a" else (idx["J"], c * w)
                    lanes = w if name == "b" else 1
                    value = kb.load(self.panels[name], [blk, flat, kb.index_const(pos)], lanes)
                else:
                    o = nest.out_index(self.lead, rows[r], cols[c])
                    lanes = w if dj else 1
                    value = kb.load(0 if name == "a" else 1, nest.c.index(which, o, ks), lanes)
                loaded[key] = kb.broadcast(value, w) if value.type == kb.ftype else value
            return loaded[key]

        out = []
        for r in range(len(rows)):
            for c in range(len(cols)):
                acc = accs[r * len(cols) + c]
                a, b = operand("a", r, c), operand("b", r, c)
                out.append(multiply_add(kb, self.layout, acc, a, b))
        return out


def multiply_add(kb: KernelBuilder, layout: Layout, acc, a, b):
    """acc + a·b: the product and the sum each rounded, or, under a realization's fma,
    one fused multiply-add rounded once."""
    return kb.fma(a, b, acc) if layout.fma else kb.add(acc, kb.mul(a, b))


def describe(nest: Nest, kind: str) -> ir.Attribute:
    """What a kernel keeps of its nest, for the layout passes to build it again: operand
    axes as `o<n>` (output axis n) or `k<n>` (contracted axis n), the contracted sizes."""

    def axes(which) -> str:
        return "[" + ", ".join(f'"{src}{n}"' for src, n in which) + "]"

    c = nest.c
    return ir.Attribute.parse(
        f'{{kind = "{kind}", a = {axes(c.a)}, b = {axes(c.b)}, k = {i64_array(c.ksizes)}}}'
    )


def read_nest(f: ir.Operation) -> tuple[Nest, str]:
    """A contraction kernel's nest and kind (at the kernel stage), from its attributes and
    its output buffer."""
    d = python_value(f.attributes["psk_kernel.contraction"])

    def axes(names) -> tuple:
        return tuple((n[0], int(n[1:])) for n in names)

    c = Contraction(axes(d["a"]), axes(d["b"]), tuple(d["k"]))
    _, out = buffer_tensor(list(f.regions[0].blocks[0].arguments)[-1].type)
    return Nest(c, out), d["kind"]


TILE_ROWS = (1, 2, 4)
TILE_COLS = (4, 8, 16, 32, 64)
KBLOCKS = (0, 32, 128)


def space(nest: Nest, machine: str, width: int) -> list[Layout]:
    """Every point of the layout space the nest can take in `machine` (a split aside), with
    lanes of `width` (the register's, for the arithmetic type) or none."""
    candidates = [Layout(form="rowwise", lanes=w) for w in (1, width)]
    for m in TILE_ROWS:
        for n in TILE_COLS:
            for kblock in KBLOCKS:
                orders = [o for o in ORDERS if (len(o) == 3) == bool(kblock)]
                for order in orders:
                    for lanes in (1, width):
                        for pack in PACKS:
                            candidates.append(Layout("tiled", (m, n), kblock, order, lanes, pack))
    out = []
    for layout in dict.fromkeys(candidates):
        try:
            _check(nest, layout, machine, None)
        except _Refused:
            continue
        out.append(layout)
    return out
