"""presk entries: every entry of a program, as `--entry` takes it, with its module's
consts, its arguments and result, and the dims they use (what `--const` and `--dim`
bind). The program is read and checked; no entry is elaborated."""

from __future__ import annotations

import json
import sys

from presk.cli.programs import load_program
from presk.front.bindings import Signature, entry_signatures


def configure(p) -> None:
    p.add_argument("file", help="the .psk program")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: an entry a line; json: each entry's fields",
    )


def run(args) -> int:
    signatures = entry_signatures(load_program(args.file).ast)
    if args.format == "json":
        entries = [_json(s) for s in signatures]
        sys.stdout.write(
            json.dumps({"file": args.file, "entries": entries}, indent=1, ensure_ascii=False) + "\n"
        )
    else:
        for s in signatures:
            print(s.text() + ("   (prelude)" if s.prelude else ""))
    return 0


def _json(s: Signature) -> dict:
    return {
        "entry": s.entry,
        "module": s.module,
        "consts": list(s.consts),
        "function": s.function,
        "arguments": [{"name": n, "type": t} for n, t in s.arguments],
        "result": s.result,
        "alias": s.alias,
        "dims": [{"name": d, "default": n} for d, n in s.dims],
        "prelude": s.prelude,
    }
