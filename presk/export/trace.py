"""The MLIR backend's schedule of an entry, traced without compiling a kernel.

The export runs the host program as the MLIR backend does (presk/backends/schedule.py):
once, over symbolic buffers, recording each launch with its (region, offset) buffers and
each piece of host work. Region 0 is the arena, then the arguments' leaves (the
parameters first), then the constants. Nothing is compiled: the kernels are only named.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.backends.kernel import Kernels
from presk.backends.launch import LaunchPlans
from presk.backends.schedule import GatherCheck, Launch, Schedule, StackLayers
from presk.core.program import read_host_program
from presk.errors import UsageError
from presk.kernel.machine import MACHINES
from presk.kernel.weights import quant_inputs


@dataclass(frozen=True)
class Kernel:
    """A kernel as a launch plan reads it (presk/backends/launch.py), never compiled."""

    name: str
    kind: str
    elements: list[str]  # buffer element types, the output last
    ops: int
    split: int  # the trip count of its outer loop, run whole: [0, split)
    quant: dict  # integer-weight inputs (presk/kernel/weights.py)


def _kernel(f) -> Kernel:
    args = list(f.regions[0].blocks[0].arguments)[:-2]  # the buffers, then lo, hi
    attrs = f.attributes
    return Kernel(
        attrs["sym_name"].value,
        attrs["psk_kernel.kernel"].value,
        [str(a.type.element_type) for a in args],
        attrs["psk_kernel.ops"].value if "psk_kernel.ops" in attrs else 1,
        attrs["psk_kernel.split"].value,
        quant_inputs(f),
    )


class _Tracer:
    """A schedule's `Tracer` (presk/backends/schedule.py) that compiles nothing: the
    program, the realization, each launch's plan and kernel. A launch step is never run,
    and no launch joins a segment (a segment would build the replay runtime); the entry
    is traced in forward mode, where dropout draws no mask."""

    def __init__(self, program, module, realization):
        self.program = program
        self.realization = realization
        self.machine = MACHINES[realization.default]
        self.kernels = Kernels(module, _kernel)
        self.plans = LaunchPlans(self.kernels.__getitem__)

    def launch_step(self, kernel, buffers):
        return None

    def in_segment(self, kernel) -> bool:
        return False

    def segment_step(self, launches):
        raise AssertionError("the C export's trace joins no launch to a segment")

    def copy(self, nbytes: int) -> None:  # layers are stacked by a host step the export reads
        return None

    def dropout_keep(self, elements: int):
        raise AssertionError("the C export traces forward mode, where dropout draws no mask")


def trace(kernels_module, realization, entry: str | None = None) -> Schedule:
    """The schedule of the entry of a kernel-stage module (lowered in place to nothing
    further), in forward mode."""
    program = read_host_program(kernels_module)
    backend = _Tracer(program, kernels_module, realization)
    return Schedule(backend, entry or program.entry, False)


def host_steps(schedule: Schedule) -> list[Launch | StackLayers | GatherCheck]:
    """The schedule's steps in order: launches, layers stacked and index checks, as the
    schedule labels them; any other host work (a sample, a conversion) refused (E0001) by
    name."""
    out = []
    for label in schedule.labels:
        if isinstance(label, Launch):
            out.append(label)
        elif label.detail is not None:
            out.append(label.detail)
        else:
            raise UsageError(f"the C export cannot run the host step `{label.what}` of this entry")
    return out
