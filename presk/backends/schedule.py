"""A host program flattened into a schedule of native launches, for the MLIR backend.

Nothing the host does depends on the data but the data's own steps (draws, samples,
index checks): its calls, folds over layers, records and tuples follow the types alone.
So the MLIR backend runs the host once per entry (and training mode) over symbolic
buffers (`Buf`: a region and an offset in it), recording a step for each launch and
each piece of host work on data. Every later call replays the steps: one arena of
memory (kept from an earlier call whose result is gone, or new) holds every buffer the
call makes, and a launch is a ctypes call on addresses
found by adding offsets to the arena's, the arguments' and the constants' base
addresses. Records, tuples, calls, folds, layer slices and renames cost nothing then.
Each run of launches with no host step between them is one step, a segment the backend
replays in C in one native call (presk/backends/replay.py), launches split over the
workers included: the replay runtime runs their pieces on native threads.

Each step has a label (the `Launch` it makes, the launches of a segment, or the
`HostStep` of its host work), read only by `presk bench --breakdown`, which sets
`profile` to time a replay step by step, a segment's launches timed inside C
(presk/backends/breakdown.py), and by the C export, which re-emits the steps; an untimed
replay reads neither. What a schedule asks of the backend it traces for is the protocol
`Tracer`: the MLIR backend is one, the C export's tracer (presk/export/trace.py) another.
"""

from __future__ import annotations

import ctypes
import math
import operator
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from itertools import groupby
from typing import Protocol, runtime_checkable

import numpy as np

from presk.backends.arena import ALIGN, BEFORE, FOREVER, Bump, Lives, Shared
from presk.backends.host import CallContext, Draw, Host, locate
from presk.backends.kernel import host_value, sample
from presk.backends.launch import LaunchPlan
from presk.core.program import HostProgram
from presk.errors import PreskError
from presk.ir.types import RecordType, TensorType, TupleType
from presk.kernel.machine import ELEMENTS, Machine, storage_of, to_storage
from presk.kernel.weights import Weights
from presk.prims.rows import check_indices
from presk.quantize import Quantized, realized_elements, takes_parameters
from presk.realize import Realization
from presk.runtime import rng
from presk.runtime.values import Tensor, Value, build

KEPT_ARENAS = 2  # a training loop's step reads the last step's result: two alternate
WORD = (1 << 64) - 1  # a Philox key's low word
ARENA = 0  # region 0 is the arena; the arguments' leaves follow, then the constants
STACK = "stack layers"  # the site of a copy stacking a fold's layers


@dataclass(frozen=True)
class Launch:
    """What a launch step runs: `kernel` (mlir.Compiled) for the op at `site`, on buffers
    given as (region, offset)."""

    site: str
    kernel: object
    buffers: list[tuple[int, int]]


@dataclass(frozen=True)
class StackLayers:
    """A host step copying `nbytes` from each (region, offset) to the arena at `dst`: the
    layers of a fold's output stacked."""

    pieces: list[tuple[int, int, int]]  # (region, offset, dst)
    nbytes: int


@dataclass(frozen=True)
class GatherCheck:
    """A host step checking every index of `indices` (int64) in [0, size) before a kernel
    reads by them; `what` names them (token, target), `site` the op gathering by them."""

    indices: Buf
    size: int
    what: str
    site: str


@dataclass(frozen=True)
class HostStep:
    """A host step's label: what it does (`gather check`), and for a step a reader re-emits
    (the C export) its record, a `StackLayers` or a `GatherCheck`."""

    what: str
    detail: StackLayers | GatherCheck | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"host: {self.what}"


@runtime_checkable
class Tracer(Protocol):
    """What a `Schedule` asks of the backend it traces for: the program and how its
    values are typed, each launch's plan and kernel, and the steps that run them (a
    launch, a segment of launches replayed in C, the copy stacking a fold's layers, the
    draw of dropout's keep mask)."""

    program: HostProgram
    realization: Realization
    machine: Machine
    kernels: Mapping[str, object]

    def plans(self, op, inputs: int, training: bool) -> LaunchPlan: ...

    def launch_step(self, kernel, buffers: list[tuple[int, int]]): ...

    def in_segment(self, kernel) -> bool: ...

    def segment_step(self, launches: list[Launch]): ...

    def copy(self, nbytes: int): ...

    def dropout_keep(self, elements: int): ...


@dataclass(frozen=True)
class Buf:
    """A buffer of a schedule: `shape` elements of `dtype` at `offset` bytes into a region."""

    region: int
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def __getitem__(self, layer: int) -> Buf:
        """One layer of a stacked buffer (the host's folds slice them so)."""
        inner = self.shape[1:]
        return Buf(
            self.region,
            self.offset + layer * math.prod(inner) * self.dtype.itemsize,
            inner,
            self.dtype,
        )


def view(buf: Buf, arrays: list[np.ndarray]) -> np.ndarray:
    """The numpy array over a buffer's memory."""
    return np.ndarray(buf.shape, buf.dtype, buffer=arrays[buf.region], offset=buf.offset)


def flatten(value: Value, t) -> list[Tensor]:
    """A value's tensors in the order `build` makes them (its type's field order)."""
    return flattener(t)(value)


def flattener(t) -> Callable[[Value], list[Tensor]]:
    """`flatten` for values of type `t`: one function whose body subscripts every leaf in
    turn (`[v['a']['w'], v['a']['b'], …]`), made once a type. A call's parameter tree is
    flattened every call, and one expression takes a tenth of the time that walking the
    type by nested functions did."""
    paths = _leaf_paths(t, "v")
    return eval(f"lambda v: [{', '.join(paths)}]")  # noqa: S307  (keys written by repr)


def _leaf_paths(t, at: str) -> list[str]:
    """The subscript expressions of a value's leaves from `at`, in `build`'s order."""
    if isinstance(t, TensorType):
        return [at]
    if isinstance(t, RecordType):
        return [p for name, f in t.fields for p in _leaf_paths(f, f"{at}[{name!r}]")]
    assert isinstance(t, TupleType)
    return [p for i, f in enumerate(t.items) for p in _leaf_paths(f, f"{at}[{i}]")]


class Schedule:
    """`share`: buffers whose lives do not overlap share the arena's bytes
    (presk/backends/arena.py), found by a first trace in which each has its own; without
    it each keeps its own, for a reader of every launch's output after the call (bisect)."""

    def __init__(self, backend: Tracer, entry: str, training: bool, share: bool = True):
        if share:
            lives = Schedule(backend, entry, training, share=False).lives
            self._plan: Bump | Shared = Shared(lives)
        else:
            self._plan = Bump()
        self.backend = backend
        self.steps: list = []
        self.labels: list[Launch | HostStep] = []  # each step's, for a breakdown
        # checks of the arguments alone (the tokens' range): run first, so the launches
        # between them stay one segment and a bad argument stops the call before any work
        self.checks: list[tuple[object, str]] = []
        self.profile = None  # a breakdown.Profile timing each replay, when set
        self.arena = 0
        self.consts: list[np.ndarray] = []
        self._const_addresses: list[int] | None = None  # read at the first call
        self._arenas: list[np.ndarray] = []  # kept for the next calls, at most KEPT_ARENAS
        self.launches = 0
        self.unfused = 0
        fn = backend.program.functions[entry]
        self.arg_types = fn.arg_types
        self._flatteners = [flattener(t) for t in fn.arg_types]
        # the last call's input regions and their addresses, the next call's if the same
        self._last_inputs: tuple[list[np.ndarray], list] | None = None
        self._taken: list | None = None  # the last call's leaves that were its inputs as given
        # the last call's region addresses and the C array of them
        self._address_array: tuple[list[int], ctypes.Array] | None = None
        self.elements: list[str] = []  # each argument leaf's element type, or weights' spelling
        self.inputs = 0  # the argument arrays (integer weights have two)
        own = {}  # the realized parameters' spellings, by path
        if takes_parameters(backend.program, entry):
            own = realized_elements(backend.realization, fn.arg_types[0])
        args = [
            build(t, lambda path, t, i=i: self._argument(path, t, own if i == 0 else {}))
            for i, t in enumerate(fn.arg_types)
        ]
        host = Host(backend.program, self._apply, self._stack)
        self.result = host.call(entry, args, CallContext(training=training))
        self._used(_arena_refs(self.result), FOREVER)  # the result outlives the steps
        if isinstance(self._plan, Bump):
            self.lives: Lives = self._plan.lives()
        self.steps = [step for step, _ in self.checks] + self.steps
        self.labels = [label for _, label in self.checks] + self.labels

    @cached_property
    def segments(self) -> list[tuple[object, Launch | HostStep | list[Launch]]]:
        """The steps a call runs, with their labels: each run of launches the backend may
        replay in C made one step, labelled by its launches. Built at the first call, so
        the first trace of a shared arena, which never runs, builds none."""
        out = []
        for inline, run in groupby(
            zip(self.steps, self.labels, strict=True),
            lambda s: isinstance(s[1], Launch) and self.backend.in_segment(s[1].kernel),
        ):
            run = list(run)
            if inline:
                launches = [label for _, label in run]
                out.append((self.backend.segment_step(launches), launches))
            else:
                out.extend(run)
        return out

    # ---- tracing ----
    def _argument(self, path: str, t: TensorType, own: dict[str, str]) -> Tensor:
        element = own.get(path) or storage_of(t, self.backend.machine)
        self.elements.append(element)
        w = element
        if not isinstance(w, Weights):
            self.inputs += 1
            return Tensor(t, Buf(self.inputs, 0, t.shape, ELEMENTS[element]))
        self.inputs += 2
        ints = Buf(self.inputs - 1, 0, w.stored(t).shape, np.dtype(np.int8))
        scales = Buf(self.inputs, 0, w.scales(t).shape, np.dtype(np.float32))
        return Tensor(t, Quantized(ints, scales, w.bits, w.over, t.shape))

    def _alloc(self, shape: tuple[int, ...], dtype: np.dtype) -> Buf:
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        offset = self._plan.place(nbytes, len(self.steps))
        self.arena = self._plan.size
        return Buf(ARENA, offset, tuple(shape), np.dtype(dtype))

    def _used(self, refs, step: int) -> None:
        """The arena's buffers at `refs` ((region, offset) pairs) read or written by step
        `step`, for the first trace's account of their lives."""
        if isinstance(self._plan, Bump):
            for region, offset in refs:
                if region == ARENA:
                    self._plan.used(offset, step)

    def _const(self, data: np.ndarray) -> Buf:
        self.consts.append(np.ascontiguousarray(data))
        return Buf(self.inputs + len(self.consts), 0, data.shape, data.dtype)

    def _add(self, step, label: Launch | HostStep, refs=None) -> None:
        """A step, the buffers it reads and writes given as `refs` (a launch's are its
        label's)."""
        self._used(label.buffers if isinstance(label, Launch) else refs or [], len(self.steps))
        self.steps.append(step)
        self.labels.append(label)

    def _host_step(self, op, fn, label: HostStep, refs, first: bool = False) -> None:
        """A step of host work on data (`label` says what) on the buffers `refs`, its errors
        located at `op`; with `first`, one run before every other step (what it writes in
        the arena lives through the call)."""

        def step(regions, arrays, ctx):
            try:
                fn(arrays, ctx)
            except PreskError as e:
                locate(e, op)
                raise

        refs = [(b.region, b.offset) for b in refs]
        if first:
            self._used(refs, BEFORE)
            self._used(refs, FOREVER)
            self.checks.append((step, label))
        else:
            self._add(step, label, refs)

    def _stack(self, layers: list[Buf]) -> Buf:
        """A fold's layers copied into one stacked buffer: by the backend's copy, launched
        as a kernel is (so a training step's stacking joins its segments), else (the C
        export's trace) by a host step."""
        first = layers[0]
        out = self._alloc((len(layers), *first.shape), first.dtype)
        n = first.nbytes
        pieces = [(b.region, b.offset, out[i].offset) for i, b in enumerate(layers)]
        copy = self.backend.copy(n)
        if copy is not None:  # a copy a layer, launched as a kernel is: part of a segment
            for region, offset, dst in pieces:
                buffers = [(region, offset), (ARENA, dst)]
                self._add(self.backend.launch_step(copy, buffers), Launch(STACK, copy, buffers))
            self.launches += len(pieces)
            self.unfused += len(pieces)
            return out

        def step(regions, arrays, ctx):
            for region, offset, dst in pieces:
                ctypes.memmove(regions[ARENA] + dst, regions[region] + offset, n)

        refs = [(region, offset) for region, offset, _ in pieces] + [(ARENA, out.offset)]
        self._add(step, HostStep("stack layers", StackLayers(pieces, n)), refs)
        return out

    def _converted(self, buf: Buf | Quantized, element: str, op) -> Buf:
        dtype = ELEMENTS[element]
        if isinstance(buf, Buf) and buf.dtype == dtype:
            return buf
        out = self._alloc(buf.shape, dtype)

        def convert(arrays, ctx):
            view(out, arrays)[...] = to_storage(materialized(buf, arrays), element)

        self._host_step(op, convert, HostStep("convert"), [*_buffers(buf), out])
        return out

    def _apply(self, op, ins: list, ctx: CallContext, draw: Draw) -> Tensor:
        if op.name == "psk_kernel.launch":
            ins = list(ins[0])
            return self._launch(op, self.backend.plans(op, len(ins), ctx.training), ins, draw)
        if op.prim.draws:  # the host's one primitive that draws: sample
            logits, axis = ins[0], op.attrs["axis"]
            out = self._alloc(op.type.shape, np.int64)

            def draw_sample(arrays, ctx):
                where = Draw(ctx, draw.kind, draw.where)
                view(out, arrays)[...] = sample(view(logits.data, arrays), axis, where)

            self._host_step(op, draw_sample, HostStep("sample"), [logits.data, out])
            return Tensor(op.type, out)
        t = host_value(op, ins, self.backend.machine)
        return t if isinstance(t.data, Buf) else Tensor(t.type, self._const(t.data))

    def _launch(self, op, plan: LaunchPlan, ins: list[Tensor], draw: Draw) -> Tensor:
        """The plan traced: a host step for each conversion, the gather check and the mask,
        then the native launch on the buffers' places."""
        if plan.identity:
            return Tensor(plan.type, ins[0].data)
        bufs = plan.buffers(
            ins,
            lambda data, element: self._converted(data, element, op),
            lambda: self._mask(op, plan, draw),
            lambda: self._alloc(plan.type.shape, plan.output),
        )
        if plan.gather is not None:
            indices = bufs[1]
            gather = GatherCheck(indices, *plan.index_bound(ins), op.site)

            region, size = indices.region, math.prod(indices.shape)
            whole = region != ARENA and indices.offset == 0  # an argument's own array

            def check(arrays, ctx):  # the bound found once, at the trace
                a = arrays[region]
                ix = a if whole and a.size == size else view(indices, arrays)
                check_indices(ix, gather.size, gather.what)

            label = HostStep("gather check", gather)
            self._host_step(op, check, label, [indices], first=indices.region != ARENA)
        kernel = self.backend.kernels[plan.kernel]
        buffers = [(b.region, b.offset) for b in bufs]
        self._add(self.backend.launch_step(kernel, buffers), Launch(op.site, kernel, buffers))
        self.launches += 1
        self.unfused += plan.ops
        return Tensor(plan.type, bufs[-1])

    def _mask(self, op, plan: LaunchPlan, draw: Draw) -> Buf:
        """Dropout's keep mask, drawn each call with the call's seed and step: the
        generator's key and the rate written by a step run first (they depend on the call,
        not on data), the draws made in C by a launch of the replay runtime's
        `dropout_keep`, numpy's bits (`plan.keep`) in the segment's run."""
        mask = self._alloc(plan.type.shape, np.int8)
        key = self._alloc((3,), np.uint64)
        rate = np.float64(plan.rate).view(np.uint64)

        def write_key(arrays, ctx):
            k = rng.key(ctx.seed, Draw(ctx, draw.kind, draw.where).path)
            view(key, arrays)[...] = (k & WORD, k >> 64, rate)

        self._host_step(op, write_key, HostStep("dropout key"), [key], first=True)
        keep = self.backend.dropout_keep(math.prod(mask.shape))
        buffers = [(key.region, key.offset), (mask.region, mask.offset)]
        self._add(self.backend.launch_step(keep, buffers), Launch(op.site, keep, buffers))
        self.launches += 1
        self.unfused += 1
        return mask

    # ---- replay ----
    def run(self, args: list[Value], ctx: CallContext) -> Value:
        if self.profile is not None:
            return self.profile.replay(self, args, ctx)
        arrays, regions = self.memory(self.input_arrays(args))
        for step, _ in self.segments:
            step(regions, arrays, ctx)
        return self.output(arrays)

    def input_arrays(self, args: list[Value]) -> list[np.ndarray]:
        """The arguments' leaves in their storage types, the replay's input regions."""
        leaves = [t for a, f in zip(args, self._flatteners, strict=True) for t in f(a)]
        last = self._taken or [None] * len(leaves)  # the last call's leaves taken as they were
        given = [t.data for t in leaves]
        if all(map(operator.is_, given, last)):  # every leaf the array the last call took
            return given
        inputs, taken = [], []
        for t, e, before in zip(leaves, self.elements, last, strict=True):
            data = t.data
            if data is before:  # the same array, stored already (a parameter given again)
                inputs.append(data)
            elif isinstance(data, Quantized):  # as the realization made them
                inputs.extend([data.ints, data.scales])
            else:
                inputs.append(np.ascontiguousarray(to_storage(data, e)))
            taken.append(data if inputs[-1] is data else None)
        self._taken = taken
        return inputs

    def memory(self, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], ctypes.Array]:
        """A free arena beside the inputs and constants: every region's array, and their
        addresses as a C array (a segment passes it to the replay runtime as it is). The
        constants' addresses are read once: a call reads only the arena's and the inputs'."""
        at = self._addresses(inputs)  # first: it lets go of the last call's inputs
        arena = self._free_arena()
        base = _address(arena)
        pad = -base % ALIGN
        arrays = [arena[pad:], *inputs, *self.consts]
        if self._const_addresses is None:
            self._const_addresses = [a.ctypes.data for a in self.consts]
        addresses = [base + pad, *at, *self._const_addresses]
        # the last call's C array where no address moved (the same arena and arguments): the
        # runtime only reads it, so calls may share it
        known = self._address_array
        if known is None or known[0] != addresses:
            known = self._address_array = (addresses, (ctypes.c_void_p * len(arrays))(*addresses))
        return arrays, known[1]

    def _addresses(self, inputs: list[np.ndarray]) -> list[int]:
        """The inputs' data addresses, the last call's where an input is the same array (a
        parameter given again, held since, so it cannot have moved). One attribute holds
        the last call's inputs and addresses, so concurrent calls read a matching pair."""
        last, known = self._last_inputs or (inputs, [None] * len(inputs))
        out = [
            k if a is b and k is not None else _address(a)
            for a, b, k in zip(inputs, last, known, strict=True)
        ]
        self._last_inputs = (inputs, out)
        return out

    def _free_arena(self) -> np.ndarray:
        """An arena no result of an earlier call lies over, else a new one (kept for later
        calls while fewer than KEPT_ARENAS are). A new arena's pages fault in on first
        touch, about 0.3 ms a megabyte: on the corpus GPT's 75 MB training step, a third of
        the step; a kept one is warm."""
        for arena in self._arenas:
            # referenced only by the list, `arena` and getrefcount's argument: no result
            # (whose arrays are views of it, holding it as their base) is alive
            if sys.getrefcount(arena) == 3:
                return arena
        arena = np.empty(self.arena + ALIGN, np.uint8)
        if len(self._arenas) < KEPT_ARENAS:
            self._arenas.append(arena)
        return arena

    def output(self, arrays: list[np.ndarray]) -> Value:
        """The entry's result over the replay's memory."""
        return _materialized(self.result, arrays)


def _address(a: np.ndarray) -> int:
    """An array's data address; through the buffer protocol, three times faster than
    `a.ctypes.data`, where the array is writable (an argument converted for the call)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only, or empty
        return a.ctypes.data


def _buffers(data: Buf | Quantized) -> list:
    """The buffers a value's data lies in: integer weights' two, else its own."""
    return [data.ints, data.scales] if isinstance(data, Quantized) else [data]


def _arena_refs(value) -> list[tuple[int, int]]:
    """The (region, offset) of every buffer a traced value holds."""
    if isinstance(value, Tensor):
        return [(b.region, b.offset) for b in _buffers(value.data) if isinstance(b, Buf)]
    items = value.values() if isinstance(value, dict) else value
    return [ref for item in items for ref in _arena_refs(item)]


def materialized(data: Buf | Quantized, arrays: list[np.ndarray]):
    """The array over a buffer's memory; integer weights as the values they stand for."""
    if isinstance(data, Quantized):
        ints, scales = view(data.ints, arrays), view(data.scales, arrays)
        return np.asarray(Quantized(ints, scales, data.bits, data.over, data.shape))
    return view(data, arrays)


def _materialized(value: Value, arrays: list[np.ndarray]) -> Value:
    if isinstance(value, Tensor):
        return Tensor(value.type, materialized(value.data, arrays))
    if isinstance(value, dict):
        return {k: _materialized(v, arrays) for k, v in value.items()}
    return tuple(_materialized(v, arrays) for v in value)
