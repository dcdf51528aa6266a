"""presk quantize: the parameters a realization's `quant` (and `params`) may name
(`--list`), and a realization's gap to the exact reference split into what storing the
weights costs and what the arithmetic costs (`--realize`: presk/precision/quant_split.py)."""

from __future__ import annotations

from presk.cli.flags import add_program_args
from presk.cli.programs import add_sample_args, bindings, elaborate_args, load_program
from presk.errors import UsageError
from presk.ir.types import leaves
from presk.precision.quant_split import Gap, Split, sample, split
from presk.realize import read
from presk.train.loop import sci


def configure(p) -> None:
    add_program_args(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--list", action="store_true", help="print each parameter's path, axes and element count"
    )
    mode.add_argument(
        "--realize",
        metavar="T|@R.json",
        help="split this realization's gap to the exact reference into representation "
        "(the weights as stored) and arithmetic (the machine run)",
    )
    add_sample_args(p, "mlir")


def run(args) -> int:
    if args.realize is not None:
        return _split(args)
    if not args.list:
        raise UsageError("presk quantize: give --list (integer weights are chosen by --realize)")
    program = load_program(args.file)
    t = program.parameter_type(**bindings(args, program))
    if t is None:
        raise UsageError(f"{args.entry} is not a module's function: it has no parameters")
    for path, leaf in leaves(t):
        print(f"{path:<32} {leaf.text():<24} {leaf.size}")
    return 0


def _split(args) -> int:
    realization = read(args.realize)  # a bad record is refused before the program is read
    core = elaborate_args(args)
    s = sample(core, args.seed, args.weights, args.data)
    print(report(split(core, s, realization, args.backend, args.bits), args, core.entry))
    return 0


def report(found: Split, args, entry: str) -> str:
    """The split as a table: each gap absolute and relative to the output's magnitude,
    then the weights' bytes against f64's."""
    inputs = f"the first batch of {args.data}" if args.data else f"inputs drawn at seed {args.seed}"
    weights = args.weights or f"initialised at seed {args.seed}"
    ratio = found.f64_bytes / found.weight_bytes if found.weight_bytes else 0.0
    rows = [
        ("representation", found.representation, "exact on the stored weights vs exact"),
        ("arithmetic", found.arithmetic, f"{args.backend} vs exact on the stored weights"),
        ("total", found.total, f"{args.backend} vs exact"),
    ]
    return "\n".join(
        [
            f"presk quantize: `{entry}` under {args.realize} on {args.backend}, against the "
            f"exact reference at {args.bits} bits",
            f"weights {weights}; {inputs}",
            f"output magnitude (largest |element|): {sci(found.magnitude, 6)}",
            f"  {'':<16}{'absolute':<14}relative",
            *(f"  {name:<16}{_cells(gap)}{what}" for name, gap, what in rows),
            f"weights: {found.weight_bytes} bytes, {found.f64_bytes} in f64 ({ratio:.2f}x smaller)",
        ]
    )


def _cells(gap: Gap) -> str:
    return f"{sci(gap.absolute, 3):<14}{sci(gap.relative, 3):<14}"
