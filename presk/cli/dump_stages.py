"""`presk dump` at the stages after the syntax tree: PSK-Core, the kernels, the affine and
LLVM stages, and the sensitivity ranking (presk/cli/cmd_dump.py takes the flags)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from presk import stages
from presk.backends.kernel import kernels_of
from presk.cli.programs import elaborate_args, load_program, plan_of
from presk.core.program import HostProgram, read_host_program
from presk.ir.types import TupleType, leaves
from presk.kernel.text import kernel_text
from presk.precision import sensitivity
from presk.toolchain import vector_bytes


def run(args) -> int:
    """`presk dump` of every stage but the syntax tree."""
    program = load_program(args.file)
    if args.stage == "sensitivity":
        core = elaborate_args(args, program)
        found = sensitivity.sensitivities(
            core, args.seed, args.weights, args.bits, sweep=args.sweep
        )
        sys.stdout.write(sensitivity.text(found))
        return 0
    core = elaborate_args(args, program)
    if args.stage == "core":
        if args.format == "mlir":  # what the kernel stage's pipeline starts from
            stages.realize_attributes(core.module, args.realize)
        sys.stdout.write(core.as_text(mlir=args.format == "mlir"))
        return 0
    kernels = core.lower(args.realize, plan_of(args))
    label = kernels.realization.label
    pipeline = kernels.lowering.pipeline().text()
    if args.stage != "kernel":
        width = args.vector_bytes or vector_bytes()
        sys.stdout.write(lowered_dump(kernels, args.stage, args.format, width))
    elif args.format == "text":
        sys.stdout.write(kernel_dump(kernels.module, label, pipeline))
    else:
        header = _comments(_from_core("kernel", label, pipeline), "//")
        sys.stdout.write(header + kernels.as_text(mlir=True))
    return 0


def _from_core(stage: str, label: str, pipeline: str) -> list[str]:
    """The header naming the pipeline that gives a stage from
    `presk dump --stage core --format mlir` (run with the same flags)."""
    return [
        f"{stage} stage, {label}, from the core stage (presk dump --stage core --format mlir, "
        "the same flags) by:",
        f"  presk-opt --pass-pipeline='{pipeline}'",
    ]


def _comments(lines: list[str], mark: str) -> str:
    return "".join(f"{mark} {line}\n" for line in lines)


def kernel_dump(module, label: str, pipeline: str) -> str:
    """The kernels an entry launches, in the order of their first launch, headed by their
    counts (read from the host program: nothing runs) and the pipeline that gives them."""
    kernels = kernels_of(module)
    counted = count_launches(read_host_program(module), kernels)
    saved = counted.unfused - counted.launches
    pct = round(100 * saved / counted.unfused) if counted.unfused else 0
    head = [
        f"{len(counted.kernels)} kernels, {counted.launches} launches, {label}",
        f"fusion: {counted.unfused} launches without it, {saved} saved ({pct}%)",
        *_from_core("kernel", label, pipeline),
    ]
    body = [kernel_text(kernels[name]) for name in counted.kernels]
    return _comments(head, "--") + "\n".join(body) + "\n"


@dataclass
class Launches:
    """What one call of the entry launches, outside training (where dropout is the
    identity and launches nothing)."""

    kernels: list[str] = field(default_factory=list)  # in the order of their first launch
    launches: int = 0
    unfused: int = 0  # the launches the same call would make without fusion

    def add(self, program: HostProgram, name: str, ops: dict[str, int], times: int = 1) -> None:
        """Count the launches of host function `name`, called `times` times."""
        fn = program.functions[name]
        types = list(fn.arg_types) + [op.type for op in fn.ops]
        for op in fn.ops:
            if op.name == "psk_kernel.launch" and op.attrs.get("draw") != "dropout":
                kernel = op.attrs["kernel"]
                if kernel not in self.kernels:
                    self.kernels.append(kernel)
                self.launches += times
                self.unfused += times * ops[kernel]
            elif op.name == "func.call":
                self.add(program, op.callee, ops, times)
            elif op.name in ("psk.fold", "psk.fold_fwd", "psk.fold_bwd"):
                self.add(program, op.callee, ops, times * _layers(types[op.ins[0]]))


def _layers(stack) -> int:
    """The layers a fold runs: its stack's leading axis, or its residuals' count (fold_bwd)."""
    if isinstance(stack, TupleType):
        return len(stack.items)
    return leaves(stack)[0][1].shape[0]


def count_launches(program: HostProgram, kernels: dict) -> Launches:
    ops = {name: _ops(f) for name, f in kernels.items()}
    counted = Launches()
    counted.add(program, program.entry, ops)
    return counted


def _ops(kernel) -> int:
    """The PSK-Core ops a kernel fuses (1 unless fused)."""
    attrs = kernel.attributes
    return attrs["psk_kernel.ops"].value if "psk_kernel.ops" in attrs else 1


def lowered_dump(kernels, stage: str, fmt: str, width: int) -> str:
    """The kernels at the affine or LLVM stage for vectors of `width` bytes, headed by the
    pipeline that gives them from the kernel stage (`presk dump --stage kernel --format
    mlir`), for presk-opt. Text shows the kernels alone, mlir the whole module (at the
    affine stage, the host too)."""
    pipelines = [stages.affine_pipeline(width)] + (
        [stages.LLVM_PIPELINE] if stage == "llvm" else []
    )
    lines = [f"// {stage} stage, {kernels.realization.default}, from the kernel stage by:"]
    lines += [f"//   presk-opt --pass-pipeline='{p.text()}'" for p in pipelines]
    return "\n".join(lines) + "\n" + kernels.as_text(stage, fmt == "mlir", width)
