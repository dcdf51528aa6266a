"""Choosing a layout for every contraction and softmax nest of a lowered module
(`presk plan`).

For each nest (the site of a launch of a contraction or softmax kernel) every point of
the layout space the nest can take (a softmax's: its two forms), each with no split or a
split over the machine's workers (or half of them) at each depth the nest allows, is
priced by presk/kernel/cost.py; the cheapest is the plan's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from presk.errors import RealizationError
from presk.ir.ops import module_launches, python_value, string_attr
from presk.kernel import functions
from presk.kernel.contraction import (
    ROW_FORMS,
    Layout,
    Nest,
    check,
    check_rows,
    read_nest,
    space,
)
from presk.kernel.cost import Rows, Target, predict
from presk.kernel.epilogue import bias_add
from presk.kernel.machine import MACHINES
from presk.kernel.relayout import layout_kernels
from presk.kernel.weights import kernel_buffers


@dataclass(frozen=True)
class Choice:
    site: str
    kernel: str
    nest: Nest | Rows
    layout: Layout  # with epilogue set where a bias add after the nest folds into it
    cycles: float
    default_cycles: float
    instances: tuple[Nest | Rows, ...]  # the nest of every kernel launched at the site

    @property
    def shape(self) -> str:
        return nest_shape(self.nest)


def nest_shape(nest: Nest | Rows) -> str:
    """A nest's sizes as `presk plan` prints them."""
    if isinstance(nest, Rows):
        return f"[{', '.join(map(str, nest.lead))}] rows of {nest.n}"
    return f"[{', '.join(map(str, nest.lead + [nest.i, nest.j]))}] K={nest.k}"


def read_rows(f) -> Rows:
    """The softmax nest of kernel `f` (its inputs x and perhaps a mask, then its output)."""
    buffers = kernel_buffers(f)
    x = buffers[0][1]
    axis = python_value(f.attributes["psk_kernel.rows"])["axis"]
    lead = tuple(a.size for i, a in enumerate(x.axes) if i != axis)
    n, last = x.axes[axis].size, axis == x.rank - 1
    return Rows(lead, n, last, len(buffers) == 3, functions.marked(f))


def read_any(f) -> Nest | Rows:
    """The nest of a kernel with a layout: a contraction's or a softmax's."""
    return read_nest(f)[0] if "psk_kernel.contraction" in f.attributes else read_rows(f)


def candidates(
    nest: Nest | Rows, machine: str, target: Target, declared: Layout | None = None
) -> list[Layout]:
    """The points a nest can take, each alone and split. `declared`: the kernel's own
    layout, whose realized order (interleaved partial sums) and contraction (FMA) every
    point keeps, since a layout moves loops and never changes what is summed."""
    if isinstance(nest, Rows):
        points, depths = [Layout(form=form) for form in ROW_FORMS], len(nest.lead)
    else:
        element = MACHINES[machine].arith.itemsize
        points, depths = space(nest, machine, target.vector_bytes // element), len(nest.lead) + 3
        if declared is not None and (declared.partials > 1 or declared.fma):
            points = [
                replace(p, partials=declared.partials, fma=declared.fma)
                for p in points
                if _takes(nest, replace(p, partials=declared.partials, fma=declared.fma), machine)
            ]
    out = []
    for layout in points:
        out.append(layout)
        for depth in range(depths):
            for workers in sorted({target.cores, target.cores // 2} - {0, 1}):
                split = replace(layout, split=(depth, workers))
                try:
                    _check(nest, split, machine)
                except RealizationError:
                    continue
                out.append(split)
    return out


def sweep_and_pick(
    nest: Nest, machine: str, target: Target, points: list[Layout]
) -> tuple[list[Layout], Layout]:
    """For a benchmark's sweep: the `points` the nest takes, with the model's pick among
    every point of the space appended where the sweep lacks it; and that pick."""
    element = MACHINES[machine].arith.itemsize
    pick = min(candidates(nest, machine, target), key=lambda p: predict(nest, p, element, target))
    taken = [p for p in points if _takes(nest, p, machine)]
    return taken + ([pick] if pick not in taken else []), pick


def _takes(nest: Nest, layout: Layout, machine: str) -> bool:
    try:
        check(nest, layout, machine)
    except RealizationError:
        return False
    return True


def _check(nest: Nest | Rows, layout: Layout, machine: str) -> None:
    if isinstance(nest, Rows):
        check_rows(layout, len(nest.lead))
    else:
        check(nest, layout, machine)


@dataclass(frozen=True)
class Offer:
    """A nest of the plan (a site) and the points every kernel launched there can take,
    cheapest first, each with its predicted cycles over those kernels."""

    site: str
    kernels: tuple  # the kernel ops launched at the site, one a launch
    nests: tuple[Nest | Rows, ...]  # theirs
    ranked: tuple[tuple[float, Layout], ...]
    default_cycles: float
    epilogue: bool  # whether a bias add after every launch folds into the nest


def offers(module, machine: str, target: Target) -> list[Offer]:
    """Each contraction and softmax nest of a module at the kernel stage with its points
    priced. A site a function's instances share (Linear.apply/%0 in Linear{16, 64} and
    Linear{64, 16}) is one nest of the plan: its points are those that suit every kernel
    launched there, priced in total; a site with no such point is left out (its kernels
    keep their defaults)."""
    kernels = layout_kernels(module)
    # a function's instances repeat their nests (each layer's Linear{16, 64}): each nest's
    # points and each point's price are found once
    offered = cache(lambda nest, own, declared: candidates(nest, own, target, declared))
    price = cache(lambda nest, layout, element: predict(nest, layout, element, target))
    sites: dict[str, list] = {}
    for launch in module_launches(module):
        symbol = launch.attributes["kernel"].value
        if symbol in kernels:
            sites.setdefault(string_attr(launch, "psk.site"), []).append(launch)
    out = []
    folded: list = []  # the bias adds a chosen epilogue folds
    for site, launches in sites.items():
        fs = [kernels[op.attributes["kernel"].value] for op in launches]
        # a site's kernels are in its realized type, which may not be the module's default
        own = (
            string_attr(fs[0], "psk_kernel.type")
            if "psk_kernel.type" in fs[0].attributes
            else machine
        )
        element = MACHINES[own].arith.itemsize
        nests = [read_any(f) for f in fs]
        defaults = [Layout.read(f.attributes["psk_kernel.layout"]) for f in fs]
        shared = [set(offered(n, own, d)) for n, d in zip(nests, defaults, strict=True)]
        points = [p for p in offered(nests[0], own, defaults[0]) if all(p in c for c in shared)]
        if not points:  # no point every kernel of the site can take: it keeps its defaults
            continue
        costs = [(sum(price(n, p, element) for n in nests), i, p) for i, p in enumerate(points)]
        ranked = tuple((cycles, p) for cycles, _, p in sorted(costs))
        default_cycles = sum(price(n, d, element) for n, d in zip(nests, defaults, strict=True))
        adds = [bias_add(module, op) for op in launches] if isinstance(nests[0], Nest) else []
        # one launch fewer, one pass over t fewer; an add that two products feed (x·w + x·v)
        # folds into the first one's nest only, after which the second reads no add alone
        epilogue = bool(adds) and all(a is not None and a[0] not in folded for a in adds)
        if epilogue:
            folded.extend(a[0] for a in adds)
        out.append(Offer(site, tuple(fs), tuple(nests), ranked, default_cycles, epilogue))
    return out


def choose(module, machine: str, target: Target) -> list[Choice]:
    """The cheapest layout of each contraction and softmax nest of a module at the kernel
    stage (`offers`), a bias add after it folded where one can be."""
    out = []
    for offer in offers(module, machine, target):
        cycles, layout = offer.ranked[0]
        out.append(
            Choice(
                offer.site,
                offer.kernels[0].attributes["sym_name"].value,
                offer.nests[0],
                replace(layout, epilogue=offer.epilogue),
                cycles,
                offer.default_cycles,
                offer.nests,
            )
        )
    return out


def plan_entry(layout: Layout) -> dict:
    """A layout as a plan file writes it (a softmax's: its form and split)."""
    split = list(layout.split) if layout.split else "none"
    if layout.form in ROW_FORMS:
        return {"form": layout.form, "split": split}
    return {
        "form": layout.form,
        "tile": list(layout.tile),
        "kblock": layout.kblock,
        "order": layout.order,
        "lanes": layout.lanes,
        "pack": layout.pack,
        "split": split,
        "epilogue": layout.epilogue,
    }
