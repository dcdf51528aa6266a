"""presk run: run an entry on a backend and print or save its output."""

from __future__ import annotations

import sys

from presk.backends.host import CallContext
from presk.cli.common import seed_number
from presk.cli.flags import RECORDED_HELP, WEIGHTS_HELP, add_program_args, add_weights_arg
from presk.cli.programs import add_backend_args, compile_args, elaborate_args
from presk.cli.recorded import apply_checkpoint
from presk.fileio import check_writable
from presk.runtime import output
from presk.runtime.inputs import arguments, parameters
from presk.runtime.synth import entry_arguments
from presk.train.evaluate import backend_words


def configure(p) -> None:
    add_program_args(p, default_entry="apply")
    add_backend_args(p)
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of initial parameters and drawn inputs (default 0)",
    )
    add_weights_arg(p, WEIGHTS_HELP + RECORDED_HELP)
    p.add_argument(
        "--inputs",
        metavar="IN.npz|IN.safetensors",
        help="arguments from a file of arrays (one per leaf) instead of drawn",
    )
    p.add_argument(
        "--out", metavar="OUT.npz", help="also write the output as float64 arrays to OUT.npz"
    )
    p.add_argument(
        "--save-inputs",
        metavar="IN.npz",
        help="also write the arguments the entry was given (drawn or read) to IN.npz, in the "
        "form --inputs reads",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the output with its axes; json: every element as a decimal string",
    )


def run(args) -> int:
    for path in (args.out, args.save_inputs):
        if path:
            check_writable(path)  # before the run, which may take long
    if args.weights:
        apply_checkpoint(args, args.weights)
    core = elaborate_args(args)
    program = core.view
    params = parameters(program, args.seed, args.weights)
    inputs = arguments(program, args.seed, args.inputs)
    if args.save_inputs:
        names = [n for n, _ in entry_arguments(program, program.entry_function)]
        output.write_npz(args.save_inputs, dict(zip(names, inputs, strict=True)))
    backend = compile_args(args, core).backend
    result = backend.call(
        ([params] if params is not None else []) + inputs, CallContext(seed=args.seed)
    )
    if args.out:
        output.write_npz(args.out, result)
    if args.format == "json":
        header = {"entry": program.entry, "backend": backend.spec.name, "seed": args.seed}
        if backend.spec.exact:
            header["bits"] = args.bits
        else:  # the type the kernels run in, a plan's if it names one
            header["realize"] = backend.realization.label
        sys.stdout.write(output.json_text(result, header, args.bits))
    else:
        sys.stdout.write(output.text(result))
        # which backend ran it, beside the output (stdout keeps the value alone)
        sys.stderr.write(f"-- {program.entry} on {backend_words(backend)}\n")
    return 0
