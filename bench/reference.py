"""The exact references side by side: the MPFR interpreter (`interp`) and the certified
ball backend (`ball`), at 64 and 256 bits, on the tiny MiniGPT (V=64, D=16, H=2, L=2,
B=2, T=8), the corpus GPT's forward and its loss gradient (corpus/nlp/05_gpt.psk, D=64,
H=4, L=4, B=8, T=64), and one block at GPT-2-small's width (Block{768, 12}, B=1, T=128).

Each run is one call in a fresh process (spawned: MLIR is not forked), which reports its
seconds and its peak resident memory; the speedup is the interpreter's time over the
ball's at the same bits. The interpreter computes at --bits; the ball certifies them
(docs/reference.md), its midpoints carrying the bits it expects to lose on the way, and
its run reports the working precision it ended at and the bits it certified. A run that
stops (E8005, E3012) is reported as refused, with its error. `--small` runs the same
cases at small sizes (a check of the script, not figures of record); `--json` prints one
JSON object instead (bench/record.py reads it).

    python bench/reference.py [--small] [--json] [--only tiny,corpus,grad,block]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RUNS = (("interp", 64), ("ball", 64), ("interp", 256), ("ball", 256))


@dataclass(frozen=True)
class Case:
    name: str
    file: str
    entry: str
    dims: dict
    consts: dict


def cases(small: bool) -> list[Case]:
    gpt, minigpt = "corpus/nlp/05_gpt.psk", "tutorial/05_minigpt.psk"
    corpus = {"D": 64, "H": 4, "L": 4}
    sizes = {"B": 2, "T": 16} if small else {"B": 8, "T": 64}
    block = {"B": 1, "T": 16 if small else 128}
    return [
        Case("tiny", minigpt, "MiniGPT{64, 16, 2, 2}.loss", {"B": 2, "T": 8}, {}),
        Case("corpus", gpt, "apply", sizes, corpus),
        Case("grad", gpt, "loss.grad", sizes, corpus),
        Case("block", gpt, "Block{768, 12}.apply", block, {}),
    ]


def one_run(case: Case, backend: str, bits: int) -> dict:
    """One call of the case on `backend` at `bits`, in this (fresh) process."""
    from presk import api
    from presk.backends.ball import BallReference, certified
    from presk.backends.host import CallContext
    from presk.errors import PreskError
    from presk.runtime.inputs import arguments, parameters

    core = api.load(REPO / case.file).elaborate(case.entry, case.dims, case.consts)
    program = core.view
    params = parameters(program, 0, None)
    args = ([params] if params is not None else []) + arguments(program, 0, None)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        reference = core.reference(bits, backend).backend
        start = time.perf_counter()
        out = reference.call(args, CallContext())
        seconds = time.perf_counter() - start
    except PreskError as e:
        return {"refused": e.headline()}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run = {"seconds": seconds, "peak_mib": peak / 1024, "before_mib": before / 1024}
    if isinstance(reference, BallReference):
        found = certified(out)
        run |= {"working_bits": reference.working, "certified_bits": found and found[0]}
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small sizes: check the script")
    ap.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    ap.add_argument("--only", help="the cases to run, of tiny,corpus,grad,block")
    opts = ap.parse_args()
    chosen = [c for c in cases(opts.small) if not opts.only or c.name in opts.only.split(",")]
    rows = []
    for case in chosen:
        runs = {}
        for backend, bits in RUNS:
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                runs[f"{backend}@{bits}"] = pool.submit(one_run, case, backend, bits).result()
            if not opts.json:  # each run as it ends: the whole takes long
                key = f"{backend}@{bits}"
                print(f"  {case.name} {key}: {runs[key]}", file=sys.stderr)
        rows.append({"case": case.name, "entry": case.entry, "dims": case.dims,
                     "consts": case.consts, "runs": runs})  # fmt: skip
    if opts.json:
        print(json.dumps({"small": opts.small, "rows": rows}))
        return
    print(f"{'case':<8} {'bits':>4}  {'interp s':>9} {'MiB':>7}  {'ball s':>9} {'MiB':>7}  speedup")
    for row in rows:
        for bits in (64, 256):
            i, b = row["runs"][f"interp@{bits}"], row["runs"][f"ball@{bits}"]
            print(f"{row['case']:<8} {bits:>4}  {_cell(i)}  {_cell(b)}  {_speedup(i, b)}")
    for row in rows:
        for key, run in row["runs"].items():
            if "refused" in run:
                print(f"{row['case']} {key}: {run['refused']}")
            elif "working_bits" in run:
                print(f"{row['case']} {key}: midpoints at {run['working_bits']} bits, "
                      f"{run['certified_bits']} certified")  # fmt: skip


def _cell(run: dict) -> str:
    if "refused" in run:
        return f"{'refused':>9} {'':>7}"
    return f"{run['seconds']:>9.2f} {run['peak_mib']:>7.0f}"


def _speedup(interp: dict, ball: dict) -> str:
    if "refused" in interp or "refused" in ball:
        return "—"
    return f"{interp['seconds'] / ball['seconds']:.1f}×"


if __name__ == "__main__":
    main()
