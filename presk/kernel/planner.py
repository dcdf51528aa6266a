"""Choosing a layout for every contraction nest of a lowered module (`presk plan`).

For each nest (the site of a launch of a contraction kernel) every point of the layout
space the nest can take, each with no split or a split over the machine's workers (or
half of them) at each depth the nest allows, is priced by presk/kernel/cost.py; the
cheapest is the plan's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.errors import RealizationError
from presk.ir.ops import string_attr, walk_ops
from presk.kernel.contraction import Layout, Nest, check, read_nest, space
from presk.kernel.cost import Target, predict
from presk.kernel.epilogue import bias_add
from presk.kernel.machine import MACHINES
from presk.kernel.relayout import contraction_kernels


@dataclass(frozen=True)
class Choice:
    site: str
    kernel: str
    nest: Nest
    layout: Layout  # with epilogue set where a bias add after the nest folds into it
    cycles: float
    default_cycles: float


def candidates(nest: Nest, machine: str, target: Target) -> list[Layout]:
    element = MACHINES[machine].arith.itemsize
    out = []
    for layout in space(nest, machine, target.vector_bytes // element):
        out.append(layout)
        for depth in range(len(nest.lead) + 3):
            for workers in sorted({target.cores, target.cores // 2} - {0, 1}):
                split = replace(layout, split=(depth, workers))
                try:
                    check(nest, split, machine)
                except RealizationError:
                    continue
                out.append(split)
    return out


def choose(module, machine: str, target: Target) -> list[Choice]:
    """The cheapest layout of each contraction nest of a module at the kernel stage. A
    site a function's instances share (Linear.apply/%0 in Linear{16, 64} and Linear{64,
    16}) is one nest of the plan: its layout must suit every kernel launched there, and
    it is the cheapest in total, and a site with no such point keeps its kernels'
    defaults."""
    element = MACHINES[machine].arith.itemsize
    kernels = contraction_kernels(module)
    sites: dict[str, list] = {}
    for launch in walk_ops(module, "psk_kernel.launch"):
        symbol = launch.attributes["kernel"].value
        if symbol in kernels:
            sites.setdefault(string_attr(launch, "psk.site"), []).append(launch)
    out = []
    for site, launches in sites.items():
        fs = [kernels[op.attributes["kernel"].value] for op in launches]
        nests = [read_nest(f)[0] for f in fs]
        shared = [set(candidates(nest, machine, target)) for nest in nests]
        points = [p for p in candidates(nests[0], machine, target) if all(p in c for c in shared)]
        if not points:  # no point every kernel of the site can take: it keeps its defaults
            continue
        costs = [
            (sum(predict(n, p, element, target) for n in nests), i, p) for i, p in enumerate(points)
        ]
        cycles, _, layout = min(costs)
        defaults = [Layout.read(f.attributes["psk_kernel.layout"]) for f in fs]
        default_cycles = sum(
            predict(n, d, element, target) for n, d in zip(nests, defaults, strict=True)
        )
        if all(bias_add(module, op) is not None for op in launches):
            layout = replace(layout, epilogue=True)  # one launch fewer, one pass over t fewer
        out.append(
            Choice(
                site, fs[0].attributes["sym_name"].value, nests[0], layout, cycles, default_cycles
            )
        )
    return out


def plan_entry(layout: Layout) -> dict:
    """A layout as a plan file writes it."""
    return {
        "form": layout.form,
        "tile": list(layout.tile),
        "kblock": layout.kblock,
        "order": layout.order,
        "lanes": layout.lanes,
        "pack": layout.pack,
        "split": list(layout.split) if layout.split else "none",
        "epilogue": layout.epilogue,
    }
