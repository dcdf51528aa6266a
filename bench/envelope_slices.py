"""Is the magnitude envelope a property of the program, or of the samples it was measured
on? Calibrates disjoint slices of a data file's samples on the exact reference (as
`presk calibrate --precision --first I --samples N` would) and compares each later slice's
envelope with the first's, site by site: the worst magnitude ratio max(a/b, b/a) over
the sites nonzero in both, and where it is; how many sites that compares, how many are
identically zero in both slices, and how many are zero in only one. Prints the date,
the machine and a markdown table, a row a later slice.

    python bench/envelope_slices.py corpus/nlp/05_gpt.psk --entry loss \\
        --const D=32 --const H=2 --const L=2 --dim B=1 --dim T=32 \\
        --data /tmp/lic32.psk.d [--slices 0-7,8-15,64-71] [--bits 128] [--workers N]

The data file comes from `presk data corpus/nlp/data/*.txt --window T --out FILE.psk.d`.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from presk.front.bindings import parse_assignments  # noqa: E402
from presk.precision.calibrate import Job, calibrate, on_processes, serially  # noqa: E402
from presk.precision.envelope import Envelope, Meta, program_digest  # noqa: E402
from presk.precision.samples import sample_arguments  # noqa: E402
from presk.toolchain import default_threads, machine  # noqa: E402


@dataclass(frozen=True)
class Comparison:
    """A later slice's envelope against the first's."""

    worst: float  # max over the sites nonzero in both of max(a/b, b/a); 1 if there is none
    where: str | None  # the site of the worst ratio
    compared: int  # sites nonzero in both
    zero_in_both: int
    zero_in_one: int


def ratio(a: float, b: float) -> float:
    """max(a/b, b/a) of two positive magnitudes (1 for equal ones, two ∞ included)."""
    return 1.0 if a == b else max(a / b, b / a)


def compare(first: Envelope, later: Envelope) -> Comparison:
    """Site by site, the magnitudes of `later` against those of `first` (both measured on
    the same program, entry and bindings, so on the same sites)."""
    worst, where, compared, zero_in_both, zero_in_one = 1.0, None, 0, 0, 0
    for site, s in first.sites.items():
        a, b = s.magnitude, later.sites[site].magnitude
        if a == 0 and b == 0:
            zero_in_both += 1
        elif a == 0 or b == 0:
            zero_in_one += 1
        else:
            compared += 1
            r = ratio(a, b)
            if r > worst:
                worst, where = r, site
    return Comparison(worst, where, compared, zero_in_both, zero_in_one)


def parse_slices(text: str) -> list[range]:
    """`0-7,8-15,64-71` as sample ranges, at least two and pairwise disjoint."""
    slices = []
    for item in text.split(","):
        first, _, last = item.partition("-")
        try:
            r = range(int(first), int(last or first) + 1)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not FIRST-LAST") from None
        if r.start < 0 or not r:
            raise argparse.ArgumentTypeError(f"{item!r} is not a range of sample indices")
        slices.append(r)
    if len(slices) < 2:
        raise argparse.ArgumentTypeError("give at least two slices to compare")
    ordered = sorted(slices, key=lambda r: r.start)
    if any(a.stop > b.start for a, b in zip(ordered, ordered[1:], strict=False)):
        raise argparse.ArgumentTypeError(f"the slices {text} overlap")
    return slices


def span(r: range) -> str:
    return f"{r.start}–{r[-1]}"


def table(slices: list[range], comparisons: list[Comparison]) -> str:
    """The markdown table: a row a later slice, against the first."""
    rows = [
        "| Slice | Against the first | Worst ratio | Where | Compared | Zero in both "
        "| Zero in one |",
        "|---|---|---|---|---|---|---|",
    ]
    for r, c in zip(slices[1:], comparisons, strict=True):
        rows.append(
            f"| samples {span(r)} | {span(slices[0])} | {c.worst:.3f}× | {c.where or '—'} "
            f"| {c.compared} | {c.zero_in_both} | {c.zero_in_one} |"
        )
    return "\n".join(rows) + "\n"


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="the .psk program")
    ap.add_argument("--entry", required=True, help="a loss taking (tokens, targets)")
    ap.add_argument("--dim", action="append", metavar="NAME=N", help="bind a dim (repeatable)")
    ap.add_argument("--const", action="append", metavar="NAME=N", help="bind a const")
    ap.add_argument("--data", required=True, metavar="FILE.psk.d", help="from `presk data`")
    ap.add_argument(
        "--slices",
        type=parse_slices,
        default=parse_slices("0-7,8-15,64-71"),
        metavar="A-B,C-D,…",
        help="disjoint sample ranges, the first the one compared against (default 0-7,8-15,64-71)",
    )
    ap.add_argument("--bits", type=int, default=128, help="the reference's bits (default 128)")
    ap.add_argument("--workers", type=int, help="local processes a slice's samples are spread over")
    return ap


def slice_metas(program: presk.Program, core: presk.Core, opts) -> list[Meta]:
    """What `presk calibrate` would record for each slice (initial parameters, seed 0)."""
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    common = dict(
        program=program_digest(program),
        entry=core.entry,
        dims=dict(sorted(core.dims.items())),
        consts=dict(sorted(core.consts.items())),
        weights=None,
        data=opts.data,
        seed=0,
        bits=opts.bits,
        grain="site",
        date=date,
    )
    metas = [Meta(**common, first=r.start, samples=len(r)) for r in opts.slices]
    for m in metas:  # a slice past the data's windows refused (E3011) before anything runs
        sample_arguments(core, m, m.first + m.samples - 1)
    return metas


def main(argv: list[str] | None = None) -> int:
    opts = arguments().parse_args(argv)
    program = presk.load(opts.file)
    dims = parse_assignments(opts.dim, "--dim", "E3004")
    consts = parse_assignments(opts.const, "--const", "E3007")
    core = program.elaborate(opts.entry, dims, consts)
    metas = slice_metas(program, core, opts)
    workers = opts.workers or default_threads()
    spread = serially if workers == 1 else on_processes(workers)
    print(f"{metas[0].date}, {machine()}, workers: {workers}")
    bound = " ".join(f"{k}={v}" for k, v in (metas[0].consts | metas[0].dims).items())
    print(f"{opts.file} `{core.entry}` {bound}, {opts.data}, {opts.bits} bits")
    envelopes = []
    for r, meta in zip(opts.slices, metas, strict=True):
        start = time.perf_counter()
        envelopes.append(calibrate(Job(program.ast.text, opts.file, "store", meta), spread))
        seconds = time.perf_counter() - start
        print(f"samples {span(r)}: {len(envelopes[-1].sites)} sites in {seconds:.1f} s")
    print()
    print(table(opts.slices, [compare(envelopes[0], e) for e in envelopes[1:]]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
