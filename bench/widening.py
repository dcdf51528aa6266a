"""The widening programs (tests/data/widening/) solved as tests/test_widening.py solves them,
against every assignment measured: for each, the widening rounds, the solve's traffic,
the least traffic of any widening of its proposal inside the budget (what widening the
culprit alone can reach), the least of any assignment at all (the optimum by
measurement) and the estimate's optimum (`--exhaustive`, which no measurement checks).
Prints the date and the machine, then one markdown row a program.

    python bench/widening.py
"""

from __future__ import annotations

import contextlib
import datetime
import io
import itertools
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import test_widening as cases  # noqa: E402

from presk import api  # noqa: E402
from presk.precision.calibrate import Job  # noqa: E402
from presk.precision.envelope import read_envelope  # noqa: E402
from presk.precision.offers import envelope_menu  # noqa: E402
from presk.precision.solve import Gauge  # noqa: E402
from presk.toolchain import machine  # noqa: E402


def least_inside(menu, gauge: Gauge, budget: float, ceilings: dict[str, str]) -> int:
    """The least traffic of an assignment, each offered value at its ceiling or wider (f64
    where none is given), measured inside `budget`."""
    keys = list(menu.offered)
    ladders = []
    for k in keys:
        ladder = menu.item(k).ladder
        ladders.append(ladder[: ladder.index(ceilings.get(k, "f64")) + 1])
    inside = [
        menu.traffic(a)
        for picks in itertools.product(*ladders)
        if gauge.gap(a := dict(zip(keys, picks, strict=True))) <= budget
    ]
    return min(inside)


def row(name: str, budget: str, flags: tuple, work: Path) -> str:
    with contextlib.redirect_stdout(io.StringIO()):
        text, moves = cases.solved(work, name, budget, (*flags, "--exhaustive"))
    program = str(cases.WIDENING / f"{name}.psk")
    core = api.load(program).elaborate("loss")
    envelope = read_envelope(str(work / "env.json"))
    menu = envelope_menu(core, envelope, min_gain=float(flags[1]) if flags else 1e-3)
    gauge = Gauge(core, envelope, Job(core.program.ast.text, program, "store", envelope.meta), menu)
    proposed = {m["key"]: m["to"] for m in moves["moves"] if m["outcome"] == "taken"}
    widest = {k: menu.item(k).ladder[-1] for k in menu.offered}
    culprit = least_inside(menu, gauge, moves["budget"], proposed)
    optimum = least_inside(menu, gauge, moves["budget"], widest)
    estimate = int(re.search(r"exhaustive: optimum (\d+) bytes", text)[1])
    rounds = int(cases.field(text, "widening rounds:").split()[2].rstrip(";"))
    traffic = int(cases.field(text, "traffic:").split()[1])
    f64 = menu.all_f64
    return (
        f"| `{name}.psk` | {budget} | {rounds} | {f64 / traffic:.3f}× | {f64 / culprit:.3f}× | "
        f"{f64 / optimum:.3f}× | {traffic / optimum:.3f} | {f64 / estimate:.3f}× |"
    )


def main() -> int:
    print(f"{datetime.datetime.now(datetime.UTC).date().isoformat()}, {machine()}\n")
    print(
        "| program | budget | widening rounds | solve vs all-f64 | best widening of the "
        "proposal | optimum by measurement | solve / optimum | the estimate's optimum |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, budget, flags, _ in cases.CASES:
        print(row(name, budget, flags, Path(tempfile.mkdtemp())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
