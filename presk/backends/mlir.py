"""The MLIR backend: the kernel backend's launch plans, the kernels compiled.

The module is lowered to the affine stage (`stages.affine`); its kernels are compiled to
native code on an entry's first call (presk/backends/native.py, through the on-disk
cache), which traces its schedule: the seconds before a training run's first step. The
trace first asks for the kernels' bundle, one library holding them all; if the cache does
not hold it and enough kernels are cold (`native.pays_to_bundle`), it compiles them
together into one, else each cold one at its first launch. It shows its progress over
the kernels it compiles (presk/progress.py).
Calls replay a schedule of the host program (presk/backends/schedule.py), traced once an
entry, each launch in it the `LaunchPlan` the kernel evaluator runs
(presk/backends/launch.py). A kernel whose outermost loop may be split
(`psk_kernel.split`) and whose work (`psk_kernel.work`, in scalar operations) is at
least `split_work` runs on the worker threads. Each run of launches with no host step
between them is a segment, replayed in C by one native call, its split launches on the
replay runtime's native workers (presk/backends/replay.py).
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from presk import plans, stages
from presk.backends import REGISTRY, tuning
from presk.backends.host import CallContext
from presk.backends.kernel import Kernels
from presk.backends.launch import LaunchPlans
from presk.backends.native import (
    Compiler,
    Native,
    kernel_source,
    pays_to_bundle,
    shared_compiler,
)
from presk.backends.replay import Segment, replay_for
from presk.backends.schedule import Launch, Schedule
from presk.backends.workers import SPLIT_WORK, Workers, replay_pieces, split_workers
from presk.core.program import HostProgram, read_host_program
from presk.kernel.machine import MACHINES, Machine
from presk.kernel.weights import quant_inputs
from presk.progress import Progress
from presk.quantize import realized_args
from presk.realize import Realization
from presk.toolchain import default_threads, vector_bytes

# A dropout draw's cost in scalar operations: a fourth of a Philox block's 20 multiplies
# and 40 other operations, for splitting it as a kernel is.
DRAW_WORK = 16


@dataclass
class Compiled:
    name: str
    kind: str
    elements: list[str]  # buffer element types, the output last
    ops: int  # the PSK-Core ops it computes
    split: int  # the trip count of its splittable loop, or 0
    work: int
    workers: int  # the workers its layout splits it over, or 0 (the backend's choice)
    native: Native
    quant: dict  # integer-weight inputs (presk/kernel/weights.py)


def _runtime_kernel(fn, name: str, elements: list[str], trips: int, work: float) -> Compiled:
    """A function of the replay runtime as a kernel (`name`: its file and kind) over a
    splittable loop of `trips`, each costing `work` scalar operations."""
    native = Native(fn, 0.0, True, None, fn.__name__)
    kind = name.split(".")[-1]
    return Compiled(name, kind, elements, 0, trips, int(trips * work), 0, native, {})


def _int(f, name: str, default: int | None = None) -> int:
    return f.attributes[name].value if name in f.attributes else default


class _Trace:
    """The kernels a trace may compile: those of the bundle, loaded or compiled together
    (`natives`); else each one's source, made once, and the sources the compiler does not
    hold (the cold ones), counted on `progress` as each is compiled."""

    def __init__(self, backend: MlirBackend, progress: Progress):
        compiler = backend.compiler
        made = backend.kernels.keys() | backend.natives.keys()
        ops = {n: f for n, f in backend.kernel_ops.items() if n not in made}
        self.natives = compiler.bundled(ops) if len(ops) > 1 else {}
        self.sources = {} if self.natives else {n: kernel_source(f) for n, f in ops.items()}
        self.cold = {t for t in self.sources.values() if not compiler.holds(t)}
        self.progress = progress
        progress.total = len(self.cold)
        if self.sources and pays_to_bundle(len(self.cold), len(set(self.sources.values()))):
            progress.total = len(ops)
            with _runtime_meanwhile(compiler):
                self.natives = compiler.bundle(ops, self.sources, progress.advance)
            self.cold = set()

    def compiled(self, text: str) -> None:
        if text in self.cold:
            self.cold.remove(text)
            self.progress.advance()


@contextmanager
def _runtime_meanwhile(compiler: Compiler):
    """The replay runtime loaded, or built, on a thread while the body runs: with an empty
    cache its `cc` runs beside LLVM instead of after it. Any failure is left to the
    schedule's own `replay_for`, which tries again and raises it."""

    def load():
        try:
            replay_for(compiler)
        except Exception:  # raised again, on the calling thread, by the schedule's call
            pass

    thread = threading.Thread(target=load, name="presk-replay-build", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off while a schedule is traced. The trace makes
    some 18 000 small objects, nearly all kept by the schedule, and the collections they
    set off walked the process's whole heap again and again: 30 ms of the tiny MiniGPT
    step's 80 ms warm first call. It makes no garbage that only a collection frees."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class MlirBackend:
    """The kernel backend's plans of its launches, run natively by a schedule an entry."""

    spec = REGISTRY["mlir"]

    def __init__(
        self,
        program: HostProgram,
        module,
        machine: Machine,
        realization: Realization | None = None,
        threads: int = 1,
        split_work: int = SPLIT_WORK,
        compiler: Compiler | None = None,
    ):
        self.program = program
        self.machine = machine
        self.realization = realization or Realization(default=machine.name)
        self.module = module  # owns the kernel ops below
        self.compiler = compiler or shared_compiler()
        self.kernels = Kernels(module, self._compiled)  # in first-use order
        self.kernel_ops = self.kernels.ops
        self.plans = LaunchPlans(self.kernels.__getitem__)
        self.workers = Workers(threads)
        self.split_work = split_work
        self.schedules: dict[tuple[str, bool], Schedule] = {}
        self.launches = 0
        self.unfused = 0  # the launches the same run would make without fusion
        self.natives: dict[str, Native] = {}  # by kernel name: those of its bundle, held
        self._trace: _Trace | None = None  # while a schedule is traced
        self._element_names: dict = {}  # by element type (`_element_name`)
        self.tuning: tuning.Tuning | None = None  # what a tuned plan measured, or read

    @classmethod
    def create(cls, module, realization: Realization, plan, bits, threads) -> MlirBackend:
        """Native code for a kernel-stage module: without a plan, its nests moved to the
        cost model's layouts for this machine (`auto`), and where the model was not fitted
        on this core to the fastest of its best points as measured (`tuned`,
        presk/backends/tuning.py); a tuned plan's measured likewise. Then code-generated
        for this machine's vectors (the affine stage) and compiled kernel by kernel as
        called."""
        threads = threads or default_threads()
        if plan is None:
            stages.layout_pipeline(plans.AUTO).run(module)
            plan = tuning.default_plan()
        tuned = None
        if plans.is_tuned(plan):
            tuned = tuning.tune(module, threads, shared_compiler(), plans.tuning_budget(plan))
        stages.affine(module, vector_bytes())
        machine = MACHINES[realization.default]
        backend = cls(read_host_program(module), module, machine, realization, threads)
        backend.tuning = tuned
        return backend

    def call(self, args, ctx: CallContext | None = None, entry: str | None = None):
        ctx = ctx or CallContext()
        key = (entry or self.program.entry, ctx.training)
        schedule = self.schedules.get(key)
        if schedule is None:
            with Progress("compiling kernels") as progress, _collector_paused():
                self._trace = _Trace(self, progress)
                self.natives.update(self._trace.natives)
                try:
                    schedule = self.schedules[key] = Schedule(self, *key)
                    schedule.segments  # noqa: B018  (the replay runtime loaded in the progress)
                finally:
                    self._trace = None
        out = schedule.run(realized_args(args, self.program, self.realization, entry, True), ctx)
        self.launches += schedule.launches
        self.unfused += schedule.unfused
        return out

    def _compiled(self, f) -> Compiled:
        buffers = list(f.regions[0].blocks[0].arguments)[:-2]
        elements = [self._element_name(a.type.element_type) for a in buffers]
        name = f.attributes["sym_name"].value
        native = self.natives.get(name)
        if native is None:
            text = self._trace.sources.get(name) if self._trace else None
            native = self.compiler.compile(f, len(elements), text)
            if self._trace:
                self._trace.compiled(text)
        return Compiled(
            name,
            f.attributes["psk_kernel.kernel"].value,
            elements,
            _int(f, "psk_kernel.ops", 1),
            _int(f, "psk_kernel.split"),
            _int(f, "psk_kernel.work"),
            _int(f, "psk_kernel.workers", 0),
            native,
            quant_inputs(f),
        )

    def _element_name(self, t) -> str:
        """An element type's name (`f32`), printed once a type: printing one through the
        bindings costs microseconds, and a step's 150 kernels have 600 buffers of a few
        types (types are unique in their context, so equal ones are one key)."""
        name = self._element_names.get(t)
        if name is None:
            name = self._element_names[t] = str(t)
        return name

    def launch_step(self, kernel: Compiled, buffers: list[tuple[int, int]]):
        """The schedule step that launches `kernel` on buffers given as (region, offset)."""
        fn, trips = kernel.native.fn, kernel.split
        workers = self._split_over(kernel)
        if workers is not None:
            run = workers.run

            def split(regions, arrays, ctx):
                run(fn, [regions[r] + o for r, o in buffers], trips)

            return split

        def launch(regions, arrays, ctx):
            fn(*[regions[r] + o for r, o in buffers], 0, trips)

        return launch

    def _split_over(self, kernel: Compiled) -> Workers | None:
        """The workers a launch of `kernel` is split over; None if it runs on one thread."""
        n = split_workers(
            kernel.split, kernel.work, kernel.workers, self.workers.threads, self.split_work
        )
        return Workers(n) if n > 1 else None

    def dropout_keep(self, elements: int) -> Compiled:
        """The replay runtime's dropout draw (presk/backends/draws.c) as a kernel of two
        buffers, the key and the mask, split over `elements` as a kernel's loop is."""
        keep = replay_for(self.compiler).dropout_keep
        return _runtime_kernel(keep, "draws.dropout_keep", ["u64", "i8"], elements, DRAW_WORK)

    def copy(self, nbytes: int) -> Compiled:
        """The replay runtime's copy of `nbytes` (presk/backends/replay.c) as a kernel of
        two buffers, the source and the destination, split over its bytes as a kernel's
        loop is (a word a scalar operation)."""
        copy = replay_for(self.compiler).copy
        return _runtime_kernel(copy, "replay.copy", ["u8", "u8"], nbytes, 1 / 8)

    def in_segment(self, kernel: Compiled) -> bool:
        """Whether a launch of `kernel` may run in a segment: with no more buffers than the
        replay runtime's steps take."""
        return len(kernel.elements) <= replay_for(self.compiler).buffers

    def segment_step(self, launches: list[Launch]) -> Segment:
        """The schedule step that runs `launches` (each `in_segment`) in one native call,
        each split over the threads `launch_step` would split it over (in more pieces,
        which they claim one at a time: `Workers.claimed`)."""
        return Segment(
            replay_for(self.compiler),
            [
                (x.kernel.native.fn, x.buffers, 0, x.kernel.split, *self.pieces(x.kernel))
                for x in launches
            ],
        )

    def pieces(self, kernel: Compiled) -> tuple[int, int]:
        """The pieces the replay runtime cuts a launch of `kernel` in, and the threads that
        claim them: (1, 1) if it runs on one thread."""
        workers = self._split_over(kernel)
        return replay_pieces(workers.threads if workers else 1, kernel.split)
