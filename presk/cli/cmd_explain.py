"""presk explain: every decision of a solved realization with its reason, and a site
through every stage (presk/precision/explain.py, docs/precision.md section 7)."""

from __future__ import annotations

import json
import os
import sys

from presk import realize
from presk.cli.cmd_solve import add_solve_args, moves_path_of, solved
from presk.cli.flags import add_plan_arg, add_program_args
from presk.cli.programs import elaborate_args, plan_of
from presk.cli.recorded import apply_checkpoint
from presk.errors import UsageError
from presk.fileio import check_writable, write_atomic
from presk.precision import explain, explain_html

FORMATS = ("text", "json", "html")


def configure(p) -> None:
    add_program_args(p)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--realize",
        metavar="@R.json",
        help="the record presk solve wrote; its moves are read from R.moves.json beside it "
        "(without one, each type is the record's; with --precision, its bound and measured gap)",
    )
    add_solve_args(p, source, precision_required=False)  # --budget: solve, then explain
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), the same as a JSON document, or one self-contained HTML page "
        "with the source and every site's stages",
    )
    p.add_argument(
        "--site",
        metavar="S",
        help="one site (F/%%n) through every stage: its source line, PSK-Core op, kernel, "
        "affine loops, LLVM dialect and machine code",
    )
    add_plan_arg(p)
    p.add_argument("--out", metavar="FILE", help="write here instead of standard output")


def run(args) -> int:
    if args.out is not None:
        check_writable(args.out)  # before the solve and the compilations
    if args.weights:  # its --realize is the record explained
        apply_checkpoint(args, args.weights, realize=False)
    core, r, ex = _explained(args)
    if args.site is not None:
        _check_site(args.site, core)
        sites = [args.site]
    else:  # the page shows every stored value's stages, the text none
        sites = [d.key for d in ex.decisions if d.place] if args.format == "html" else []
    ex.stages = explain.site_stages(core, r, sites, plan_of(args)) if sites else {}
    if args.site is not None:
        ex.decisions = [d for d in ex.decisions if d.key == ex.stages[args.site].root]
    shown = _shown(ex, args.format)
    if args.out is None:
        sys.stdout.write(shown)
    else:
        write_atomic(args.out, shown)
    return 0


def _explained(args):
    """The entry, its realization and their explanation: from a record and the moves
    file beside it, if there is one, and its bound and measured gap over `--precision`'s
    envelope if given; or from a solve under `--budget`."""
    if args.realize is None:
        if args.precision is None:
            raise UsageError("--budget needs --precision ENV.json, the envelope to solve on")
        core, solution, _ = solved(args)
        return core, solution.realization, explain.explain_solution(core, solution)
    if not args.realize.startswith("@"):
        raise UsageError(
            f"--realize {args.realize}: explain reads a record presk solve wrote, @R.json"
        )
    r = realize.read(args.realize)
    moves_file = moves_path_of(args.realize[1:])
    if not os.path.lexists(moves_file):  # a record written by hand or by another tool
        moves_file = None
    moves = explain.read_moves(moves_file) if moves_file is not None else None
    core = elaborate_args(args)
    ex = explain.explain(core, r, moves, args.realize, moves_file)
    if args.precision is not None:
        ex.checked = explain.checked(core, r, args.precision, args.measure)
    return core, r, ex


def _check_site(site: str, core) -> None:
    """Refuse (E0001) a site no compute op of the entry has."""
    sites = explain.compute_sites(core)
    if site not in sites:
        shown = ", ".join(sites[:12]) + (f", … ({len(sites)} in all)" if len(sites) > 12 else "")
        raise UsageError(f"--site {site!r}: no such site (sites: {shown})")


def _shown(ex: explain.Explanation, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(explain.document(ex), indent=1, ensure_ascii=False) + "\n"
    if fmt == "html":
        return explain_html.page(ex)
    return explain.text(ex)
