"""presk dump: show a program at a stage of the pipeline."""

from __future__ import annotations

import sys

from presk import backends, stages
from presk.backends.host import CallContext
from presk.cli.common import seed_number
from presk.cli.programs import add_plan_arg, add_program_args, elaborate_args, plan_of, read_program
from presk.errors import UsageError
from presk.front.unparse import program as unparse
from presk.ir.core import python_value
from presk.ir.core_text import core_text
from presk.ir.program import read_program as read_core
from presk.kernel.text import kernel_text
from presk.runtime.inputs import arguments, parameters
from presk.toolchain import vector_bytes

HELP = (
    "show a program at a stage: its syntax tree (ast), PSK-Core (core), its kernels "
    "(kernel), the kernels as affine loops (affine) or in the LLVM dialect (llvm)"
)
STAGES = ("ast", "core", "kernel", "affine", "llvm")


def configure(p) -> None:
    add_program_args(p)
    p.add_argument(
        "--stage", choices=STAGES, default="core", help="the stage to show (default core)"
    )
    p.add_argument(
        "--format",
        choices=("text", "mlir"),
        default="text",
        help="readable text, or the MLIR module presk-opt reads",
    )
    p.add_argument(
        "--realize",
        default="f64",
        metavar="T|@R.json",
        help="the machine type of the kernels (--stage kernel, affine, llvm; default f64)",
    )
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the run --stage kernel makes (default 0)",
    )
    add_plan_arg(p)


def run(args) -> int:
    if args.stage == "ast" and args.format == "mlir":
        raise UsageError("--format mlir shows an elaborated module, not --stage ast (text only)")
    program = read_program(args.file)
    if args.stage == "ast":
        sys.stdout.write(unparse(program))
        return 0
    elaborated = elaborate_args(args, program)
    module = elaborated.module
    if args.stage == "kernel":
        text = kernel_dump(module, args.realize, args.seed, plan_of(args))
        if args.format == "text":
            sys.stdout.write(text)
            return 0
    if args.stage in ("affine", "llvm"):
        sys.stdout.write(lowered_dump(module, args.stage, args.realize, args.format, plan_of(args)))
        return 0
    if args.format == "mlir":
        sys.stdout.write(str(module))
    else:
        sys.stdout.write(core_text(module))
    return 0


def kernel_dump(module, realize: str, seed: int, plan: str | None = None) -> str:
    """The kernels an entry launches, in the order of their first launch: the module is
    lowered (in place) and the entry run on drawn inputs, as the seed's dump does."""
    program = read_core(module)
    params = parameters(program, seed, None)
    args = ([params] if params is not None else []) + arguments(program, seed, None)
    backend = backends.make("kernel", module, realize=realize, plan=plan)
    backend.call(args, CallContext(seed=seed))
    saved = backend.unfused - backend.launches
    pct = round(100 * saved / backend.unfused) if backend.unfused else 0
    lines = [
        f"-- {len(backend.launched)} kernels, {backend.launches} launches, "
        f"{backend.realization.label}",
        f"-- fusion: {backend.unfused} launches without it, {saved} saved ({pct}%)",
    ]
    lines += [kernel_text(backend.kernel_ops[name]) for name in backend.launched]
    return "\n".join(lines) + "\n"


def lowered_dump(module, stage: str, realize: str, fmt: str, plan: str | None = None) -> str:
    """The kernels at the affine or LLVM stage, headed by the pipeline that gives them from
    the kernel stage (`presk dump --stage kernel --format mlir`), for presk-opt. Text
    shows the kernels alone, mlir the whole module (at the affine stage, the host too)."""
    width = vector_bytes()
    backends.make("kernel", module, realize=realize, plan=plan)  # lowered, realized, planned
    realize = python_value(module.operation.attributes["psk_kernel.type"])
    stages.affine(module, width)
    pipelines = [stages.affine_pipeline(width)]
    if stage == "llvm":
        stages.llvm(module)
        pipelines.append(stages.LLVM_PIPELINE)
    lines = [f"// {stage} stage, {realize}, from the kernel stage by:"]
    lines += [f"//   presk-opt --pass-pipeline='{p}'" for p in pipelines]
    if fmt == "mlir":
        return "\n".join(lines) + "\n" + str(module)
    body = [str(f) for f in module.body.operations if _is_kernel(f.operation)]
    return "\n".join(lines + body) + "\n"


def _is_kernel(op) -> bool:
    return "psk_kernel.kernel" in op.attributes or op.name == "llvm.func"
