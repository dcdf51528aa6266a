"""Measured autotuning, `--plan tuned`: each contraction and softmax nest at the fastest of
the cost model's cheapest points, timed natively on the nest's own sizes, the pick kept in
the kernel cache.

Every point of the layout space gives the same bits (docs/layouts.md), so a pick made by
measurement changes only time. A tuned plan's kernel stage has the cost model's layouts
(`auto`); the mlir backend then takes each nest (a site: presk/kernel/planner.py's
`offers`), the one the model prices dearest first, and its `TOP` cheapest points: each
point's kernels (one a kernel the site launches) are built at it, lowered for this
machine's vectors and compiled together (one bundle a site, through the kernel cache),
then run on buffers of their own shapes and types by the replay runtime, split over the
workers a schedule would split them over. The points run in turns, `ROUNDS` times after a
warm-up run; a point's time is the least of its runs, a kernel, summed over the site's
launches. The model's point is kept unless another ran `MARGIN` faster than it: on a
loaded machine a few percent is noise, and a pick that moves with noise from one run to
the next would only churn the cache.

A site's pick is stored in the kernel cache's `tuned/` folder as an `Entry`
(presk/backends/libraries.py) keyed by the compiler's key (MLIR's version, the CPU as LLVM
names it and its features, the pipeline) and a text of this machine (its model name, cores
and vector width), the worker threads, the points measured and the site's kernels. The
entry holds that text, compared on every hit, the pick as JSON, checked against its schema
and against the points, and the pick's digest: a damaged, foreign or stale entry is
measured again, never trusted. A second run of the same entry measures nothing.

Measuring is bounded: at most `budget` seconds from its start (`--plan tuned:S`; by
default about what the entry's cold compile takes, `KERNEL_SECONDS` a kernel); a site not
reached keeps the model's point, uncached, for a later run to measure.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from mlir import ir

from presk import plans, stages
from presk.backends.native import Compiler, kernel_source
from presk.backends.replay import Segment, replay_for
from presk.backends.workers import SPLIT_WORK, Workers, replay_pieces, split_workers
from presk.errors import RealizationError, UsageError
from presk.ir.ops import string_attr
from presk.jsontext import first_violation, parse
from presk.kernel.contraction import Layout
from presk.kernel.cost import Target, fitted
from presk.kernel.loops import kernel_funcs
from presk.kernel.machine import ELEMENTS
from presk.kernel.planner import Offer, offers, plan_entry
from presk.kernel.relayout import rebuild
from presk.passes.psk_plan import apply_plan
from presk.progress import Progress
from presk.toolchain import host_cpu, machine, vector_bytes

TOP = 4  # the cost model's cheapest points measured at a site
ROUNDS = 3  # runs of each point's kernels, in turns, after a warm-up run
MARGIN = 0.05  # how much faster than the model's point another must run to replace it
# A cold compile's seconds a kernel, for the default bound: the tiny MiniGPT's training
# step compiled 144 distinct kernels in 2.0 s on the 2-core znver5 (docs/performance.md)
KERNEL_SECONDS = 0.015
FOLDER = "tuned"  # the kernel cache's folder of picks
_PICK = {  # a cached pick, as the cache holds it (the points' spelling checked after)
    "type": "object",
    "required": ["pick", "seconds"],
    "properties": {"pick": {"type": "object"}, "seconds": {"type": "array"}},
}
_DEPTH = 8  # of a cached pick's JSON


def default_plan() -> str:
    """The mlir backend's plan when none is given: the cost model's layouts (`auto`) on
    the cores it was fitted on, measured ones (`tuned`) on any other."""
    return plans.AUTO if fitted(host_cpu()[0], vector_bytes()) else plans.TUNED


@dataclass(frozen=True)
class Run:
    """One kernel of a site built at one point, ready to run: what a timer times."""

    site: str
    layout: Layout
    call: Callable[[], None]


def wall_seconds(run: Run) -> float:
    """The wall time of one run."""
    start = time.perf_counter()
    run.call()
    return time.perf_counter() - start


@dataclass
class Tuning:
    """What a tuning did: each site's pick, measured now (with each point's seconds) or
    read from the cache, and the sites the bound left at the model's point."""

    measured: dict[str, list[tuple[Layout, float]]] = field(default_factory=dict)
    cached: dict[str, Layout] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)
    picks: dict[str, Layout] = field(default_factory=dict)
    seconds: float = 0.0


def tune(
    module: ir.Module,
    threads: int,
    compiler: Compiler,
    budget: float | None = None,
    timer: Callable[[Run], float] = wall_seconds,
) -> Tuning:
    """The nests of a kernel-stage `module` at the cost model's layouts (`auto`) moved to
    the fastest of each one's `TOP` cheapest points, measured on `threads` workers within
    `budget` seconds (None: `default_budget`) or read from `compiler`'s cache. Changes
    `module` in place."""
    start = time.perf_counter()
    budget = default_budget(module) if budget is None else budget
    target = Target.host()
    kind = string_attr(module.operation, "psk_kernel.type")
    found = sorted(offers(module.operation, kind, target), key=lambda o: -o.ranked[0][0])
    tuning = Tuning()
    with Progress("tuning layouts", len(found)) as progress:
        for offer in found:
            progress.advance()
            points = measured_points(offer)
            if len(points) == 1:  # nothing to choose between
                continue
            entry, text = _entry(compiler, offer, points, threads)
            pick = _cached(entry, text, points)
            if pick is not None:
                tuning.cached[offer.site] = pick
            elif time.perf_counter() - start < budget:
                seconds = _measure(offer, points, threads, compiler, timer)
                pick = _fastest(seconds)
                tuning.measured[offer.site] = seconds
                _store(compiler, entry, text, pick, seconds)
            else:
                tuning.left.append(offer.site)
                continue
            tuning.picks[offer.site] = pick
    moved = {
        o.site: plan_point(tuning.picks[o.site])
        for o in found
        if o.site in tuning.picks and _moves(o, tuning.picks[o.site])
    }
    apply_plan(module.operation, {"layout": moved})
    tuning.seconds = time.perf_counter() - start
    return tuning


def _fastest(seconds: list[tuple[Layout, float]]) -> Layout:
    """The fastest point measured, unless the model's (the first) ran within `MARGIN` of
    it."""
    model, first = seconds[0]
    pick, least = min(seconds, key=lambda s: s[1])
    return pick if least < (1 - MARGIN) * first else model


def measured_points(offer: Offer) -> list[Layout]:
    """The site's `TOP` cheapest points by the model, one of each predicted time: points
    it prices alike (a loop order that changes no reuse) are measured once."""
    out: dict[float, Layout] = {}
    for cycles, p in offer.ranked:
        out.setdefault(float(f"{cycles:.3g}"), p)
        if len(out) == TOP:
            break
    return list(out.values())


def default_budget(module: ir.Module) -> float:
    """About the seconds the module's cold compile takes: `KERNEL_SECONDS` a distinct
    kernel."""
    return KERNEL_SECONDS * len(kernel_funcs(module.operation))


def plan_point(layout: Layout) -> dict:
    """A pick as a plan's entry, the kernel's own epilogue kept as it is."""
    entry = plan_entry(layout)
    entry.pop("epilogue", None)
    return entry


def _moves(offer: Offer, pick: Layout) -> bool:
    """Whether the site's kernels are at another point than `pick` now."""
    return any(
        plan_point(Layout.read(f.attributes["psk_kernel.layout"])) != plan_point(pick)
        for f in offer.kernels
    )


def _distinct(offer: Offer) -> list[tuple[ir.Operation, int]]:
    """The site's kernels, each once, with how many of its launches run it."""
    count = Counter(string_attr(f, "sym_name") for f in offer.kernels)
    first = {string_attr(f, "sym_name"): f for f in reversed(offer.kernels)}
    return [(first[name], n) for name, n in count.items()]


def _entry(compiler: Compiler, offer: Offer, points: list[Layout], threads: int):
    """The site's place in the cache and the text it is kept under: this machine, the
    threads, the points and the site's kernels, each with its launches."""
    kernels = [f"{n} launches of\n{kernel_source(f)}" for f, n in _distinct(offer)]
    text = "\n".join(
        [
            "presk tuned layout",
            machine(),
            f"threads {threads}",
            *(json.dumps(plan_entry(p), sort_keys=True) for p in points),
            *kernels,
        ]
    )
    return compiler.place(text, FOLDER, ".txt", ".json"), text


def _cached(entry, text: str, points: list[Layout]) -> Layout | None:
    """The pick the cache holds for `text`, verified: the entry whole and `text`'s, its
    JSON of the pick's schema, and the pick one of the `points`; else None."""
    data = entry.verified(text)
    if data is None:
        return None
    try:
        value = parse(data.decode(), _DEPTH)
    except (ValueError, UnicodeDecodeError):
        return None
    if first_violation(value, _PICK) is not None:
        return None
    return next((p for p in points if plan_entry(p) == value["pick"]), None)


def _store(compiler: Compiler, entry, text: str, pick: Layout, seconds) -> None:
    record = {"pick": plan_entry(pick), "seconds": [[plan_entry(p), s] for p, s in seconds]}
    try:
        entry.store(text, (json.dumps(record, indent=1) + "\n").encode())
    except UsageError as e:  # a cache that cannot be written: measured again next time
        compiler.warn(e)


def _measure(
    offer: Offer, points: list[Layout], threads: int, compiler: Compiler, timer
) -> list[tuple[Layout, float]]:
    """Each point the site's kernels take, with its time: the least of `ROUNDS` runs of
    each kernel, in turns, summed over the site's launches."""
    kernels = _distinct(offer)
    built = _built(kernels, points)
    natives = compiler.bundled(built.ops) or compiler.bundle(
        built.ops, {n: kernel_source(f) for n, f in built.ops.items()}, lambda n: None
    )
    buffers = [_buffers(built.ops[name]) for name in built.first]
    runs = {
        (p, i): Run(
            offer.site, p, _call(built.ops[name], natives[name].fn, buffers[i], threads, compiler)
        )
        for (p, i), name in built.names.items()
    }

    for run in runs.values():
        run.call()  # warm: pages touched, caches filled
    least = {key: float("inf") for key in runs}
    for _ in range(ROUNDS):
        for key, run in runs.items():
            least[key] = min(least[key], timer(run))
    taken = {p for p, _ in runs}
    return [
        (p, sum(n * least[p, i] for i, (_, n) in enumerate(kernels))) for p in points if p in taken
    ]


@dataclass
class _Built:
    module: ir.Module  # held: its ops live while it does
    ops: dict[str, ir.Operation]  # the affine-stage kernels by name
    names: dict[tuple[Layout, int], str]  # (point, the site's kernel) -> its name
    first: list[str]  # a name of each of the site's kernels, for its buffers


def _built(kernels: list[tuple[ir.Operation, int]], points: list[Layout]) -> _Built:
    """The site's kernels at each point they all take, in a module of their own, lowered
    to the affine stage for this machine's vectors."""
    context = kernels[0][0].context
    with context, ir.Location.unknown():
        module = ir.Module.create()
        body = module.body
        names = {}
        for p in points:
            made = []
            try:
                for i, (f, _) in enumerate(kernels):
                    copy = f.clone(ip=ir.InsertionPoint(body))
                    name = f"tuned{len(names) + len(made)}"
                    copy.attributes["sym_name"] = ir.StringAttr.get(name)
                    made.append((i, name))
                    rebuild(copy, lambda _, p=p: p)
            except RealizationError:  # a point the kernel cannot take with its epilogue
                for _, name in made:
                    _erase(body, name)
                continue
            names.update({(p, i): name for i, name in made})
    stages.affine(module, vector_bytes())
    ops = {string_attr(f, "sym_name"): f for f in kernel_funcs(module.operation)}
    first = [next(n for (_, i), n in names.items() if i == k) for k in range(len(kernels))]
    return _Built(module, ops, names, first)


def _erase(body: ir.Block, name: str) -> None:
    for op in list(body.operations):
        if string_attr(op.operation, "sym_name") == name:
            op.operation.erase()


def _buffers(f: ir.Operation) -> list[np.ndarray]:
    """Buffers of an affine-stage kernel's arguments: reals drawn from a normal
    distribution, masks all ones, indices zero."""
    rng = np.random.default_rng(0)
    out = []
    for a in list(f.regions[0].blocks[0].arguments)[:-2]:
        t = ir.MemRefType(a.type)
        dtype = ELEMENTS[str(t.element_type)]
        if dtype.kind == "f" or dtype == ELEMENTS["bf16"]:
            out.append(rng.standard_normal(t.shape).astype(np.float32).astype(dtype))
        else:
            out.append(np.full(t.shape, 1 if dtype == ELEMENTS["i8"] else 0, dtype))
    return out


def _call(f: ir.Operation, fn, buffers: list[np.ndarray], threads: int, compiler: Compiler):
    """A launch of the compiled `fn` on `buffers`, split as a schedule splits it: in a
    segment of the replay runtime, or by the Python workers where it has too many
    buffers for one."""
    trips = _int(f, "psk_kernel.split")
    n = split_workers(
        trips, _int(f, "psk_kernel.work"), _int(f, "psk_kernel.workers"), threads, SPLIT_WORK
    )
    pointers = [b.ctypes.data for b in buffers]
    replay = replay_for(compiler)
    if len(buffers) <= replay.buffers:
        buffered = [(i, 0) for i in range(len(buffers))]
        segment = Segment(replay, [(fn, buffered, 0, trips, *replay_pieces(n, trips))])
        regions = np.array(pointers, np.int64)
        return lambda: segment(regions.ctypes.data, None, None)
    if n <= 1:
        return lambda: fn(*pointers, 0, trips)
    workers = Workers(n)
    return lambda: workers.run(fn, pointers, trips)


def _int(f: ir.Operation, name: str) -> int:
    return f.attributes[name].value if name in f.attributes else 0
