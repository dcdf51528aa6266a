"""`make demo`: the core of presk in under a minute.

1. The shipped corpus (six licence texts) cut into windows of tokens: `presk data`.
2. The tiny MiniGPT trained natively on it, the kernels compiled through MLIR to native
   code in f32: `presk train --backend mlir --realize f32`, a loss line as it goes.
3. One training step's loss and gradient at the trained parameters, computed natively in
   f32 and exactly (the reference, MPFR at 256 bits), and the worst gap of each beside
   the f32 band |x − x̂| ≤ ε·(|x| + a), ε = 2^-15, a = 2^-20.
4. A budget in, a realization out: the trained model's loss calibrated over two samples
   of its data (`presk calibrate --precision`), then `presk solve --budget 1e-3` chooses a
   type per value and parameter with the least traffic whose gap to the exact reference,
   measured, stays inside the budget.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
OUT = REPO / "runs" / "demo"
MODEL = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2", "--dim", "T=8"]
EPS, A = 2.0**-15, 2.0**-20


def presk(*args: str) -> None:
    shown = " ".join(a if " " not in a and "{" not in a else f"'{a}'" for a in args)
    print(f"\n+ presk {shown.replace(str(REPO) + '/', '')}", flush=True)
    subprocess.run([str(BIN / "presk"), *args], check=True, cwd=REPO)


def gaps(exact_value, machine_value) -> tuple[float, int, int, float, float]:
    """Over every element of a value (an array, or a dict of arrays by path): the worst
    |x − x̂| / (ε (|x| + a)) (within the band when ≤ 1); the elements outside the band; the
    elements; the largest of those outside relative to the largest element of its leaf;
    ‖x − x̂‖₂ / ‖x‖₂."""
    worst, outside, n, size, num, den = 0.0, 0, 0, 0.0, 0.0, 0.0
    for xv, yv in zip(_arrays(exact_value), _arrays(machine_value), strict=True):
        ratio = np.abs(xv - yv) / (EPS * (np.abs(xv) + A))
        worst, n = max(worst, float(ratio.max())), n + xv.size
        out = ratio > 1
        if out.any():
            outside += int(out.sum())
            size = max(size, float(np.abs(xv[out]).max() / np.abs(xv).max()))
        num, den = num + float(np.sum((xv - yv) ** 2)), den + float(np.sum(xv**2))
    return worst, outside, n, size, (num / den) ** 0.5


def _arrays(value) -> list[np.ndarray]:
    return [a.ravel() for a in (value.values() if isinstance(value, dict) else [value])]


def measure_one_step(data: str, checkpoint: str) -> None:
    """The loss and its gradient on the first training batch, natively and exactly."""
    import presk
    from presk.train.data import Windows, next_token_pair

    program = presk.load(REPO / "tutorial" / "05_minigpt.psk")
    tokens, targets = next_token_pair(Windows.load(data).batch(1, 8, 0)[0], 64)
    print("\nOne step at the trained parameters, on a batch of 8 windows:")
    for fn, what in (("loss", "loss"), ("loss_grad", "gradient")):
        core = program.elaborate(f"MiniGPT{{64, 16, 2, 2}}.{fn}", dims={"T": 8, "B": 8})
        params = core.params(weights=checkpoint)
        out, seconds = {}, {}
        for name, realize in (("mlir", "f32"), ("interp", "f64")):
            f = core.compile(name, realize)
            f(params, tokens, targets)  # compiles (mlir)
            start = time.perf_counter()
            out[name] = f(params, tokens, targets)
            seconds[name] = time.perf_counter() - start
        worst, outside, n, size, norm = gaps(out["interp"], out["mlir"])
        print(
            f"  {what}: native f32 {seconds['mlir'] * 1e3:.2f} ms, exact {seconds['interp']:.2f} s"
        )
        if fn == "loss":
            print(f"    {float(out['interp']):.12f} exactly, {float(out['mlir']):.12f} in f32")
        where = "" if not outside else f" (the others at most {size:.0e} of their leaf's largest)"
        print(
            f"    worst elementwise gap {worst:.3f}× the f32 band, {n - outside} of {n} "
            f"elements inside it{where}; ‖x − x̂‖/‖x‖ = {norm:.1e}"
        )
    print("  The f32 band: |x − x̂| ≤ ε·(|x| + a), ε = 2^-15, a = 2^-20, element by element.")


def solve_a_budget(data: str, checkpoint: str) -> None:
    """The trained loss's envelope over 2 samples of its data, and a realization solved
    at a budget of 1e-3 of |L|: its traffic against all-f64 and its measured gap."""
    program = str(REPO / "tutorial" / "05_minigpt.psk")
    envelope, solved = str(OUT / "envelope.json"), str(OUT / "solved.json")
    # the checkpoint gives the entry, consts and dims it was trained at
    loss = [program, "--weights", checkpoint]
    print("\nA budget in, a realization out, measured against the exact reference:")
    samples = ["--data", data, "--bits", "64", "--samples", "2"]
    one_process = ["--workers", "1"]
    presk("calibrate", "--precision", *loss, *samples, *one_process, "--out", envelope)
    budget = ["--precision", envelope, "--budget", "1e-3"]
    presk("solve", *loss, *budget, *one_process, "--out", solved)


def main() -> int:
    start = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    data = str(OUT / "lic8.psk.d")
    texts = sorted(str(p) for p in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    presk("data", *texts, "--window", "8", "--out", data)
    presk(
        "train",
        str(REPO / "tutorial" / "05_minigpt.psk"),
        *MODEL,
        "--dim",
        "B=8",
        "--data",
        data,
        "--steps",
        "600",
        "--lr",
        "0.01",
        "--log-every",
        "50",
        "--backend",
        "mlir",
        "--realize",
        "f32",
        "--out",
        str(OUT),
    )
    checkpoint = str(OUT / "checkpoint.psk.d")
    measure_one_step(data, checkpoint)
    solve_a_budget(data, checkpoint)
    print(f"\nThe demo took {time.perf_counter() - start:.0f} s. More: README.md, docs/.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
