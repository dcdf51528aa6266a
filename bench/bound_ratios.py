"""bound/measured per model over the soundness cases of tests/test_precision_bound.py.

Each case (a conformance entry, a realization) is calibrated once a grain on the exact
reference (64 bits, two samples, as the test does), run on the kernel evaluator to measure
its gap, and bounded under every `--model`. Prints the date and the machine, a markdown
table of bound/measured a case, and the median, smallest and largest ratio a model (over
the cases whose measured gap is not 0).

    python bench/bound_ratios.py [--grain site|row|channel]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import test_precision_bound as cases  # noqa: E402

from presk.cli.main import main as presk  # noqa: E402
from presk.precision.bound import Propagation, measured_gap  # noqa: E402
from presk.precision.envelope import GRAINS, read_envelope  # noqa: E402
from presk.precision.rules import MODELS  # noqa: E402
from presk.toolchain import machine  # noqa: E402


def calibrated(name: str, grain: str, out: Path) -> str:
    """The envelope of a case's entry, as the soundness test calibrates it."""
    path, entry, dims, consts, _ = cases.ENTRIES[name]
    env = str(out / f"{name}.json")
    argv = ["calibrate", "--precision", str(REPO / path), "--entry", entry]
    argv += [*cases._flags(dims, consts), "--bits", "64", "--samples", "2", "--workers", "1"]
    with contextlib.redirect_stdout(io.StringIO()):  # its ranking of sites, not wanted here
        status = presk([*argv, "--grain", grain, "--out", env])
    if status != 0:
        raise SystemExit(f"calibrating {name} failed")
    return env


def measure(grain: str) -> list[tuple[str, str, float, dict[str, float]]]:
    """(entry, realization, measured gap, bound by model) a case."""
    out = Path(tempfile.mkdtemp())
    envelopes: dict[str, str] = {}
    rows = []
    for name, realize in cases.CASES:
        if name not in envelopes:
            envelopes[name] = calibrated(name, grain, out)
        core = cases._core(name)
        envelope = read_envelope(envelopes[name])
        realization = cases._realization(name, realize)
        gap = measured_gap(core, envelope, realization, "kernel")
        propagation = Propagation(core, envelope, realization)
        rows.append((name, realize, gap, {m: propagation.run(m).bound for m in MODELS}))
    return rows


def table(rows) -> str:
    lines = ["| entry | realization | measured | " + " | ".join(MODELS) + " |"]
    lines.append("|---|---|---|" + "---|" * len(MODELS))
    for name, realize, gap, bounds in rows:
        cells = [f"{bounds[m] / gap:.3g}×" if gap else f"{bounds[m]:.2g} (gap 0)" for m in MODELS]
        lines.append(f"| {name} | {realize} | {gap:.2g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary(rows) -> str:
    lines = ["| model | cases | median | smallest | largest |", "|---|---|---|---|---|"]
    for m in MODELS:
        ratios = [bounds[m] / gap for _, _, gap, bounds in rows if gap > 0]
        lines.append(
            f"| {m} | {len(ratios)} | {statistics.median(ratios):.3g} | {min(ratios):.3g} "
            f"| {max(ratios):.3g} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grain", choices=GRAINS, default="site", help="the envelopes' grain")
    opts = ap.parse_args(argv)
    print(f"{datetime.datetime.now(datetime.UTC).date().isoformat()}, {machine()}")
    print(f"grain: {opts.grain}, kernel evaluator, 64 bits, 2 samples a case")
    print()
    rows = measure(opts.grain)
    print(table(rows))
    print(summary(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
