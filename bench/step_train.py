"""A budget on the training step, from the solve to the trained model: `presk solve --step`
on the corpus GPT at 1e-3 and 1e-2 (the time objective, on this machine's profile or
`--profile`'s), the step table of `presk calibrate --step` (all-f64, f32, bf16, the recipe
and both solved steps), then the trajectory: the model trained from scratch the same
number of steps (the same seed, batches and split) under all-f64, all-f32, each solved
step and the recipe, evaluated in f64 on the validation windows (`presk eval`), with
all-f64 at seeds 1 and 2 as the yardstick. The date and the machine are printed first.

    nice python bench/step_train.py --work /tmp/step --checkpoint gpt400/checkpoint.psk.d \\
        --data text64.psk.d --steps 200 [--profile P.json] [--course]

The model is corpus/nlp/05_gpt.psk's `loss` at D=64, H=2, L=2, T=64. The solves and the
step table run at B=2 (the exact step on the reference is the cost) from `--checkpoint`,
with 10 warm-up steps at the learning rate it was trained with (--lr, 0.003); the runs
train at B=8 with `presk train --backend mlir --lr 0.003 --plan default` (bench/curve.py's
runs, at the default layouts). The mean step time of a run is from its log: the seconds
between its first and last logged steps over the steps between them.

`--course` then takes the step solved at 1e-3 to the course's scale (D=384, H=6, L=6,
B=16, T=256; its record names sites by function, which do not depend on the consts):
`presk bench --train-step` times all-f64, all-f32 and it side by side, one run, and the
trajectory is trained again at that scale (the same rows but the recipe and 1e-2), on
windows of 256 tokens made here, at the cost model's layouts (the default layouts took
over 7 s an f64 step there, against 2.3). About an hour on two cores; `--only-course`
runs this part alone, from the record already in --work.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import curve  # noqa: E402
from curve import PROGRAM, SEEDS, Runs, parameter_distance, run  # noqa: E402

import presk  # noqa: E402
from presk.precision.step_gap import recipe  # noqa: E402
from presk.toolchain import machine  # noqa: E402

# The corpus-scale runs train at the default layouts: the cost model's plan (`auto`) checks
# a nest's layouts in the realization's default type, so it gives a bf16 nest of a record
# by site a k-block that bf16 refuses (E7002, the solved step at 1e-2 at B=8). The course's
# runs, of f64, f32 and the record solved at 1e-3, take the plan.
curve.TRAIN = (*curve.TRAIN, "--plan", "default")

MODEL = ["--const", "D=64", "--const", "H=2", "--const", "L=2", "--dim", "T=64"]
CONSTS = {"D": 64, "H": 2, "L": 2}
BUDGETS = ("1e-3", "1e-2")
# the course's scale, where the step solved at D=64 is timed and trained again
COURSE = ["--const", "D=384", "--const", "H=6", "--const", "L=6", "--dim", "T=256"]
COURSE_CONSTS = {"D": 384, "H": 6, "L": 6}
COURSE_BATCH = 16
COURSE_WINDOW = 256
COURSE_REPEAT = 3  # timed steps of each realization: a course step takes seconds


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, type=Path, help="where records and runs go")
    ap.add_argument("--checkpoint", required=True, help="the trained GPT the step is solved at")
    ap.add_argument("--data", help="a `presk data` file of 64-token windows (default: made)")
    ap.add_argument("--steps", type=int, default=200, help="steps of each run (default 200)")
    ap.add_argument("--lr", default="3e-3", help="the solve's peak learning rate (3e-3)")
    ap.add_argument(
        "--profile", help="the roofline the solves price time with (default: this machine's)"
    )
    ap.add_argument(
        "--only-trajectory",
        action="store_true",
        help="train and evaluate only, under the solved records already in --work",
    )
    ap.add_argument(
        "--only-course",
        action="store_true",
        help="the course's scale alone, from the record solved at 1e-3 already in --work",
    )
    ap.add_argument(
        "--course",
        action="store_true",
        help="then time the step solved at 1e-3 at the course's scale beside all-f64 and "
        "all-f32, and train the trajectory there",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    opts = arguments().parse_args(argv)
    opts.work.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d', time.gmtime())}, {machine()}")
    if opts.only_course:
        course(opts.work / "step_1e-3.json", opts)
        return 0
    data = opts.data or made_data(opts.work, 64)
    step = [PROGRAM, "--entry", "loss", *MODEL, "--dim", "B=2", "--weights", opts.checkpoint]
    step += ["--data", data, "--lr", opts.lr]
    priced = ["--profile", opts.profile] if opts.profile else []
    solved = {budget: opts.work / f"step_{budget}.json" for budget in BUDGETS}
    if not opts.only_trajectory:
        for budget, path in solved.items():
            run("solve", "--step", *step, *priced, "--budget", budget, "--out", path, capture=True)
        records = ",".join(f"@{path}" for path in solved.values())
        realize = f"f64,f32,bf16,recipe,{records}"
        run("calibrate", "--step", *step, "--realize", realize, capture=True)
    rows = {f"the solved step, {b}": (f"step_{b}", f"@{path}") for b, path in solved.items()}
    rows["the recipe"] = ("recipe", f"@{recipe_record(opts.work)}")
    trajectory(Runs(MODEL, data, opts.work, opts.steps), rows, CONSTS, data, opts.steps)
    if opts.course:
        course(solved["1e-3"], opts)
    return 0


def made_data(work: Path, window: int) -> str:
    """The corpus texts in windows of `window` tokens (`presk data`), made once."""
    data = work / f"text{window}.psk.d"
    if not data.exists():
        texts = sorted((REPO / "corpus" / "nlp" / "data").glob("*.txt"))
        run("data", *texts, "--window", window, "--out", data)
    return str(data)


def trajectory(runs: Runs, solved: dict, consts: dict, data: str, steps: int) -> None:
    """Train from scratch under all-f64, all-f32 and each of `solved` (by a row's name, its
    run's name and its --realize), and all-f64 at the yardstick's seeds; evaluate each in
    f64 on held-out windows."""
    start = time.perf_counter()
    f64 = runs.trained("f64", "f64", {})
    rows = {"all-f64, seed 0": f64, "all-f32": runs.trained("f32", "f32", {})}
    for name, (run_name, realize) in solved.items():
        rows[name] = runs.trained(run_name, realize, {})
    for seed in SEEDS:
        rows[f"all-f64, seed {seed}"] = runs.trained(f"f64_seed{seed}", "f64", {}, seed)
    core = presk.load(PROGRAM).elaborate("loss", {"B": 8, "T": runs_window(runs)}, consts)
    base, base_ms = runs.loss(f64), step_ms(f64)
    print(f"\nthe trajectory: {steps} steps from scratch, {' '.join(runs.model)}, evaluated in "
          f"f64 on the validation windows of {data}\n")  # fmt: skip
    print("| trained under | validation loss | vs all-f64 | ‖θ − θ_f64‖ / ‖θ_f64‖ "
          "| ms / step | speed-up vs all-f64 |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, ckpt in rows.items():
        loss, ms = runs.loss(ckpt), step_ms(ckpt)
        vs = f"{loss - base:+.1e}" if loss != base else "0"
        distance = f"{parameter_distance(core, ckpt, f64):.2e}" if ckpt != f64 else "0"
        print(f"| {name} | {loss:.6f} | {vs} | {distance} | {ms:.1f} | {base_ms / ms:.2f}× |")
    print(f"\ntraining and evaluation took {(time.perf_counter() - start) / 60:.0f} min")


def runs_window(runs: Runs) -> int:
    """The T a run's model flags bind."""
    return int(next(f for f in runs.model if f.startswith("T=")).split("=")[1])


def course(record: Path, opts) -> None:
    """The step solved at 1e-3, at the course's scale: timed beside all-f64 and all-f32 in
    one `presk bench --train-step` run, then its trajectory."""
    bench = [PROGRAM, "--entry", "loss", *COURSE, "--dim", f"B={COURSE_BATCH}", "--train-step"]
    run("bench", *bench, "--backends", "mlir", "--realize", f"f64,f32,@{record}",
        "--repeat", COURSE_REPEAT, capture=True)  # fmt: skip
    data = made_data(opts.work, COURSE_WINDOW)
    course_runs = Runs(COURSE, data, opts.work / "course", opts.steps)
    course_runs.work.mkdir(exist_ok=True)
    train = list(curve.TRAIN)
    train[train.index("B=8")] = f"B={COURSE_BATCH}"
    del train[train.index("--plan") : train.index("--plan") + 2]  # the cost model's layouts
    curve.TRAIN = tuple(train)
    solved = {"the solved step, 1e-3": ("step_1e-3", f"@{record}")}
    trajectory(course_runs, solved, COURSE_CONSTS, data, opts.steps)


def recipe_record(work: Path) -> Path:
    """The recipe (presk/precision/step_gap.py) as a record `presk train` reads."""
    core = presk.load(PROGRAM).elaborate("loss", {"B": 8, "T": 64}, CONSTS, train_step=True)
    r = recipe(core)
    path = work / "recipe.json"
    path.write_text(json.dumps({"default": r.default, "storage": r.storage}, indent=1) + "\n")
    return path


def step_ms(checkpoint: str) -> float:
    """A run's mean step in ms, from its log: first to last logged step."""
    with open(Path(checkpoint).parent / "log.csv") as f:
        rows = list(csv.DictReader(f))
    first, last = rows[0], rows[-1]
    steps = int(last["step"]) - int(first["step"])
    return 1e3 * (float(last["seconds"]) - float(first["seconds"])) / steps


if __name__ == "__main__":
    sys.exit(main())
