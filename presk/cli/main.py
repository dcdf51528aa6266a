"""presk: compile and run PSK programs, measured against the exact reference.

Each command lives in its own module of `presk.cli` and is listed in COMMANDS; a
command module defines `HELP`, `configure(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import importlib
import sys

from presk import __version__
from presk.cli.common import ArgParser, run_cli

# The commands, in the order `presk --help` lists them.
COMMANDS: tuple[str, ...] = (
    "run",
    "train",
    "eval",
    "data",
    "dump",
    "bench",
    "plan",
    "quantize",
    "params",
)


def _parser() -> ArgParser:
    p = ArgParser(prog="presk", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"presk {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgParser)
    for name in COMMANDS:
        module = importlib.import_module(f"presk.cli.cmd_{name}")
        cp = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(cp)
        cp.set_defaults(run=module.run)
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
