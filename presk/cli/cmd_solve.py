"""presk solve: an error budget in, the cheapest realization out, measured against the exact
reference on an envelope's samples (presk/precision/solve.py, docs/precision.md); with
--step, a budget on one training step's update gap (presk/precision/step_solve.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace

from presk import realize
from presk.api import Core
from presk.cli.common import positive_count, real_number, seed_number, whole_number
from presk.cli.flags import add_program_args, recorded_help, reference_bits
from presk.cli.programs import (
    add_reference_arg,
    add_warmup_args,
    elaborate_args,
    envelope_of,
    load_program,
)
from presk.cli.recorded import apply_checkpoint
from presk.errors import BindingError, UsageError
from presk.fileio import check_writable, write_atomic
from presk.precision.calibrate import Job
from presk.precision.choices import SWEEPS
from presk.precision.explain import moves_record
from presk.precision.integers import SCHEMES, is_integer, parse_menu
from presk.precision.offers import ROUNDINGS, RUNGS, envelope_sweep, menu
from presk.precision.profile import calibrate, machine_profile, other_machine, read_profile
from presk.precision.quant_pass import quantize_after, table_text
from presk.precision.sensitivity import AT_INITIALISATION, zero_at_initialisation
from presk.precision.solve import (
    MEASURES,
    NARROWINGS,
    Gauge,
    Options,
    Solution,
    held_out_samples,
    solve,
)
from presk.precision.solve_text import decisions, names, step_summary, summary
from presk.precision.step_gap import Setup
from presk.precision.step_solve import GRAINS, solve_step
from presk.precision.versus import answered, versus
from presk.progress import Progress
from presk.runtime.inputs import parameters
from presk.toolchain import default_threads
from presk.train.data import Windows
from presk.train.loop import Hyper

budget_number = real_number("a positive number", strict=True)
OBJECTIVES = ("time", "bytes")  # --objective's choices
# the flags of an envelope's solve, which --step does not read
NOT_STEP = (
    "precision",
    "budget_abs",
    "narrow",
    "heldout",
    "exhaustive",
    "menu",
    "quant",
    "force",
)
# solve notes --sweep f64 when the reference's sweep took more than this share of its time,
# and at least these seconds (a shorter sweep is not worth a line, whatever its share)
SWEEP_SHARE = 0.5
SWEEP_SECONDS = 10.0
MOST = 40  # --step's measurements at most: a native step and its gap take seconds each
# --step's own flags with their defaults (None in the parser, so that one given without
# --step is seen and refused)
STEP_DEFAULTS = {
    "grain": "function",
    "data": None,
    "warmup": 10,
    "lr": Hyper.lr,
    "bits": 64,
    "seed": 0,
    "measurements": MOST,
}


def configure(p) -> None:
    add_program_args(p)
    add_solve_args(p, p.add_mutually_exclusive_group(required=True), precision_required=False)
    add_step_args(p)
    p.add_argument("--out", required=True, metavar="R.json", help="write the realization here")
    p.add_argument(
        "--sites",
        type=whole_number(0, 2**31, "a whole number from 0"),
        default=0,
        metavar="N",
        help="print the N decisions that save the most bytes",
    )


def add_solve_args(p, budgets, precision_required: bool = True) -> None:
    """The flags that shape a solve, `--budget` and `--budget-abs` in the exclusive group
    `budgets` (presk explain --budget solves with them too)."""
    p.add_argument(
        "--precision",
        required=precision_required,
        metavar="ENV.json",
        help="the magnitude envelope (presk calibrate --precision) whose samples are measured",
    )
    budgets.add_argument(
        "--budget",
        type=budget_number,
        metavar="ε",
        help="the largest gap to the exact output, relative to its largest magnitude (|L|); "
        "with --step, the largest update gap ‖θ̂′ − θ′‖₂/‖θ′ − θ‖₂",
    )
    budgets.add_argument(
        "--budget-abs", type=budget_number, metavar="ε", help="the largest gap, absolute"
    )
    p.add_argument(
        "--weights",
        metavar="CKPT|P.npz|P.safetensors",
        help="the parameters, which must be the envelope's (default: the envelope's); "
        "--step's trained parameters" + recorded_help("--entry, --const, --dim, --remat"),
    )
    p.add_argument(
        "--min-gain",
        type=real_number("a number from 0"),
        default=1e-3,
        metavar="θ",
        help="offer a value only if its first narrowing saves θ·B bytes, B the all-f64 "
        "traffic (default 1e-3; 0 turns the rule off)",
    )
    p.add_argument(
        "--rounding",
        choices=ROUNDINGS,
        default="weighted",
        help="a term's rounding: weighted (default), Σ|∂L/∂vᵢ|·|fl_t(vᵢ) − vᵢ| element by "
        "element from the sweep; the envelope's measured one; or u(t)·magnitude",
    )
    p.add_argument(
        "--sweep",
        choices=SWEEPS,
        default="reference",
        help="where the sensitivity sweep runs: on the exact reference (default), or in "
        "binary64 on the kernel evaluator (f64: faster, for large models)",
    )
    p.add_argument(
        "--estimate",
        choices=("sum", "rss"),
        default="sum",
        help="the terms' sum (default), or their root-sum-square aimed at budget/--margin",
    )
    p.add_argument(
        "--margin",
        type=real_number("a positive number", strict=True),
        default=2.5,
        help="what --estimate rss, --narrow and --step divide the budget by (default 2.5)",
    )
    p.add_argument(
        "--measure",
        choices=MEASURES,
        default="kernel",
        help="run candidates on the kernel evaluator (default) or natively: the same bits",
    )
    p.add_argument(
        "--narrow",
        choices=NARROWINGS,
        help="after acceptance, narrow each decision one rung while the measured gap stays "
        "inside budget/--margin (measured); then undo the last steps until the held-out "
        "samples are inside too (heldout)",
    )
    p.add_argument(
        "--heldout",
        type=positive_count,
        metavar="M",
        help="measure the solution on the M samples after the envelope's in its data file "
        "(default with --narrow heldout: as many as the envelope's)",
    )
    p.add_argument(
        "--exhaustive",
        action="store_true",
        help="also find the estimate's optimum over every assignment (12 values at most)",
    )
    p.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="time",
        help="minimise this machine's predicted time (default: from all-f32 where all-f32 "
        "is inside the budget; the profile fitted once and kept in the cache) or the bytes "
        "of traffic",
    )
    p.add_argument(
        "--profile",
        metavar="P.json",
        help="price time with this roofline (presk bench --calibrate) instead of this "
        "machine's own",
    )
    p.add_argument(
        "--menu",
        metavar="RUNGS",
        help="the rungs offered, f64,f32 and any of bf16, int8, int4 (default f64,f32,bf16): "
        "integers, under absmax or pow2 scales, for parameters of rank two or more",
    )
    p.add_argument(
        "--quant",
        action="store_true",
        help="after the float solve, store matrices as int8 or int4 where the measurement "
        "allows, priced by the root-sum-square of gradient × move",
    )
    p.add_argument(
        "--scheme",
        choices=SCHEMES,
        help="--quant's scales: absmax (default) or pow2",
    )
    p.add_argument(
        "--workers",
        type=positive_count,
        metavar="N",
        help="local processes the reference's samples are spread over (default: the cores)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="send the reference's samples to this Dask scheduler instead (needs presk[cluster])",
    )
    add_reference_arg(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="solve even where the sensitivities are vacuous (exactly 0 at initialised "
        "parameters), with a warning",
    )


def add_step_args(p) -> None:
    """--step and the flags of the training step it solves."""
    p.add_argument(
        "--step",
        action="store_true",
        help="solve one training step of a loss: --budget binds the update gap "
        "‖θ̂′ − θ′‖₂/‖θ′ − θ‖₂ (needs --weights)",
    )
    p.add_argument(
        "--grain",
        choices=GRAINS,
        help="--step: a type per function of the step (default) or per stored value",
    )
    p.add_argument("--data", metavar="FILE.psk.d", help="--step: the batches' token windows")
    add_warmup_args(p, defaults=False)
    p.add_argument(
        "--bits",
        type=reference_bits,
        help="--step: the reference's precision in bits (default 64)",
    )
    p.add_argument("--seed", type=seed_number, help="--step: the batches' seed (default 0)")
    p.add_argument(
        "--measurements",
        type=positive_count,
        metavar="N",
        help=f"--step: native steps measured at most (default {MOST})",
    )


def run(args) -> int:
    if args.weights:
        apply_checkpoint(args, args.weights)
    if args.step:
        return run_step(args)
    if args.precision is None:
        raise UsageError("solve needs the envelope: give --precision ENV.json (or --step)")
    given = [f"--{n}" for n in STEP_DEFAULTS if getattr(args, n) is not None]
    if given:
        raise UsageError(f"{given[0]} belongs to a training step's solve: give --step")
    moves_path = moves_path_of(args.out)
    for path in (args.out, moves_path):  # before the sweep and the measurements
        check_writable(path)
    core, solution, gauge = solved(args)
    options = options_of(args)
    with Progress(f"presk {args.command}: timing the record, all-f32 and all-f64", phase=True):
        compared = versus(core, solution.menu, solution.assignment, gauge)
        # under time, a uniform realization that ran faster inside the budget is the record
        solution, compared = answered(solution, compared, options.estimate, gauge)
    write(solution, args.out, moves_path)
    print(
        summary(
            solution, options, args.measure, core.entry, args.file, args.out, moves_path, compared
        )
    )
    if solution.quant_pass is not None:
        print(table_text(solution.quant_pass))
    if args.sites:
        print(decisions(solution, args.sites))
    return 0


def run_step(args) -> int:
    """presk solve --step: the training step's realization under --budget."""
    given = [f"--{n.replace('_', '-')}" for n in NOT_STEP if getattr(args, n) not in (None, False)]
    if given:
        raise UsageError(f"--step measures the training step, not an envelope: drop {given[0]}")
    if args.weights is None:
        raise UsageError("--step solves a step from trained parameters: give --weights CKPT")
    check_writable(args.out)  # before the measurements
    for name, default in STEP_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    core = elaborate_args(args, load_program(args.file), train_step=True)
    data = Windows.load(args.data) if args.data else None
    params = parameters(core.view, args.seed, args.weights)
    setup = Setup(core, params, data, args.warmup, args.lr, args.seed, args.bits, args.reference)
    profile = objective_profile(args)
    with Progress("presk solve --step: measuring the step's realizations", phase=True):
        solution = solve_step(
            setup, args.grain, args.budget, args.margin, args.measurements, profile, args.min_gain
        )
    write_atomic(args.out, json.dumps(solution.record(), indent=1) + "\n")
    realize.read("@" + args.out)
    print(step_summary(solution, setup, args.file, args.out))
    return 0


def menu_rungs(args) -> tuple[str, ...]:
    """The menu `--menu` names, checked with `--quant` and `--scheme` (E0001)."""
    rungs = parse_menu(args.menu) if args.menu is not None else RUNGS
    if args.quant and any(is_integer(t) for t in rungs):
        raise UsageError(
            "--quant quantises after the float solve, --menu's integers in it: give one"
        )
    if args.scheme is not None and not args.quant:
        raise UsageError("--scheme chooses --quant's scales: give --quant")
    return rungs


def solved(args) -> tuple[Core, Solution, Gauge]:
    """The entry the flags name and its solution under the flags of `add_solve_args`,
    each long phase timed (presk/progress.py), and the gauge that measured it."""
    started = time.monotonic()
    rungs = menu_rungs(args)
    profile = objective_profile(args)
    program = load_program(args.file)
    core = elaborate_args(args, program)
    envelope = envelope_of(args, core)
    meta = replace(envelope.meta, reference=args.reference)  # what the gaps are measured on
    envelope = replace(envelope, meta=meta)
    held = held_out(args, core, meta)  # refused before the sweep if there are none
    command = f"presk {args.command}"
    where = "on the reference" if args.sweep == "reference" else "in binary64 (--sweep f64)"
    with Progress(f"{command}: sensitivity sweep {where}", phase=True) as sweep:
        integers = args.quant or any(is_integer(t) for t in rungs)  # priced by g·δ
        found = envelope_sweep(core, envelope, args.sweep, keep_gradients=integers)
        swept = sweep.elapsed
        offered = menu(
            core, envelope, found, args.rounding, args.min_gain, profile, rungs, quant=args.quant
        )
        # refused in the phase, so that no phase line comes before the error
        warning = refuse_vacuous(args, offered, found)
    if warning is not None:
        print(warning, file=sys.stderr)
    options = options_of(args)
    job = Job(program.ast.text, args.file, args.remat, meta)
    workers = args.workers if args.workers is not None else default_threads()
    gauge = Gauge(core, envelope, job, offered, args.measure, workers, args.scheduler)
    held_gauge = gauge.moved_to(held) if held else None
    with Progress(f"{command}: the exact outputs of {meta.samples} samples", phase=True):
        gauge.exact  # noqa: B018 - computed once here, so that its time is its own phase
    with Progress(f"{command}: measuring candidates", phase=True):
        solution = solve(offered, options, gauge, held_gauge)
        if args.quant:
            scheme = args.scheme or "absmax"
            solution = quantize_after(solution, core, gauge, found.gradients, scheme, held_gauge)
    solution.radius = gauge.radius  # the reference's, which every measured gap includes
    if solution.held_out is not None:
        solution.held_out = replace(solution.held_out, radius=held_gauge.radius)
    note = sweep_note(args.sweep, swept, time.monotonic() - started)
    if note is not None:
        print(note, file=sys.stderr)
    return core, solution, gauge


def objective_profile(args):
    """The profile time is priced with: `--profile`'s (a warning if it is another CPU's), or
    this machine's, fitted on the first solve and kept in the cache; None for bytes."""
    if args.objective == "bytes":
        if args.profile is not None:
            raise UsageError("--profile prices time, and --objective bytes counts bytes: give one")
        return None
    if args.profile is None:
        return machine_profile(fit=fitted_profile)
    profile = read_profile(args.profile)
    if other_machine(profile):
        print(f"warning: {args.profile}: {other_machine(profile)}", file=sys.stderr)
    return profile


def fitted_profile(threads: int):
    """This machine's profile fitted, a phase of its own: the first solve on a machine."""
    with Progress("presk solve: fitting this machine's profile (once)", phase=True):
        return calibrate(threads=threads)


def options_of(args) -> Options:
    """The solve's options, from the flags of `add_solve_args`."""
    return Options(
        budget=args.budget if args.budget is not None else args.budget_abs,
        absolute=args.budget is None,
        estimate=args.estimate,
        margin=args.margin,
        exhaustive=args.exhaustive,
        narrow=args.narrow,
    )


def refuse_vacuous(args, offered, found) -> str | None:
    """Refuse (E3013) a solve whose sensitivities are vacuous, unless `--force`: then
    the warning to print. Values offered whose sensitivity is exactly 0 at parameters drawn
    from their initializers (as `presk dump --stage sensitivity` says) cost nothing in any
    rung, so the estimate narrows them blind."""
    zero = zero_at_initialisation(found, offered.offered)
    if not zero:
        return None
    why = (
        f"the solve is vacuous: {len(zero)} of the {len(offered.offered)} values offered have "
        f"a sensitivity of exactly 0{names(zero)}, so the estimate charges "
        f"nothing for narrowing them: {AT_INITIALISATION}"
    )
    if not args.force:
        raise BindingError(
            f"{args.precision}: {why}; calibrate the envelope with --weights of trained "
            "parameters, or give --force",
            code="E3013",
        )
    return f"warning: {args.precision}: {why}; solving anyway (--force)"


def sweep_note(sweep: str, swept: float, total: float) -> str | None:
    """A note naming `--sweep f64` when the sweep on the reference took most of the
    solve's time (`swept` of `total` seconds), None otherwise."""
    if sweep != "reference" or swept < SWEEP_SECONDS or swept <= SWEEP_SHARE * total:
        return None
    return (
        f"note: the sensitivity sweep on the reference took {swept:.1f} s of the solve's "
        f"{total:.1f} s; --sweep f64 runs it in binary64 on the kernel evaluator, in a "
        "fraction of the time (docs/precision.md, section 7)"
    )


def held_out(args, core, meta):
    """The held-out samples' meta, if `--heldout` or `--narrow heldout` asks for them."""
    if args.heldout is not None:
        return held_out_samples(core, meta, args.heldout, f"--heldout {args.heldout}")
    if args.narrow == "heldout":
        return held_out_samples(core, meta, meta.samples, "--narrow heldout")
    return None


def moves_path_of(out: str) -> str:
    """The moves' file beside the record: `R.json` -> `R.moves.json` (the realization
    schema has no field for them)."""
    stem = out[: -len(".json")] if out.endswith(".json") else out
    return stem + ".moves.json"


def write(solution: Solution, out: str, moves_path: str) -> None:
    """The record, checked by reading it back as `--realize @R.json` does, and the moves."""
    write_atomic(out, json.dumps(solution.record(), indent=1) + "\n")
    realize.read("@" + out)
    moves = moves_record(solution, os.path.basename(out))  # what presk explain reads
    write_atomic(moves_path, json.dumps(moves, indent=1) + "\n")
