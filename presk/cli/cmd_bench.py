"""presk bench: the median time of an entry (or of a training step) natively (the mlir
backend), or on each backend `--backends` names."""

from __future__ import annotations

import atexit
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from presk import backends
from presk import realize as realizations
from presk.backends.breakdown import Profile
from presk.backends.native import Compiler
from presk.cli.common import seed_number
from presk.cli.flags import (
    RECORDED_HELP,
    WEIGHTS_HELP,
    Defaulted,
    add_plan_arg,
    add_program_args,
    add_weights_arg,
    reference_bits,
)
from presk.cli.programs import elaborate_args, load_program
from presk.cli.recorded import apply_checkpoint
from presk.constants import MAX_BITS
from presk.errors import RealizationError, UsageError
from presk.fileio import check_writable
from presk.ir.ops import module_launches, string_attr
from presk.kernel.contraction import Layout, check, read_nest
from presk.kernel.cost import Target, milliseconds, predict
from presk.kernel.machine import MACHINES, TYPES
from presk.kernel.planner import candidates, choose, plan_entry
from presk.kernel.relayout import contraction_kernels
from presk.precision import profile
from presk.progress import Progress
from presk.timing import timed
from presk.toolchain import check_threads


def configure(p) -> None:
    add_program_args(p, file_optional=True)  # --calibrate times kernels of its own
    p.add_argument("--repeat", type=int, default=5, help="timed calls a backend (default 5)")
    p.add_argument(
        "--backends",
        metavar="B,…",
        help=f"the backends to time, the first the baseline: {', '.join(backends.names())} "
        f"(default {backends.names(native=True)[0]}; the others only on request)",
    )
    p.add_argument(
        "--realize",
        default=Defaulted("f64"),
        metavar="R,…",
        help="the realizations to time the kernel and mlir backends under, a row each: "
        "f64, f32, bf16 or @R.json (default: a --weights checkpoint's, else f64)",
    )
    p.add_argument(
        "--bits",
        type=reference_bits,
        default=256,
        help=f"precision of the reference in bits, 2 to {MAX_BITS} (default 256)",
    )
    p.add_argument(
        "--threads", metavar="N", help="worker threads of the mlir backend (default the cores)"
    )
    p.add_argument("--seed", type=seed_number, default=0, help="seed of the inputs and parameters")
    add_weights_arg(p, WEIGHTS_HELP + RECORDED_HELP)
    p.add_argument(
        "--train-step",
        action="store_true",
        help="time one training step of the entry (loss, gradient, AdamW) instead of a call",
    )
    add_plan_arg(p)
    p.add_argument(
        "--lanes",
        action="store_true",
        help="also time each machine row with every contraction in vector lanes (+lanes rows)",
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help="time every point of one nest's layout space on the mlir backend instead",
    )
    p.add_argument(
        "--nest",
        metavar="SITE",
        help="the nest --sweep measures (default: the one the cost model finds slowest)",
    )
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="where one call's (or step's) time goes on the mlir backend instead: each "
        "kernel site, and the host's parts outside the kernels",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="fit this machine's roofline per machine type instead, from timed kernels "
        "of its own, and write it to --out (what presk solve --profile reads)",
    )
    p.add_argument("--out", metavar="P.json", help="where --calibrate writes the profile")
    p.add_argument("--format", choices=("text", "json"), default="text")


@dataclass
class Row:
    backend: str
    realize: str | None  # None for the reference
    runs: list[float]  # ms
    compile: dict = field(default_factory=dict)
    variant: str = ""  # "+lanes"

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def label(self, bits: int) -> str:
        if self.realize is None:
            return f"{self.backend} ({bits} bits)"
        return f"{self.backend} {self.realize}{' ' + self.variant if self.variant else ''}"


def _listed(text: str, allowed, flag: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise UsageError(f"{flag} {text}: choose from {', '.join(allowed)}")
    return items


def _compile_times(backend) -> dict:
    """Each kernel's compile time with an empty cache (cold) and from it (warm), in a
    cache of its own, so the user's is neither read nor filled."""
    kernels = {name: f for name, f in backend.kernel_ops.items() if name in backend.kernels}
    with (
        tempfile.TemporaryDirectory(prefix="presk-bench-") as tmp,
        Progress("timing compiles", 2 * len(kernels)) as progress,
    ):
        per = {}
        for phase in ("cold", "warm"):
            compiler = Compiler(Path(tmp))
            for name, f in kernels.items():
                n = len(backend.kernels[name].elements)
                per.setdefault(name, {})[f"{phase}_ms"] = compiler.compile(f, n).seconds * 1e3
                progress.advance()
    return {
        "kernels": len(per),
        "cold_s": sum(k["cold_ms"] for k in per.values()) / 1e3,
        "warm_s": sum(k["warm_ms"] for k in per.values()) / 1e3,
        "per_kernel": per,
    }


def run(args) -> int:
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat}: time at least one call")
    if args.sweep and args.breakdown:
        raise UsageError("--sweep and --breakdown are two different measurements: give one")
    timed_program = args.sweep or args.breakdown or args.file is not None or args.weights
    if args.calibrate and timed_program:
        raise UsageError(
            "--calibrate times kernels of its own: drop FILE, --weights, --sweep and --breakdown"
        )
    if args.calibrate:
        return _calibrate(args)
    if args.file is None:
        raise UsageError("presk bench times a program: give FILE (or --calibrate)")
    if args.weights:
        apply_checkpoint(args, args.weights)
    if args.sweep:
        return _sweep(args)
    if args.breakdown:
        return _breakdown(args)
    native = backends.names(native=True)[0]
    names = _listed(args.backends or native, backends.names(), "--backends")
    types = [t.strip() for t in args.realize.split(",") if t.strip()]
    for t in types:
        realizations.read(t)  # E7001 before any timing
    threads = check_threads(args.threads) if args.threads is not None else None
    program = load_program(args.file)
    rows = []
    for name in names:
        spec = backends.backend(name)
        for realize in [None] if spec.exact else types:
            variants = [("", args.plan)]
            if args.lanes and realize is not None:
                variants.append(("+lanes", _lanes_plan(args, program, realize)))
            for variant, plan in variants:
                core = elaborate_args(args, program, train_step=args.train_step)
                compiled = core.compile(name, realize or "f64", plan, threads, args.bits)
                runs = timed(compiled.drawn(args.seed, args.weights), args.repeat)
                row = Row(name, realize, runs, variant=variant)
                if spec.native and not variant:
                    row.compile = _compile_times(compiled.backend)
                rows.append(row)
    sys.stdout.write(_json(rows, args) if args.format == "json" else _text(rows, args))
    return 0


def _lanes_plan(args, program, realize: str) -> str:
    """A plan putting every contraction nest that can take them in vector lanes of the
    register's width, its other fields the default's (written to a temporary file)."""
    r = realizations.read(realize)
    module = elaborate_args(args, program, train_step=args.train_step).lower(r).module
    width = Target.host().vector_bytes // MACHINES[r.default].arith.itemsize
    kernels = contraction_kernels(module.operation)
    by_site: dict[str, list] = {}
    for op in module_launches(module.operation):
        if op.attributes["kernel"].value in kernels:
            f = kernels[op.attributes["kernel"].value]
            by_site.setdefault(string_attr(op, "psk.site"), []).append(f)
    layout = {}
    for site, fs in by_site.items():
        try:
            for f in fs:
                lay = Layout.read(f.attributes["psk_kernel.layout"])
                check(read_nest(f)[0], replace(lay, lanes=width), string_attr(f, "psk_kernel.type"))
        except RealizationError:
            continue
        layout[site] = {"lanes": width}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, prefix="presk-lanes-") as f:
        json.dump({"layout": layout}, f)
    atexit.register(Path(f.name).unlink, missing_ok=True)
    return f.name


def _what(args) -> str:
    what = f"one training step of {args.entry}" if args.train_step else args.entry
    dims = " ".join(args.dim or [])
    return f"{what}{', ' + dims if dims else ''}"


def _text(rows: list[Row], args) -> str:
    base = rows[0]
    width = max(len(r.label(args.bits)) for r in rows) + 2
    lines = [
        f"{_what(args)}: median of {args.repeat} calls",
        f"{'backend':<{width}}{'median ms':>12}{'vs ' + base.label(args.bits):>{width + 6}}",
    ]
    for r in rows:
        ratio = base.median / r.median if r.median else float("inf")
        lines.append(f"{r.label(args.bits):<{width}}{r.median:>12.3f}{ratio:>{width + 5}.1f}×")
    for r in rows:
        c = r.compile
        if c:
            cold = statistics.median(k["cold_ms"] for k in c["per_kernel"].values())
            warm = statistics.median(k["warm_ms"] for k in c["per_kernel"].values())
            lines.append(
                f"{r.label(args.bits)}: {c['kernels']} kernels compiled in {c['cold_s']:.2f} s "
                f"with an empty cache (median {cold:.0f} ms a kernel), loaded from it in "
                f"{c['warm_s'] * 1e3:.0f} ms (median {warm:.1f} ms)"
            )
    return "\n".join(lines) + "\n"


def _json(rows: list[Row], args) -> str:
    several = {r.backend for r in rows if sum(x.backend == r.backend for x in rows) > 1}
    out = {}
    for r in rows:
        key = f"{r.backend}:{r.realize}" if r.backend in several else r.backend
        key += r.variant
        entry = {"median_ms": r.median, "runs": r.runs}
        entry.update({"bits": args.bits} if r.realize is None else {"realize": r.realize})
        if r.compile:
            entry["compile"] = r.compile
        out[key] = entry
    return json.dumps(out, indent=2) + "\n"


def _sweep(args) -> int:
    """Every point of one nest's layout space, timed on the mlir backend."""
    realize = _listed(args.realize, TYPES, "--realize")[0]
    threads = check_threads(args.threads) if args.threads is not None else None
    program = load_program(args.file)

    core = elaborate_args(args, program, train_step=args.train_step)
    target = Target.host()
    module = core.lower(realize).module  # held: its ops live while it does
    choices = {c.site: c for c in choose(module.operation, realize, target)}
    if not choices:
        raise UsageError(f"{args.entry} has no contraction to sweep")
    site = args.nest or max(choices.values(), key=lambda c: c.default_cycles).site
    if site not in choices:
        raise UsageError(f"--nest {site}: the contraction nests are {', '.join(sorted(choices))}")
    nest = choices[site].nest
    element = MACHINES[realize].arith.itemsize
    layouts = list(candidates(nest, realize, target))
    results = []
    # the table is sorted by time, so it prints once every point is measured; till then,
    # the count of points measured
    with Progress("sweep: layout", len(layouts)) as progress:
        for layout in layouts:
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump({"realize": realize, "layout": {site: plan_entry(layout)}}, f)
            try:
                compiled = core.lower(realize, f.name).compile("mlir", threads)
            finally:
                Path(f.name).unlink()
            runs = timed(compiled.drawn(args.seed, args.weights), args.repeat)
            predicted = milliseconds(predict(nest, layout, element, target))
            results.append((statistics.median(runs), runs, predicted, layout))
            progress.advance()
    results.sort(key=lambda r: r[0])
    if args.format == "json":
        points = [
            {"layout": plan_entry(lay), "median_ms": med, "runs": runs, "predicted_ms": pred}
            for med, runs, pred, lay in results
        ]
        sys.stdout.write(json.dumps({"nest": site, "points": points}, indent=2) + "\n")
        return 0
    pick = choices[site].layout
    print(f"{site}: {len(results)} points, median of {args.repeat} calls of {_what(args)}")
    print(f"{'median ms':>10} {'predicted':>10}  layout")
    for med, _, pred, lay in results:
        mark = "  <- presk plan" if lay == pick else ""
        print(f"{med:10.3f} {pred:10.3f}  {json.dumps(plan_entry(lay))}{mark}")
    return 0


def _calibrate(args) -> int:
    """This machine's roofline per machine type, written as a profile."""
    if args.out is None:
        raise UsageError("--calibrate writes a profile: give --out P.json")
    check_writable(args.out)
    threads = check_threads(args.threads) if args.threads is not None else None
    fitted = profile.calibrate(args.repeat, threads)
    profile.write_profile(fitted, args.out)
    for t, r in fitted.types.items():
        print(
            f"{t:>5}: λ {r.latency * 1e6:.1f} µs, π {r.work_rate:.3g} work/s, "
            f"β {r.byte_rate:.3g} B/s"
        )
    for pair, c in fitted.conversions.items():
        print(f"{pair:>9}: {c.fixed * 1e6:.1f} µs + {c.element * 1e9:.2f} ns an element")
    print(f"wrote {args.out} ({fitted.cpu}, {fitted.threads} threads, {fitted.date})")
    return 0


def _breakdown(args) -> int:
    """Each part of a call's time on the mlir backend, per realization: the parts of the
    median of --repeat profiled calls, beside the median of --repeat calls untimed inside."""
    if args.backends is not None or args.lanes:
        raise UsageError(
            "--breakdown times the mlir backend at the given layouts alone: "
            "drop --backends and --lanes"
        )
    types = [t.strip() for t in args.realize.split(",") if t.strip()]
    for t in types:
        realizations.read(t)  # E7001 before any timing
    threads = check_threads(args.threads) if args.threads is not None else None
    core = elaborate_args(args, load_program(args.file), train_step=args.train_step)
    tables = []
    for realize in types:
        compiled = core.lower(realize, args.plan).compile("mlir", threads)
        call = compiled.drawn(args.seed, args.weights)
        call()  # traces the schedule
        (schedule,) = compiled.backend.schedules.values()
        profile, totals = Profile(), []
        for _ in range(args.repeat):  # alternately, so both see the machine's same load
            totals += timed(call, 1)
            schedule.profile = profile
            call()
            schedule.profile = None
        total = statistics.median(totals)
        tables.append((realize, compiled.backend.workers.threads, total, profile.parts(schedule)))
    if args.format == "json":
        out = {
            realize: {
                "threads": n,
                "total_ms": total,
                "parts": [vars(part) for part in parts],
            }
            for realize, n, total, parts in tables
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(_breakdown_text(args, *table) for table in tables))
    return 0


def _breakdown_text(args, realize: str, threads: int, total: float, parts) -> str:
    width = max(len(p.name) for p in parts) + 2
    lines = [
        f"{_what(args)}: mlir {realize}, {threads} threads, the median of {args.repeat} calls",
        f"{'part':<{width}}{'kind':<8}{'count':>7}{'ms':>10}{'share':>8}",
    ]
    for p in parts:
        count = str(p.count) if p.count else ""
        share = f"{100 * p.ms / total:.1f}%" if total else ""
        lines.append(f"{p.name:<{width}}{p.kind:<8}{count:>7}{p.ms:>10.3f}{share:>8}")
    kernels = sum(p.ms for p in parts if p.kind == "kernel")
    lines += [
        f"{'in the kernels':<{width + 15}}{kernels:>10.3f}",
        f"{'sum of the parts':<{width + 15}}{sum(p.ms for p in parts):>10.3f}",
        f"{'a call, untimed inside':<{width + 15}}{total:>10.3f}",
    ]
    return "\n".join(lines) + "\n"
