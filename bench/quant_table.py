"""The gap of every weight realization split in two (`presk quantize --realize`) on the
trained corpus GPT: f64, f32, bf16, and every matrix (a parameter declared of rank two)
in int8 and int4, absmax and pow2 scales, over axis -2, f32 elsewhere. Per realization
it prints the weights' bytes and their ratio to f64's, and the representation,
arithmetic and total gaps relative to |L| (the exact loss on the true weights); then
whether int8 stays inside a 1e-2 budget on the loss, and by what factor. The date and
the machine are printed first; each record is written to WORK/<name>.json, for
`presk quantize --realize @…`.

    python bench/quant_table.py --work /tmp/qt --train 400                # data, training
    python bench/quant_table.py --work /tmp/qt --checkpoint CKPT --data D.psk.d

The model is corpus/nlp/05_gpt.psk's `loss` at D=64, H=2, L=2, T=64 and B=2 (`--dim`,
`--const` change it), on the first batch of the data's training windows. The exact
reference runs at 64 bits (`--bits`), not `presk quantize`'s 128: the smallest gap it
splits, f64's arithmetic, is near 1e-16 of |L|, which 64 bits resolve, and one run takes
8 s at 64 bits against 19 s at 128 (a 2-core AVX2 machine). Without --data it cuts the
corpus into windows of T tokens (`presk data`); with --train N it trains N steps
natively first (`presk train --backend mlir`, B=8), as bench/curve.py does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from curve import PROGRAM, add_model_args, trained_model  # noqa: E402

import presk  # noqa: E402
from presk.precision.integers import declared_ranks  # noqa: E402
from presk.precision.quant_split import TRUE_WEIGHTS, Split, exact_output, sample, split  # noqa: E402
from presk.realize import Quant, Realization  # noqa: E402
from presk.toolchain import machine  # noqa: E402
from presk.train.loop import sci  # noqa: E402

BUDGET = 1e-2  # on the loss, relative to |L|
OVER = -2  # the axis a matrix is contracted over, counted from the end (a stack's too)
INTEGERS = [("int8", 8, "absmax"), ("int8 pow2", 8, "pow2"), ("int4", 4, "absmax"),
            ("int4 pow2", 4, "pow2")]  # fmt: skip


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap, "T=64, B=2")
    ap.add_argument("--bits", type=int, default=64, help="the reference's (default 64)")
    ap.add_argument("--backend", choices=("kernel", "mlir"), default="mlir")
    return ap


def main(argv: list[str] | None = None) -> int:
    opts = arguments().parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d', time.gmtime())}, {machine()}")
    consts, dims, _, data, checkpoint = trained_model(opts, {"T": 64, "B": 2})
    core = presk.load(PROGRAM).elaborate("loss", dims, consts)
    table(core, opts, data, checkpoint)
    return 0


def realizations(core) -> dict[str, Realization]:
    """The table's rows by name: the uniform types, then every matrix in integers."""
    rows = {t: Realization(t, spelling=t) for t in ("f64", "f32", "bf16")}
    for name, bits, scheme in INTEGERS:
        quant = {p: Quant(bits, OVER, scheme) for p in matrices(core)}
        rows[name] = Realization("f32", quant=quant, spelling=name)
    return rows


def matrices(core) -> list[str]:
    """The paths of the parameters declared of rank two (a stacked bias is not one)."""
    return [path for path, rank in declared_ranks(core).items() if rank == 2]


def record(r: Realization) -> dict:
    """The realization as a `--realize @R.json` record."""
    if r.uniform:
        return {"default": r.default}
    quant = {p: {"bits": q.bits, "over": q.over, "scheme": q.scheme} for p, q in r.quant.items()}
    return {"default": r.default, "quant": quant}


def table(core, opts, data: str, checkpoint: str) -> None:
    """One row a realization, each gap relative to |L|, and the int8 verdict."""
    s = sample(core, weights=checkpoint, data=data)
    start = time.perf_counter()
    truth = exact_output(core, s, TRUE_WEIGHTS, opts.bits)
    seconds = time.perf_counter() - start
    rows = realizations(core)
    bound = " ".join(f"{k}={v}" for k, v in (core.consts | core.dims).items())
    print(f"`{core.entry}` {bound}, the first batch of {data}, weights {checkpoint}")
    print(f"the reference at {opts.bits} bits ({seconds:.1f} s a run); the machine runs on "
          f"{opts.backend}; integer weights: {', '.join(matrices(core))} over {OVER}")  # fmt: skip
    splits = {}
    for name, r in rows.items():
        path = opts.work / f"{name.replace(' ', '_')}.json"
        path.write_text(json.dumps(record(r)) + "\n")
        splits[name] = split(core, s, r, opts.backend, opts.bits, truth)
    print(f"exact loss L = {splits['f64'].magnitude:.6g}; gaps relative to |L|\n")
    print("| realization | weights (bytes) | vs f64 | representation | arithmetic | total |")
    print("|---|---|---|---|---|---|")
    for name, found in splits.items():
        print(row(name, found))
    int8 = splits["int8"].total.relative
    inside = "inside" if int8 <= BUDGET else "OUTSIDE"
    print(f"\nint8: {sci(int8, 2)} of |L|, {inside} a {BUDGET:g} budget by a factor of "
          f"{BUDGET / int8:.0f}")  # fmt: skip


def row(name: str, s: Split) -> str:
    ratio = s.f64_bytes / s.weight_bytes
    gaps = (s.representation, s.arithmetic, s.total)
    cells = " | ".join(sci(g.relative, 2) if g.relative else "0" for g in gaps)
    return f"| {name} | {s.weight_bytes:,} | {ratio:.2f}× smaller | {cells} |"


if __name__ == "__main__":
    sys.exit(main())
