"""The budget curve of `presk solve` on the corpus GPT: one program, one envelope, the
budget swept from 1e-1 to 1e-7 of |L|. Per budget it prints the realization's traffic
against all-f64 (one sample's stored values and the parameters once), its measured gap
to the exact reference on the envelope's samples and on the held-out windows after
them (relative to |L|, like the budget), whether each is inside, the stored values and
parameters narrowed to f32 and to bf16, the widening rounds, with --narrow the steps it
kept of those it measured and those the held-out windows undid, and the seconds the solve
took (the first includes the reference's runs). The date and the machine are printed
first. Each realization is written to WORK/solved_<budget>.json, for `--realize @…`.

    python bench/curve.py --work /tmp/curve --train 400          # data, training, envelope
    python bench/curve.py --work /tmp/curve --checkpoint CKPT    # trained elsewhere, at T
    python bench/curve.py --work /tmp/curve --checkpoint CKPT --train-under 200  # + quality

The model is corpus/nlp/05_gpt.psk's `loss` at D=64, H=2, L=2, T=64 (`--dim`/`--const`
change it). Without --data it cuts the corpus into windows of T tokens (`presk data`);
with --train N it trains N steps natively (`presk train --backend mlir`, B=8); then it
calibrates once (`presk calibrate --precision`, --samples windows at --batch, --bits),
unless WORK/envelope.json is already that envelope, and solves each budget on the same
sensitivity sweep and the same exact outputs.

With --train-under N it then prints the curve to quality: the model trained from scratch N
steps under each budget's realization, its stored values' types only (written to
WORK/solved_<budget>_nests.json: without `params` the master weights stay in f64), then
evaluated in f64 on the data's validation windows (`presk eval`): the validation loss,
its difference from all-f64's, and ‖θ − θ_f64‖/‖θ_f64‖. All-f64 is trained at seeds 0,
1 and 2, the yardstick; every other run at seed 0, so each sees the same initialization
and batches. A budget whose nests are an earlier one's is trained once.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from presk.errors import PreskError  # noqa: E402
from presk.front.bindings import parse_assignments  # noqa: E402
from presk.precision.calibrate import Job  # noqa: E402
from presk.precision.envelope import envelope_for  # noqa: E402
from presk.precision.offers import envelope_menu  # noqa: E402
from presk.precision.solve import Gauge, Options, Solution, held_out_samples, solve  # noqa: E402
from presk.toolchain import default_threads  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from presk.toolchain import machine  # noqa: E402

PROGRAM = REPO / "corpus" / "nlp" / "05_gpt.psk"
PRESK = Path(sys.executable).parent / "presk"
BUDGETS = "1e-1,1e-2,1e-3,1e-4,1e-5,1e-6,1e-7"
TRAIN = ("--dim", "B=8", "--backend", "mlir", "--lr", "0.003", "--quiet")
SEEDS = (1, 2)  # all-f64's other seeds, the yardstick


def add_model_args(ap: argparse.ArgumentParser, dims: str) -> None:
    """The corpus GPT's flags: where its files go, its checkpoint (or the steps to train
    one), its data and its consts and dims (`dims` says the defaults)."""
    ap.add_argument("--work", required=True, type=Path, help="where data and records go")
    trained = ap.add_mutually_exclusive_group(required=True)
    trained.add_argument("--checkpoint", help="trained weights (at the same D, H, L and T)")
    trained.add_argument("--train", type=int, metavar="STEPS", help="train this many steps")
    ap.add_argument("--data", help="a `presk data` file of T-token windows (default: made)")
    ap.add_argument("--const", action="append", default=[], metavar="NAME=N")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=N", help=dims)


def trained_model(opts, dims: dict[str, int]):
    """The corpus GPT the flags of `add_model_args` name: its consts, dims (over `dims`),
    its flags for presk without the batch, its data file and checkpoint, each made when
    not given (the data from the corpus's texts, the checkpoint by `--train` steps)."""
    consts = {"D": 64, "H": 2, "L": 2} | parse_assignments(opts.const, "--const", "E3007")
    dims = dims | parse_assignments(opts.dim, "--dim", "E3004")
    model = [f for k, v in consts.items() for f in ("--const", f"{k}={v}")]
    model += [f for k, v in dims.items() if k != "B" for f in ("--dim", f"{k}={v}")]
    opts.work.mkdir(parents=True, exist_ok=True)
    data = opts.data or str(opts.work / f"text{dims['T']}.psk.d")
    if opts.data is None:
        texts = sorted((REPO / "corpus" / "nlp" / "data").glob("*.txt"))
        run("data", *texts, "--window", dims["T"], "--out", data)
    checkpoint = opts.checkpoint or str(opts.work / "gpt" / "checkpoint.psk.d")
    if opts.train:
        run("train", PROGRAM, "--entry", "loss", *model, *TRAIN, "--data", data,
            "--steps", opts.train, "--out", opts.work / "gpt")  # fmt: skip
    return consts, dims, model, data, checkpoint


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap, "T=64")
    ap.add_argument("--batch", type=int, default=2, help="windows a sample (default 2)")
    ap.add_argument("--samples", type=int, default=2, help="the envelope's (default 2)")
    ap.add_argument("--heldout", type=int, default=2, help="held-out samples (default 2)")
    ap.add_argument("--bits", type=int, default=64, help="the reference's (default 64)")
    ap.add_argument("--budgets", default=BUDGETS, help=f"(default {BUDGETS})")
    ap.add_argument("--narrow", choices=("measured", "heldout"), help="presk solve --narrow")
    ap.add_argument("--workers", type=int, help="processes for the reference's samples")
    ap.add_argument(
        "--train-under",
        type=int,
        metavar="STEPS",
        help="train this many steps from scratch under each budget's nests, and evaluate",
    )
    return ap


def run(*args: str, capture: bool = False) -> str | None:
    """Run `presk args`, the command printed first; its output if `capture`."""
    print("$ presk " + " ".join(str(a).replace(str(REPO) + "/", "") for a in args), flush=True)
    out = subprocess.run(
        [str(PRESK), *map(str, args)], check=True, cwd=REPO, capture_output=capture, text=True
    ).stdout
    if capture:
        print(out, end="", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    opts = arguments().parse_args(argv)
    workers = opts.workers or default_threads()
    print(f"{time.strftime('%Y-%m-%d', time.gmtime())}, {machine()}, workers: {workers}")
    consts, dims, model, data, checkpoint = trained_model(opts, {"T": 64})
    loss = [PROGRAM, "--entry", "loss", *model, "--dim", f"B={opts.batch}"]
    env = str(opts.work / "envelope.json")
    core = presk.load(PROGRAM).elaborate("loss", {**dims, "B": opts.batch}, consts)
    if not _is_envelope(env, core, data, checkpoint, opts):
        run("calibrate", "--precision", *loss, "--data", data, "--weights", checkpoint,
            "--bits", opts.bits, "--samples", opts.samples, "--workers", workers,
            "--out", env)  # fmt: skip
    solutions = curve(core, env, opts, workers)
    if opts.train_under:
        quality(core, solutions, model, data, opts)
    return 0


def _is_envelope(path: str, core, data: str, checkpoint: str, opts) -> bool:
    """Whether `path` holds the envelope this run would calibrate (kept: it is slow)."""
    try:
        meta = envelope_for(path, core).meta
    except (PreskError, OSError):
        return False
    wanted = (data, checkpoint, opts.samples, 0, opts.bits)
    return (meta.data, meta.weights, meta.samples, meta.first, meta.bits) == wanted


def curve(core, env: str, opts, workers: int) -> dict[str, Solution]:
    """Solve every budget on one sweep, one menu and one set of exact outputs."""
    envelope = envelope_for(env, core)
    meta = envelope.meta
    held = held_out_samples(core, meta, opts.heldout, "--heldout")
    start = time.perf_counter()
    m = envelope_menu(core, envelope)
    print(f"\nsensitivity sweep: {time.perf_counter() - start:.0f} s")
    job = Job(PROGRAM.read_text(), str(PROGRAM), "store", meta)
    gauge = Gauge(core, envelope, job, m, workers=workers)  # one set of exact outputs
    held_gauge = gauge.moved_to(held)
    print(
        f"`{core.entry}` {_bound(core)}, {meta.data}, samples {meta.first}-"
        f"{meta.first + meta.samples - 1} (held out: {held.first}-"
        f"{held.first + held.samples - 1}), {meta.bits} bits, weights {meta.weights}"
    )
    print(f"offered: {len(m.offered)} of {len(m.values)} stored values and {len(m.params)} "
          f"parameters; all-f64 traffic {m.all_f64} bytes\n")  # fmt: skip
    print(
        "| budget | traffic vs all-f64 | gap / abs L | inside | held-out gap / abs L | inside "
        "| f32 (values + params) | bf16 (values + params) | widening rounds "
        "| narrowing kept, undone | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    solutions = {}
    for budget in opts.budgets.split(","):
        start = time.perf_counter()
        s = solve(m, Options(float(budget), narrow=opts.narrow), gauge, held_gauge)
        (opts.work / f"solved_{budget}.json").write_text(json.dumps(s.record(), indent=1) + "\n")
        print(row(budget, s, time.perf_counter() - start), flush=True)
        solutions[budget] = s
    return solutions


def _bound(core) -> str:
    return " ".join(f"{k}={v}" for k, v in (core.consts | core.dims).items())


def row(budget: str, s: Solution, seconds: float) -> str:
    m = s.menu
    held = s.held_out.gap

    def narrowed(t: str) -> str:
        values = sum(1 for k, r in s.assignment.items() if r == t and k in m.values)
        params = sum(1 for k, r in s.assignment.items() if r == t and k in m.params)
        return f"{values} + {params}"

    return (
        f"| {budget} | {_traffic(s)} | {s.gap / s.scale:.3g} | "
        f"{'yes' if s.inside else 'NO'} | {held / s.scale:.3g} | "
        f"{'yes' if held <= s.budget else 'NO'} | {narrowed('f32')} | {narrowed('bf16')} | "
        f"{s.rounds} | {_narrowing(s)} | {seconds:.0f} |"
    )


def _traffic(s: Solution) -> str:
    return f"{s.menu.all_f64 / s.menu.traffic(s.assignment):.3f}× less"


def _narrowing(s: Solution) -> str:
    n = s.narrowing
    return "—" if n is None else f"{n.kept} of {n.tried}, {n.undone}"


def quality(core, solutions: dict[str, Solution], model: list[str], data: str, opts) -> None:
    """Train under all-f64 (three seeds) and each budget's nests; evaluate each in f64."""
    start = time.perf_counter()
    runs = Runs(model, data, opts.work, opts.train_under)
    f64 = runs.trained("f64", "f64", {})
    seeds = {seed: runs.trained(f"f64_seed{seed}", "f64", {}, seed) for seed in SEEDS}
    nests = {budget: runs.under(budget, s.record()) for budget, s in solutions.items()}
    base = runs.loss(f64)

    def trained_row(name: str, traffic: str, gap: str, ckpt: str) -> str:
        loss = runs.loss(ckpt)
        vs = f"{loss - base:+.1e}" if loss != base else "0"
        cells = (
            name,
            traffic,
            gap,
            f"{loss:.6f}",
            vs,
            f"{parameter_distance(core, ckpt, f64):.2e}",
        )
        return "| " + " | ".join(cells) + f" | {Path(ckpt).parent.name} |"

    rows = [trained_row("all-f64", "1.000×", "—", f64)]
    rows += [trained_row(f"all-f64, seed {seed}", "1.000×", "—", c) for seed, c in seeds.items()]
    rows += [trained_row(b, _traffic(s), f"{s.gap / s.scale:.3g}", nests[b])
             for b, s in solutions.items()]  # fmt: skip
    print(f"\nthe curve to quality: {opts.train_under} steps from scratch at B=8, evaluated "
          f"in f64 on the validation windows of {data}\n")  # fmt: skip
    print("| budget | traffic vs all-f64 | gap / abs L | validation loss | vs all-f64 "
          "| ‖θ − θ_f64‖/‖θ_f64‖ | trained as |")  # fmt: skip
    print("|---|---|---|---|---|---|---|", *rows, sep="\n")
    losses = [runs.loss(c) for c in (f64, *seeds.values())]
    print(f"\nseed-to-seed spread of all-f64's validation loss (seeds 0, "
          f"{', '.join(map(str, SEEDS))}): {max(losses) - min(losses):.6f}; "
          f"training and evaluation took {(time.perf_counter() - start) / 60:.0f} min")  # fmt: skip


class Runs:
    """The training runs of the curve to quality and their validation losses, each once."""

    def __init__(self, model: list[str], data: str, work: Path, steps: int):
        self.model, self.data, self.work, self.steps = model, data, work, steps
        self.by_nests: dict[str, str] = {}  # a realization's storage (JSON) -> its checkpoint
        self.losses: dict[str, float] = {}

    def trained(self, name: str, realize: str, storage: dict, seed: int = 0) -> str:
        """The checkpoint of a run from scratch under `realize` at `seed`, trained now."""
        out = self.work / f"train_{name}"
        run("train", PROGRAM, "--entry", "loss", *self.model, *TRAIN, "--data", self.data,
            "--steps", self.steps, "--seed", seed, "--realize", realize, "--out", out)  # fmt: skip
        if seed == 0:
            self.by_nests[json.dumps(storage, sort_keys=True)] = str(out / "checkpoint.psk.d")
        return str(out / "checkpoint.psk.d")

    def under(self, budget: str, record: dict) -> str:
        """The checkpoint trained under `record`'s nests: its params dropped, so the
        master weights stay f64; nests already trained (all-f64's too) are not again."""
        storage = record.get("storage", {})
        known = self.by_nests.get(json.dumps(storage, sort_keys=True))
        if known:
            return known
        nests = self.work / f"solved_{budget}_nests.json"
        nests.write_text(json.dumps({"default": record["default"], "storage": storage}) + "\n")
        return self.trained(budget, f"@{nests}", storage)

    def loss(self, checkpoint: str) -> float:
        """The validation loss of `checkpoint` in f64 natively (`presk eval`), run once."""
        if checkpoint not in self.losses:
            out = run("eval", PROGRAM, "--entry", "loss", *self.model, "--dim", "B=8",
                      "--backend", "mlir", "--realize", "f64", "--data", self.data,
                      "--weights", checkpoint, capture=True)  # fmt: skip
            self.losses[checkpoint] = float(re.match(r"validation loss (\S+)", out)[1])
        return self.losses[checkpoint]


def parameter_distance(core, weights: str, reference: str) -> float:
    """‖θ − θ_ref‖₂/‖θ_ref‖₂ over every parameter."""
    theta, ref = (
        np.concatenate([a.ravel() for a in core.params(weights=w).values()])
        for w in (weights, reference)
    )
    return float(np.linalg.norm(theta - ref) / np.linalg.norm(ref))


if __name__ == "__main__":
    sys.exit(main())
