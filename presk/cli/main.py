"""presk: compile and run PSK programs, measured against the exact reference.

Each command lives in its own module of `presk.cli`, named in COMMANDS with its help; a
command module defines `configure(parser)` and `run(args) -> int`, and is imported only
when its command is chosen.
"""

from __future__ import annotations

import importlib
import sys

from presk import __version__
from presk.cli.common import ArgParser, run_cli

# The commands and their help, in the order `presk --help` lists them.
COMMANDS: dict[str, str] = {
    "run": "run an entry on the exact reference (--backend interp) or the kernels, "
    "and print its output",
    "train": "train an entry's parameters with AdamW, on the reference or a native backend",
    "eval": "the mean loss of an entry over the validation windows of a data file",
    "generate": "continue a prompt with a model's logits, a token at a time (docs/generate.md)",
    "serve": "keep a model compiled and answer generation requests over local HTTP",
    "entries": "list a program's entries: each one's consts, arguments, result and dims",
    "data": "make a token-window data file (.psk.d) from text files",
    "import": "an ONNX graph as a PSK program (model.psk) and its weights (params.safetensors), "
    "its shape arithmetic folded at the --dim sizes (docs/import.md)",
    "export": "write an entry as a C99 program (model.c, model.h, a Makefile) through MLIR's "
    "EmitC, with its parameters in model.bin",
    "dump": "show a program at a stage: its syntax tree (ast), PSK-Core (core), its kernels "
    "(kernel), the kernels as affine loops (affine) or in the LLVM dialect (llvm); or where "
    "precision matters, each value's ‖∂L/∂v‖₁ (sensitivity)",
    "bench": "time an entry (or one training step) on each backend: medians and ratios",
    "plan": "choose a layout for each contraction and softmax nest of an entry with the cost "
    "model; write a plan",
    "quantize": "list an entry's parameter paths and shapes, the names a realization's quant takes",
    "params": "write an entry's parameters (initial, or from --weights) to an .npz or "
    ".safetensors file",
    "calibrate": "measure an entry's magnitude envelope (--precision) on the exact reference "
    "over samples, or one training step's gap under each realization (--step)",
    "check": "bound an entry's distance to its exact value under a realization (--precision)",
    "solve": "choose the cheapest realization inside an error budget (--precision, or a "
    "training step's with --step), measured "
    "on the exact reference",
    "explain": "why a solved realization is what it is: every decision with its reason, and a "
    "site through every stage down to machine code",
    "bisect": "run a realization beside the exact reference and name the sites where its gap grew",
    "margins": "the exact model's margins on held-out windows, the budget on the logits an "
    "accuracy target asks, and the decisions a realization changes",
}


class CommandParser(ArgParser):
    """A command's parser, which imports its module and takes its flags only when the
    command is chosen: the command modules load MLIR (a second), which `presk --help`
    and `presk --version` have no need of."""

    def __init__(self, *args, command: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.command = command
        self.configured = False

    def parse_known_args(self, args=None, namespace=None):
        if not self.configured:
            module = importlib.import_module(f"presk.cli.cmd_{self.command}")
            module.configure(self)
            self.set_defaults(run=module.run)
            self.configured = True
        return super().parse_known_args(args, namespace)


def _parser() -> ArgParser:
    p = ArgParser(prog="presk", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"presk {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for name, help_text in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text, command=name)
    return p


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.run(args)


def entry() -> None:
    sys.exit(run_cli(main))
