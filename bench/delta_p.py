"""The exact reference's own gap δ_p on a program's loss, logits and gradient.

Each rounding of a reference run shrinks by 2^-p when p doubles, so |f_p − f_2p| ≈ C·2^-p
stands in for the distance δ_p of the reference at p bits to the denotation, and
δ_p / δ_2p should be near 2^p (its log2 near p). The date and the machine are printed
first, then one row an output and a precision: the largest elementwise |f_p − f_1024| and
δ_p = |f_p − f_2p|, each absolute and relative to the output's magnitude (its largest
|element| at the most bits; the first also in units of 2^-p), log2(δ_p / δ_2p) where
f_4p was run, and the seconds of the run at p.

    python bench/delta_p.py                        # the corpus GPT, /tmp/h11's checkpoint
    python bench/delta_p.py --checkpoint CKPT --data D.psk.d --dim B=1
    python bench/delta_p.py --program tutorial/05_minigpt.psk \\
        --entry 'MiniGPT{64, 16, 2, 2}.loss' --dim B=1 --dim T=8 \\
        --checkpoint runs/demo/checkpoint.psk.d --data runs/demo/lic8.psk.d

The default model is corpus/nlp/05_gpt.psk's `loss` at D=64, H=2, L=2, B=2, T=64 (`--dim`,
`--const` change it) on the checkpoint and data `bench/curve.py --train 400` makes
(WORK/gpt/checkpoint.psk.d and WORK/text64.psk.d). The three outputs: the entry (a loss),
its module's `apply` on the tokens alone (`--apply`), and the gradient of the loss with
respect to the parameters (the entry's `.grad`). The inputs are the first batch of the
data's training windows (sample 0 of a calibration, presk/precision/samples.py), else
drawn from seed 0. The reference's outputs are MPFR numbers at p bits, and every
difference is taken in MPFR at twice the most bits, so it is exact and no δ_p is lost to
float64's rounding of the outputs; only the printed δ_p is a float64 (2^-53 of itself).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from curve import PROGRAM  # noqa: E402

import presk  # noqa: E402
from presk.api import Core  # noqa: E402
from presk.front.bindings import parse_assignments  # noqa: E402
from presk.precision.quant_split import Gap, Sample, largest_magnitude, output_gap, outputs, sample  # noqa: E402
from presk.toolchain import machine  # noqa: E402
from presk.train.loop import sci  # noqa: E402

CHECKPOINT = "/tmp/h11/gpt400/checkpoint.psk.d"
DATA = "/tmp/h11/text64.psk.d"
GPT_CONSTS = {"D": 64, "H": 2, "L": 2}
GPT_DIMS = {"B": 2, "T": 64}
BITS = [64, 128, 256, 512, 1024]


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", type=Path, help="a .psk program (default the corpus GPT)")
    ap.add_argument("--entry", default="loss", help="a loss (default loss)")
    ap.add_argument("--apply", help="the logits' entry (default the entry's module's apply)")
    ap.add_argument("--checkpoint", help=f"the weights (the corpus GPT's default {CHECKPOINT})")
    ap.add_argument("--data", help=f"a `presk data` file (the corpus GPT's default {DATA})")
    ap.add_argument("--const", action="append", default=[], metavar="NAME=N", help="D=64…")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="B=2, T=64")
    ap.add_argument("--bits", type=precisions, default=BITS, metavar="P,P,…",
                    help="the most bits stand in for the limit (default 64,…,1024)")  # fmt: skip
    return ap


def precisions(text: str) -> list[int]:
    """`64,128` as precisions in increasing order, at least two."""
    try:
        bits = sorted(int(b) for b in text.split(","))
    except ValueError:
        bits = []
    if len(bits) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: two or more whole numbers of bits")
    return bits


@dataclass(frozen=True)
class Output:
    """One of the three outputs: its name, its entry and its arguments."""

    name: str
    core: Core
    sample: Sample


def main(argv: list[str] | None = None) -> int:
    opts = arguments().parse_args(argv)
    consts = parse_assignments(opts.const, "--const", "E3007")
    dims = parse_assignments(opts.dim, "--dim", "E3004")
    checkpoint, data = opts.checkpoint, opts.data
    if opts.program is None:  # the corpus GPT, trained
        consts, dims = GPT_CONSTS | consts, GPT_DIMS | dims
        checkpoint, data = checkpoint or CHECKPOINT, data or DATA
    bits = opts.bits
    program = presk.load(opts.program or PROGRAM)
    loss = program.elaborate(opts.entry, dims, consts)
    s = sample(loss, weights=checkpoint, data=data)
    bound = " ".join(f"{k}={v}" for k, v in (loss.consts | loss.dims).items())
    print(f"{time.strftime('%Y-%m-%d', time.gmtime())}, {machine()}")
    print(f"{opts.program or PROGRAM.relative_to(REPO)} `{loss.entry}` {bound}, weights "
          f"{checkpoint or 'initialised from seed 0'}, inputs "
          f"{f'the first batch of {data}' if data else 'drawn from seed 0'}")  # fmt: skip
    print(f"differences in MPFR at {2 * bits[-1]} bits; δ_p = |f_p − f_2p|\n", flush=True)
    table = [measure(out, bits) for out in three_outputs(loss, opts.apply, s)]
    print(f"\n| output | p | f_p vs f_{bits[-1]} | relative | in 2^-p | δ_p | relative "
          "| log2(δ_p / δ_2p) | s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, runs, seconds in table:
        for line in rows(name, runs, seconds, bits):
            print(line)
    return 0


def three_outputs(loss: Core, apply: str | None, s: Sample) -> list[Output]:
    """The loss, the logits (the loss's arguments but the last, the targets) and the
    gradient of the loss with respect to the parameters."""
    logits = loss.derived(entry=apply or apply_of(loss.entry))
    gradient = loss.derived(entry=f"{loss.entry}.grad")
    return [
        Output("loss", loss, s),
        Output("logits", logits, Sample(s.args[:-1], s.seed)),
        Output("gradient", gradient, s),
    ]


def apply_of(entry: str) -> str:
    """`apply` in the entry's module: `loss` -> `apply`, `M{1, 2}.loss` -> `M{1, 2}.apply`."""
    module, dot, _ = entry.rpartition(".")
    return f"{module}{dot}apply"


def measure(out: Output, bits: list[int]) -> tuple[str, dict, dict]:
    """The output's real leaves (MPFR numbers) and the seconds of its run at each of
    `bits`. One run each: the reference has nothing to warm up, and a run is slow."""
    runs, seconds = {}, {}
    for p in bits:
        compiled = out.core.reference(bits=p)
        start = time.perf_counter()
        runs[p] = outputs(compiled, out.sample)
        seconds[p] = time.perf_counter() - start
        print(f"{out.name} at {p} bits: {seconds[p]:.1f} s", flush=True)
    return out.name, runs, seconds


def rows(name: str, runs: dict, seconds: dict, bits: list[int]) -> list[str]:
    """One row a precision: the gap to the most bits, δ_p and its ratio to δ_2p."""
    most = bits[-1]
    # two numbers of at most `most` bits, less than `most` binades apart (any two outputs
    # that agree to a bit), differ by a number of at most 2·most bits: exactly
    exact_bits = 2 * most
    magnitude = largest_magnitude(runs[most], exact_bits)

    def gap(p: int, q: int) -> Gap:
        return output_gap(runs[p], runs[q], magnitude, exact_bits)

    deltas = {p: gap(p, 2 * p) for p in bits if 2 * p in runs}
    lines = []
    for p in bits:
        cells = [""] * 5
        if p != most:
            limit = gap(p, most)
            units = math.ldexp(limit.relative, p)  # in units of roundoff at p bits
            cells[:3] = [sci(limit.absolute, 2), sci(limit.relative, 2), f"{units:.1f}"]
        if p in deltas:
            cells[3:] = [sci(deltas[p].absolute, 2), sci(deltas[p].relative, 2)]
        ratio = _log2_ratio(deltas.get(p), deltas.get(2 * p))
        lines.append(f"| {name} | {p} | {' | '.join(cells)} | {ratio} | {seconds[p]:.1f} |")
    return lines


def _log2_ratio(delta: Gap | None, next_delta: Gap | None) -> str:
    if delta is None or next_delta is None or not (delta.absolute and next_delta.absolute):
        return ""
    return f"{math.log2(delta.absolute / next_delta.absolute):.1f}"


if __name__ == "__main__":
    sys.exit(main())
