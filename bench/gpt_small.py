"""The precision workflow at GPT-2-small's size on this machine: the corpus GPT program
(corpus/nlp/05_gpt.psk) at D=768, H=12, L=12, T=128 and the 256-token byte vocabulary,
its parameters counted; trained natively a few dozen steps on the shipped corpus (enough
that its head is not zero); then `presk calibrate --precision --samples 2`, `presk solve
--budget 1e-3 --sweep f64 --measure native`, and the solved realization measured on 8
held-out batches against the reference (the ball backend, certified). Each phase's wall
time and peak resident memory (its process's, and its children's) are printed, then a
summary the size of a docs/precision.md record.

    python bench/gpt_small.py [--bits 64] [--steps 30] [--batch 1] [--workers 2] [--small]
                              [--out DIR]

`--small` runs the same phases at D=64, H=2, L=2, T=16 (a check of the script, in a
minute); the figures of record are the full run's, on a quiet machine.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROGRAM = "corpus/nlp/05_gpt.psk"
CORPUS = sorted(str(p.relative_to(REPO)) for p in (REPO / "corpus/nlp/data").glob("*.txt"))


def sizes(small: bool) -> dict[str, int]:
    return {"D": 64, "H": 2, "L": 2, "T": 16} if small else {"D": 768, "H": 12, "L": 12, "T": 128}


def parameters(model: dict[str, int]) -> tuple[int, int]:
    """(the blocks' parameters, all of them) of the corpus GPT at these sizes, counted from
    its parameter record."""
    from presk import api

    core = api.load(REPO / PROGRAM).elaborate(
        "loss", {"B": 1, "T": model["T"]}, {k: model[k] for k in "DHL"}
    )
    counts = {path: math.prod(a.shape) for path, a in core.params().items()}
    blocks = sum(n for path, n in counts.items() if path.startswith("blocks."))
    return blocks, sum(counts.values())


def phase(name: str, argv: list[str], log: list) -> str:
    """Run `presk argv` as a child, timed, with its own peak resident memory (the kernel's
    account of it and of the processes it waited for: its workers)."""
    shown = " ".join(a if " " not in a and "{" not in a else f"'{a}'" for a in argv)
    print(f"\n+ presk {shown}", flush=True)
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([str(BIN / "presk"), *argv], cwd=REPO, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        proc = subprocess.CompletedProcess(child.args, child.returncode, out.read(), err.read())
    seconds = time.monotonic() - start
    peak = usage.ru_maxrss / 2**20  # KiB -> GiB
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    log.append((name, seconds, peak, proc.returncode))
    print(f"-- {name}: {seconds:.1f} s, peak resident {peak:.2f} GiB, exit {proc.returncode}")
    if proc.returncode:
        summary(log)
        sys.exit(proc.returncode)
    return proc.stdout


def summary(log: list) -> None:
    print("\n| phase | wall time | peak resident memory |\n|---|---|---|")
    for name, seconds, peak, code in log:
        failed = "" if code == 0 else f" (exit {code})"
        print(f"| {name}{failed} | {seconds:.0f} s | {peak:.2f} GiB |")
    total = sum(s for _, s, _, _ in log)
    print(f"| total | {total / 60:.1f} min | {max(p for _, _, p, _ in log):.2f} GiB |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=64, help="the reference's bits (default 64)")
    ap.add_argument("--steps", type=int, default=30, help="native training steps (default 30)")
    ap.add_argument("--batch", type=int, default=1, help="windows a batch, B (default 1)")
    ap.add_argument("--reference", default="ball", help="ball (default) or interp")
    ap.add_argument(
        "--workers", type=int, default=2, help="reference runs at once (default 2, the cores)"
    )
    ap.add_argument("--small", action="store_true", help="small sizes: check the script")
    ap.add_argument("--out", default="runs/gpt-small", help="where the run's files go")
    opts = ap.parse_args()
    model = sizes(opts.small)
    out = opts.out
    blocks, total = parameters(model)
    print(
        f"corpus GPT at D={model['D']}, H={model['H']}, L={model['L']}, T={model['T']}, "
        f"V=256: {blocks:,} parameters in the blocks, {total:,} in all"
    )
    consts = [f"--const={k}={model[k]}" for k in "DHL"]
    dims = [f"--dim=T={model['T']}", f"--dim=B={opts.batch}"]
    log: list = []
    data = f"{out}/corpus.psk.d"
    phase("data", ["data", *CORPUS, "--window", str(model["T"]), "--out", data], log)
    phase(
        "train",
        ["train", PROGRAM, "--entry", "loss", *consts, *dims, "--data", data,
         "--steps", str(opts.steps), "--lr", "3e-4", "--log-every", "10", "--backend", "mlir",
         "--realize", "f32", "--out", f"{out}/train"],
        log,
    )  # fmt: skip
    weights = f"{out}/train/checkpoint.psk.d"
    reference = ["--reference", opts.reference]
    phase(
        "calibrate",
        ["calibrate", "--precision", PROGRAM, "--weights", weights, "--data", data,
         "--samples", "2", "--bits", str(opts.bits), *reference, "--workers", str(opts.workers),
         "--out", f"{out}/envelope.json"],
        log,
    )  # fmt: skip
    phase(
        "solve",
        ["solve", PROGRAM, "--weights", weights, "--precision", f"{out}/envelope.json",
         "--budget", "1e-3", "--sweep", "f64", "--measure", "native", "--heldout", "8",
         *reference, "--workers", str(opts.workers), "--out", f"{out}/solved.json"],
        log,
    )  # fmt: skip
    summary(log)


if __name__ == "__main__":
    main()
