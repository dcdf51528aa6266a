"""presk-opt: run pass pipelines over MLIR text, with presk's dialects and passes.

Like upstream `mlir-opt`, but presk's Python passes (under `presk/passes/`) and upstream
passes mix in one `--pass-pipeline`, and `psk`/`psk_kernel` are loaded from IRDL.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile

from mlir import ir

from presk import __version__
from presk.cli.common import ArgParser, run_cli
from presk.errors import IRError, PreskError, source_error
from presk.fileio import read_text, too_deep, write_atomic
from presk.ir.context import new_context
from presk.ir.diagnostics import ir_error
from presk.passes import registry
from presk.pipeline import parse_pipeline
from presk.toolchain import upstream_passes

SPLIT_MARKER = re.compile(r"^// -----.*$", re.MULTILINE)
# What presk-opt reads: a large model's IR is a few megabytes.
MAX_INPUT_BYTES = 64 << 20
# Bracket nesting: presk's own IR nests about 16 deep, MLIR's parser crashes at thousands.
MAX_NESTING = 256
# A string (or its unterminated start), a comment, the arrows and `>=` whose `>` closes
# nothing (what is not ASCII, outside strings a parse error to come, too_deep blanks).
_NOT_BRACKETS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|>=')


def _parser() -> ArgParser:
    p = ArgParser(prog="presk-opt", description=__doc__.splitlines()[0])
    p.add_argument(
        "input", nargs="?", default="-", help="the .mlir file to read ('-' or nothing: stdin)"
    )
    p.add_argument(
        "--pass-pipeline",
        default="",
        metavar="PIPELINE",
        help="passes to run, e.g. 'builtin.module(psk-verify,canonicalize)'",
    )
    p.add_argument(
        "--list-passes",
        action="store_true",
        help="list presk's passes with their options and defaults, and upstream passes, then exit",
    )
    p.add_argument(
        "--print-ir-after-all", action="store_true", help="print the IR after every pass to stderr"
    )
    p.add_argument(
        "--print-ir-before-all",
        action="store_true",
        help="print the IR before every pass to stderr",
    )
    p.add_argument(
        "--print-ir-after",
        metavar="NAME",
        action="append",
        default=[],
        help="print the IR after each run of pass NAME to stderr (repeatable)",
    )
    p.add_argument(
        "--split-input-file",
        action="store_true",
        help="process each chunk between '// -----' lines on its own",
    )
    p.add_argument(
        "--mlir-print-op-generic", action="store_true", help="print every op in generic form"
    )
    p.add_argument(
        "-o", dest="output", metavar="FILE", help="write the result to FILE (default stdout)"
    )
    p.add_argument("--version", action="version", version=f"presk-opt {__version__}")
    return p


def list_passes() -> str:
    """presk's passes, each with its options (`psk-tile{m=2 n=16}`) and their defaults,
    as `mlir-opt --help` lists a pass's; then upstream's passes."""
    lines = ["presk passes:"]
    for name, cls in registry().items():
        lines.append(f"  {name:<32} {cls.description}")
        for option, typ, default in cls.options():
            spelled = f"--{option}=<{'string' if typ == 'str' else typ}>"
            lines.append(f"    {spelled:<30} (default {_shown(default)})")
    lines.append("upstream MLIR passes:")
    for name, desc in upstream_passes():
        lines.append(f"  {name:<32} {desc}")
    return "\n".join(lines) + "\n"


def _shown(default) -> str:
    """An option's default as a pipeline spells it: `true`, `8`, `IJ`, `""` when empty."""
    if isinstance(default, bool):
        return str(default).lower()
    return str(default) if default != "" else '""'


def read_input(path: str) -> tuple[str, str]:
    """(the text, its name in errors) of the input, `-` being stdin: UTF-8 of at most
    MAX_INPUT_BYTES (E0002), its brackets nested at most MAX_NESTING deep (E1004)."""
    display = "<stdin>" if path == "-" else path
    stream = sys.stdin.buffer if path == "-" else None
    text = read_text(display, MAX_INPUT_BYTES, stream)
    # MLIR's parser recurses in C++ once a level and overflows the stack (a signal, not an
    # error) at a few thousand, so the text is measured before it is handed over.
    offset = too_deep(text, "{}()[]<>", MAX_NESTING, _NOT_BRACKETS)
    if offset is not None:
        line = text.count("\n", 0, offset) + 1
        col = offset - (text.rfind("\n", 0, offset) + 1) + 1
        message = f"MLIR nested deeper than {MAX_NESTING} levels"
        raise source_error(IRError, "E1004", message, display, text, line, col)
    return text, display


def _chunks(text: str, split: bool) -> list[tuple[str, int]]:
    """(chunk text, line offset of its first line) for each input chunk."""
    if not split:
        return [(text, 0)]
    out, offset, pos = [], 0, 0
    for m in SPLIT_MARKER.finditer(text):
        out.append((text[pos : m.start()], offset))
        offset += text[pos : m.end()].count("\n")
        pos = m.end()
    out.append((text[pos:], offset))
    return out


def _print_tree_dumps(tree: str, names: list[str]) -> None:
    """Print the per-pass dumps of `tree` (from tree_printing_dir_path) for passes `names`."""
    dumps = []
    for root, _dirs, files in os.walk(tree):
        for f in files:
            order = tuple(int(x) for x in re.findall(r"(\d+)_", f))
            dumps.append((order, root, os.path.join(root, f)))
    for _order, _root, path in sorted(dumps):
        with open(path) as fh:
            body = fh.read()
        header = body.split("\n", 1)[0]
        if any(f"({n})" in header for n in names):
            sys.stderr.write(body)
    sys.stderr.flush()


def process_chunk(
    ctx: ir.Context, text: str, display: str, offset: int, full_text: str, args
) -> str:
    try:
        module = ir.Module.parse(text, ctx)
    except ir.MLIRError as e:
        raise ir_error(e, display, offset, full_text) from None
    with ctx, ir.Location.unknown():
        pm = parse_pipeline(args.pass_pipeline).pass_manager(ctx) if args.pass_pipeline else None
        tree = None
        if pm is not None and (args.print_ir_after_all or args.print_ir_before_all):
            pm.enable_ir_printing(
                print_before_all=args.print_ir_before_all, print_after_all=args.print_ir_after_all
            )
        elif pm is not None and args.print_ir_after:
            tree = tempfile.mkdtemp(prefix="presk-opt-ir-")
            pm.enable_ir_printing(print_after_all=True, tree_printing_dir_path=tree)
        if pm is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pm.run(module.operation)
            except ir.MLIRError as e:
                raise ir_error(e, display, offset, full_text) from None
            finally:
                if tree is not None:
                    _print_tree_dumps(tree, args.print_ir_after)
                    shutil.rmtree(tree, ignore_errors=True)
    asm = module.operation.get_asm(print_generic_op_form=args.mlir_print_op_generic)
    return asm if asm.endswith("\n") else asm + "\n"


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0
    text, display = read_input(args.input)
    ctx = new_context()
    outputs, failed = [], False
    for chunk, offset in _chunks(text, args.split_input_file):
        try:
            outputs.append(process_chunk(ctx, chunk, display, offset, text, args))
        except PreskError as e:
            if not args.split_input_file:
                raise
            print(e.render(), file=sys.stderr)
            failed = True
    result = "// -----\n".join(outputs)
    if args.output:
        write_atomic(args.output, result)
    else:
        sys.stdout.write(result)
    return 1 if failed else 0


def entry() -> None:
    sys.exit(run_cli(main))
