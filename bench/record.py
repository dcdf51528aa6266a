"""The figures of record: this machine's benchmarks run, and its section of
docs/performance.md rewritten with them.

The page holds one section a machine kind (what LLVM calls the CPU: `znver5`,
`emeraldrapids`, …) between `<!-- record: KIND -->` and `<!-- /record -->`: a heading
naming the machine (presk.toolchain.machine()), then a block a benchmark between
`<!-- bench: NAME -->` and `<!-- /bench -->`, each with its command, its date and its
figures. This script runs the bench scripts below, each in a process of its own with
`--json`, renders their blocks and rewrites this machine's section in place: the blocks
of the benchmarks that ran are replaced, the others kept, and a missing section is added
after the last one. Other machines' sections and everything outside the markers stay as
they are. The page is written atomically (presk.fileio), and what changed is printed.

    python bench/record.py [--only peers,gemm,compile,reference] [--dry-run]
                           [--page docs/performance.md]

`--dry-run` prints the section instead of writing it. `peers` needs PyTorch (`pip install
-e .[peers]`): without it its block says so, unless the section already holds its
figures, which are then kept. The four take tens of minutes on a 2-core machine (the
layout sweeps and the course GPT most of it): run them where no other job loads it.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from presk.cli.common import ArgParser, run_cli  # noqa: E402
from presk.errors import PreskError, Span, UsageError  # noqa: E402
from presk.fileio import check_writable, read_text, write_atomic  # noqa: E402
from presk.jsontext import first_violation, parse  # noqa: E402
from presk.toolchain import host_cpu, machine  # noqa: E402

PAGE = REPO / "docs" / "performance.md"
MAX_PAGE = 1 << 20  # bytes of the page read
MAX_DEPTH = 8  # of a bench script's JSON


class RecordError(PreskError):
    """A page whose markers cannot be followed, or a benchmark that failed."""

    code = "E0008"


# Schemas of the bench scripts' --json output (only the fields the blocks read).
def _record(optional: dict | None = None, **fields) -> dict:
    """An object with `fields`, and perhaps the `optional` ones."""
    properties = {**fields, **(optional or {})}
    return {"type": "object", "required": list(fields), "properties": properties}


def _array(items: dict) -> dict:
    return {"type": "array", "items": items}


_TEXT, _COUNT = {"type": "string"}, {"type": "integer", "minimum": 1}
_TIME = {"type": "number", "exclusiveMinimum": 0}  # a duration, or a throughput
# A layout as a plan file writes it (presk.kernel.planner.plan_entry).
_LAYOUT = {
    "type": "object",
    "required": ["form"],
    "dependentRequired": {"tile": ["kblock", "order", "pack"]},
}
_CONTRACT = _record(
    best=_TIME,
    best_layout=_LAYOUT,
    pick=_TIME,
    pick_layout=_LAYOUT,
    turns=_record(presk=_TIME, numpy=_TIME),
)
_FIRST_CALL = _array(_record(first=_TIME, lower=_TIME, kernels=_COUNT))


@dataclass(frozen=True)
class Benchmark:
    title: str
    argv: tuple[str, ...]  # the script and its flags, from the repository's root
    schema: dict  # of the script's --json output
    render: Callable[[dict], list[str]]  # the block's figures from that output
    needs: str = ""  # a module the script imports, else it is not measured
    absent: str = ""  # what the block says then

    @property
    def command(self) -> str:
        return "python " + " ".join(self.argv)


def duration(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    digits = 0 if ms >= 100 else 1 if ms >= 10 else 2 if ms >= 1 else 3
    return f"{ms:.{digits}f} ms"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


PEER_MODELS = {"tiny": "tiny MiniGPT", "corpus": "corpus GPT", "course": "course GPT"}
# each peer of bench/peers.py: its column's heading, and its time's field in a row
PEERS = {
    "eager": ("PyTorch eager", "torch_ms"),
    "compile": ("torch.compile", "compile_ms"),
    "onnxruntime": ("onnxruntime", "onnxruntime_ms"),
}
_PEER_NAMES = {"type": "array", "items": {"enum": list(PEERS)}, "contains": {"const": "eager"}}


def peers_figures(f: dict) -> list[str]:
    wait = f["omp_wait_policy"]
    threading = "its default threading" if wait == "unset" else f"OMP_WAIT_POLICY={wait}"
    peers = f["peers"]
    cells = {(r["model"], r["entry"]): r for r in f["rows"] if r["type"] == "f32"}
    rows = []
    for key, name in PEER_MODELS.items():
        for entry in ("forward", "training step"):
            r = cells.get((key, entry))
            if r is None:
                rows.append([name, entry, "not measured", *(["—"] * len(peers))])
                continue
            ours = r["presk_ms"]
            row = [name, entry, duration(ours)]
            for peer in peers:
                theirs = r.get(PEERS[peer][1])
                row.append(f"{ours / theirs:.2f} ({duration(theirs)})" if theirs else "—")
            rows.append(row)
    versions = f"PyTorch {f['torch']} (CPU, {threading})"
    if "onnxruntime" in f:
        versions += f", onnxruntime {f['onnxruntime']}"
    return [
        f"f32, presk's time at its default plan (`{f['plan']}`) over each peer's (its time "
        f"in brackets), {f['threads']} threads each, medians of {f['repeat']} calls; under 1, "
        f"presk is faster. {versions}:",
        "",
        *table(["model", "entry", "presk", *(PEERS[p][0] for p in peers)], rows),
    ]


def layout_text(layout: dict) -> str:
    """A plan file's layout as the page writes it: `[4, 64] JI, k-block 128, pack b`."""
    if "tile" not in layout:
        return layout["form"]
    m, n = layout["tile"]
    kblock = f", k-block {layout['kblock']}" if layout["kblock"] else ""
    pack = f", pack {layout['pack']}" if layout["pack"] != "none" else ""
    return f"[{m}, {n}] {layout['order']}{kblock}{pack}"


def gemm_figures(f: dict) -> list[str]:
    rows = []
    for product in f["products"]:
        for contract, c in product["contracts"].items():
            kind = "exact" if contract == "none" else f'fused (`"contract": "{contract}"`)'
            turns = c["turns"]
            pick = layout_text(c["pick_layout"])
            if c["pick_layout"] != c["best_layout"]:
                pick += f", {c['best'] / c['pick']:.2f}× from the best"
            rows.append(
                [
                    f"{product['n']}³ {product['type']}, {kind}",
                    f"{turns['presk']:.1f}",
                    f"{turns['numpy']:.1f}",
                    f"{turns['presk'] / turns['numpy']:.2f}",
                    layout_text(c["best_layout"]),
                    pick,
                ]
            )
    header = ["product", "presk GFLOP/s", "numpy", "of numpy", "the sweep's best point"]
    return [
        f"mlir, {f['threads']} threads; the best three points of each sweep of the layout "
        "space timed again in turns with numpy's matmul (OpenBLAS), best of "
        f"{f['repeat']} calls a turn:",
        "",
        *table([*header, "`presk plan`'s pick"], rows),
    ]


def compile_figures(f: dict) -> list[str]:
    def spread(values: list[float]) -> list[str]:
        return [duration(min(values) * 1e3), duration(statistics.median(values) * 1e3)]

    lowering = [r["lower"] for r in f["cold"] + f["warm"]]
    return [
        f"The tiny MiniGPT's training step in {f['realize']} ({f['cold'][0]['kernels']} "
        "kernels), its first call in a new process, the clock from the call (after the "
        f"imports and the lowering) to the step done; {len(f['cold'])} runs:",
        "",
        *table(
            ["first call", "min", "median"],
            [
                ["cold: an empty kernel cache", *spread([r["first"] for r in f["cold"]])],
                ["warm: the cache the cold run filled", *spread([r["first"] for r in f["warm"]])],
                ["the lowering before it, not counted", *spread(lowering)],
            ],
        ),
    ]


def reference_figures(f: dict) -> list[str]:
    def cell(run: dict) -> str:
        if "refused" in run:
            return "refused (E8005)" if "E8005" in run["refused"] else "refused"
        return f"{duration(run['seconds'] * 1000)}, {run['peak_mib']:.0f} MiB"

    rows = []
    for row in f["rows"]:
        for bits in (64, 256):
            interp, ball = row["runs"][f"interp@{bits}"], row["runs"][f"ball@{bits}"]
            both = "seconds" in interp and "seconds" in ball
            speedup = f"{interp['seconds'] / ball['seconds']:.1f}×" if both else "—"
            rows.append([f"{row['case']} (`{row['entry']}`)", str(bits), cell(interp), cell(ball),
                         speedup])  # fmt: skip
    return [
        "The MPFR interpreter and the ball backend, one call each in a fresh process "
        "(seconds, the process's peak resident memory):",
        "",
        *table(["case", "bits", "interp", "ball", "speedup"], rows),
    ]


BENCHMARKS = {
    "peers": Benchmark(
        "Against PyTorch and onnxruntime",
        ("bench/peers.py", "--models", "tiny,corpus,course", "--types", "f32", "--repeat", "10"),
        _record(
            {"onnxruntime": _TEXT},
            torch=_TEXT,
            threads=_COUNT,
            repeat=_COUNT,
            omp_wait_policy=_TEXT,
            plan=_TEXT,
            peers=_PEER_NAMES,
            rows=_array(
                _record(
                    {"compile_ms": _TIME, "onnxruntime_ms": _TIME},
                    model=_TEXT,
                    entry=_TEXT,
                    type=_TEXT,
                    presk_ms=_TIME,
                    torch_ms=_TIME,
                )
            ),
        ),
        peers_figures,
        needs="torch",
        absent="PyTorch absent (`pip install -e .[peers]`)",
    ),
    "gemm": Benchmark(
        "A 1024³ product in the layout space",
        ("bench/gemm.py", "--sizes", "1024", "--types", "f32", "--contract", "fma"),
        _record(
            threads=_COUNT,
            repeat=_COUNT,
            products=_array(
                _record(n=_COUNT, type=_TEXT, contracts={"additionalProperties": _CONTRACT})
            ),
        ),
        gemm_figures,
    ),
    "compile": Benchmark(
        "Compile time",
        ("bench/compile_time.py", "--repeat", "5"),
        _record(realize=_TEXT, cold=_FIRST_CALL, warm=_FIRST_CALL),
        compile_figures,
    ),
    "reference": Benchmark(
        "The exact reference",
        ("bench/reference.py",),
        _record(
            small={"type": "boolean"},
            rows=_array(
                _record(
                    case=_TEXT,
                    entry=_TEXT,
                    runs={
                        "additionalProperties": {
                            "type": "object",
                            "oneOf": [
                                _record(seconds=_TIME, peak_mib=_TIME, before_mib=_TIME),
                                _record(refused=_TEXT),
                            ],
                        }
                    },
                )
            ),
        ),
        reference_figures,
    ),
}


@dataclass(frozen=True)
class Block:
    name: str
    text: str  # between its markers
    measured: bool = True  # else it says why not, and replaces no block


def block(name: str, figures: dict, date: str, load: tuple[float, float]) -> Block:
    """A benchmark's block from its script's figures."""
    bench = BENCHMARKS[name]
    lines = [
        f"### {bench.title}",
        "",
        f"`{bench.command}`, {date}, load average {load[0]:.1f}–{load[1]:.1f}.",
        *bench.render(figures),
    ]
    return Block(name, "\n".join(lines))


def unmeasured(name: str) -> Block:
    bench = BENCHMARKS[name]
    return Block(name, f"### {bench.title}\n\nNot measured: {bench.absent}.", measured=False)


def measure(name: str) -> Block:
    """Run a benchmark's script with `--json` (its report shows on stderr) and render its
    block; a script that fails stops the run before anything is written."""
    bench = BENCHMARKS[name]
    if bench.needs and importlib.util.find_spec(bench.needs) is None:
        return unmeasured(name)
    print(f"{name}: {bench.command}", file=sys.stderr, flush=True)
    before = os.getloadavg()[0]
    done = subprocess.run(
        [sys.executable, *bench.argv, "--json"], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    after = os.getloadavg()[0]
    script = bench.argv[0]
    if done.returncode != 0:
        raise RecordError(f"{script} failed (exit status {done.returncode}); nothing written")
    last = done.stdout.strip().rpartition("\n")[2]
    try:
        figures = parse(last, MAX_DEPTH)
    except ValueError as e:
        raise RecordError(f"{script} --json: {e}; nothing written") from None
    wrong = first_violation(figures, bench.schema)
    if wrong is not None:
        raise RecordError(f"{script} --json: {wrong.message}; nothing written")
    return block(name, figures, datetime.date.today().isoformat(), (before, after))


_MARKER = re.compile(r"<!-- (/?)(record|bench)(?:: ([\w.-]+))? -->")
_MARKERISH = re.compile(r"<!--\s*/?\s*(record|bench)\b")


@dataclass
class Section:
    kind: str
    start: int  # its opening marker's line, 0-based
    end: int = -1  # its closing marker's line
    heading: str = ""
    blocks: dict[str, str] = field(default_factory=dict)  # each block's text by benchmark


def sections(text: str, path: str) -> list[Section]:
    """The page's machine sections, its markers checked: each alone on its line, a
    section closed before the next opens, blocks only inside one and closed in it, one
    section a kind and one block a benchmark in each."""
    found: dict[str, Section] = {}
    section: Section | None = None
    opened: tuple[str, int, list[str]] | None = None  # the open block: name, line, lines

    def refuse(i: int, message: str) -> RecordError:
        line = text.splitlines()[i]
        col = len(line) - len(line.lstrip()) + 1
        return RecordError(message, span=Span(path, i + 1, col), source_line=line)

    for i, line in enumerate(text.splitlines()):
        m = _MARKER.fullmatch(line.strip())
        if m is None:
            if _MARKERISH.match(line.strip()):
                raise refuse(
                    i,
                    "a malformed marker: the markers are `<!-- record: KIND -->`, "
                    "`<!-- /record -->`, `<!-- bench: NAME -->` and `<!-- /bench -->`, "
                    "each alone on its line",
                )
            if opened:
                opened[2].append(line)
            elif section and line.startswith("## ") and not section.heading:
                section.heading = line[3:].strip()
            continue
        closing, what, name = m.groups()
        if bool(closing) == bool(name):
            form = f"`<!-- /{what} -->` names nothing" if closing else f"`{what}` needs a name"
            raise refuse(i, f"a malformed marker: {form}")
        if opened and (what, closing) != ("bench", "/"):
            raise refuse(i, f"the block `{opened[0]}` of line {opened[1] + 1} is not closed")
        if what == "record" and not closing:
            if section:
                raise refuse(i, f"the section `{section.kind}` of line {section.start + 1} is open")
            if name in found:
                raise refuse(
                    i, f"a second section `{name}` (the first: line {found[name].start + 1})"
                )
            section = found[name] = Section(name, i)
        elif what == "record":
            if not section:
                raise refuse(i, "`<!-- /record -->` closes no section")
            section.end, section = i, None
        elif not closing:
            if not section:
                raise refuse(i, f"the block `{name}` is outside any machine's section")
            if name not in BENCHMARKS:
                raise refuse(i, f"no benchmark `{name}` (of {', '.join(BENCHMARKS)})")
            if name in section.blocks:
                raise refuse(i, f"a second block `{name}` in the section `{section.kind}`")
            opened = (name, i, [])
        else:
            if not opened:
                raise refuse(i, "`<!-- /bench -->` closes no block")
            section.blocks[opened[0]] = "\n".join(opened[2]).strip("\n")
            opened = None
    if opened:
        raise refuse(opened[1], f"the block `{opened[0]}` is never closed")
    if section:
        raise refuse(section.start, f"the section `{section.kind}` is never closed")
    return list(found.values())


def section_text(kind: str, heading: str, blocks: dict[str, str]) -> str:
    parts = [f"<!-- record: {kind} -->\n## {heading}\n"]
    parts += [
        f"\n<!-- bench: {name} -->\n{text}\n<!-- /bench -->\n" for name, text in blocks.items()
    ]
    return "".join(parts) + "<!-- /record -->\n"


def rewrite(
    text: str, path: str, kind: str, heading: str, new: list[Block]
) -> tuple[str, str, list[str]]:
    """The page with `kind`'s section made of its blocks, `new` replacing those of their
    benchmarks (a block not measured only where there is none), in BENCHMARKS' order;
    also the section's text and a line a change."""
    found = {s.kind: s for s in sections(text, path)}
    old = found.get(kind)
    blocks = dict(old.blocks) if old else {}
    changes = [] if old else [f"section `{kind}` added"]
    if old and old.heading != heading:
        changes.append(f"heading `{old.heading}` now `{heading}`: kept blocks are the former's")
    for b in new:
        before = blocks.get(b.name)
        if before is not None and not b.measured:
            changes.append(f"{b.name}: not measured, the figures there kept")
            continue
        blocks[b.name] = b.text
        change = "added" if before is None else "unchanged" if before == b.text else "replaced"
        changes.append(f"{b.name}: {change}{'' if b.measured else ' (not measured)'}")
    ran = {b.name for b in new}
    changes += [f"{name}: kept (not run)" for name in blocks if name not in ran]
    ordered = {name: blocks[name] for name in BENCHMARKS if name in blocks}
    body = section_text(kind, heading, ordered)
    lines = text.splitlines(keepends=True)
    if old:
        lines[old.start : old.end + 1] = [body]
    elif found:
        last = max(s.end for s in found.values())
        lines[last + 1 : last + 1] = ["\n", body]
    else:
        lines += ["\n" if not text or text.endswith("\n") else "\n\n", body]
    return "".join(lines), body, changes


def main(argv: list[str]) -> int:
    ap = ArgParser(prog="bench/record.py", description=__doc__.splitlines()[0])
    ap.add_argument("--only", help=f"the benchmarks to run, of {','.join(BENCHMARKS)} (all)")
    ap.add_argument("--dry-run", action="store_true", help="print the section, write nothing")
    ap.add_argument("--page", default=str(PAGE), help="the page (docs/performance.md)")
    opts = ap.parse_args(argv)
    names = list(dict.fromkeys(opts.only.split(","))) if opts.only else list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise UsageError(f"--only {unknown[0]}: no such benchmark (of {', '.join(BENCHMARKS)})")
    # A page that cannot be rewritten is refused before the benchmarks' minutes, and read
    # again after them, so that edits made meanwhile are kept.
    sections(read_text(opts.page, MAX_PAGE), opts.page)
    if not opts.dry_run:
        check_writable(opts.page)
    kind, heading = host_cpu()[0], machine()
    new = [measure(name) for name in names]
    page, body, changes = rewrite(read_text(opts.page, MAX_PAGE), opts.page, kind, heading, new)
    if opts.dry_run:
        print(body, end="")
    else:
        write_atomic(opts.page, page)
    print(f"{opts.page}, the section `{kind}` ({heading}):")
    for change in changes:
        print(f"  {change}")
    print("not written (--dry-run)" if opts.dry_run else f"wrote {opts.page}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
