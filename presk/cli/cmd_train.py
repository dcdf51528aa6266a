"""presk train: train an entry's parameters with AdamW (the prelude's adamw module)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict

from presk import backends, stages
from presk import realize as realizations
from presk.cli.common import count, positive_count, real_number, seed_number
from presk.cli.flags import Defaulted, add_program_args, given
from presk.cli.programs import (
    add_backend_args,
    bind_window,
    bindings,
    compile_args,
    elaborate_args,
    load_program,
    plan_of,
)
from presk.cli.recorded import apply_checkpoint
from presk.errors import BindingError, UsageError
from presk.front.bindings import argument_dim
from presk.plans import is_named
from presk.runtime.inputs import parameters
from presk.train.data import Windows
from presk.train.evaluate import backend_words
from presk.train.loop import (
    BEST,
    SCHEDULE,
    Hyper,
    State,
    Trainer,
    check_trainable,
    check_training_meta,
    resume,
    zeros_like,
)
from presk.train.tokenizer import check_same, checkpoint_meta, recorded, to_meta

DEFAULT_STEPS = 100  # without --steps or --epochs


def configure(p) -> None:
    add_program_args(p, default_entry="loss")
    add_backend_args(p, default=Defaulted("mlir"))
    p.add_argument(
        "--steps",
        type=positive_count,
        help=f"steps to train (default: --epochs of the data, else {DEFAULT_STEPS}; with "
        "--resume, the run's; more than the run's extends it)",
    )
    p.add_argument(
        "--epochs", type=positive_count, help="passes over the training windows (with --data)"
    )
    p.add_argument(
        "--batch",
        type=positive_count,
        metavar="B",
        help="bind the dim sizing the first axis of the entry's first argument",
    )
    p.add_argument(
        "--seed",
        type=seed_number,
        help="seed of the parameters, batches and dropout (default 0; --resume: the run's)",
    )
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data`; without it, arguments are drawn each step",
    )
    p.add_argument(
        "--lr",
        type=real_number("a finite learning rate from 0"),
        help=f"peak learning rate (default {Hyper.lr}; --resume: the run's)",
    )
    p.add_argument(
        "--warmup",
        type=count,
        help="warm-up steps (default: a tenth of the run; --resume: the run's)",
    )
    p.add_argument(
        "--weight-decay",
        type=real_number("a finite weight decay from 0"),
        help=f"AdamW's weight decay (default {Hyper.wd}; --resume: the run's)",
    )
    p.add_argument(
        "--clip",
        type=real_number("a finite positive gradient norm", strict=True),
        help=f"largest gradient 2-norm (default {Hyper.clip}; --resume: the run's)",
    )
    p.add_argument(
        "--log-every",
        type=positive_count,
        help="log a line every K steps (default: 20 lines a run; --resume: the run's)",
    )
    p.add_argument(
        "--eval-every",
        type=positive_count,
        metavar="K",
        help="with --data: the validation loss every K steps and at the last; the lowest's "
        "parameters in best.psk.d (--resume: the run's)",
    )
    p.add_argument(
        "--eval-batches",
        type=positive_count,
        metavar="N",
        help="with --eval-every: at most N validation batches an evaluation (default: all; "
        "--resume: the run's)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=count,
        metavar="K",
        help="also checkpoint every K steps (default 0: never; --resume: the run's)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="checkpoint, log.csv and loss.png go here (default runs/<program>; with "
        "--resume, the checkpoint's directory)",
    )
    p.add_argument(
        "--init",
        metavar="P",
        help="start from these parameters (a checkpoint, or an .npz or .safetensors file "
        "from presk params) instead of the initializers",
    )
    p.add_argument(
        "--resume",
        metavar="CKPT.psk.d",
        help="continue from a checkpoint of this run (to a larger --steps: extend it)",
    )
    p.add_argument(
        "--stop-at",
        type=positive_count,
        metavar="K",
        help="checkpoint and stop after step K (resume later)",
    )
    p.add_argument("--quiet", action="store_true", help="no log lines, no progress line")


def _bind_batch(args, program) -> None:
    """--batch B binds the dim sizing the first axis of the entry's first argument, found
    in the source: binding it must come before any elaboration, which needs it bound."""
    if args.batch is None:
        return
    bound = bindings(args, program)  # the entry resolved, nothing elaborated
    name = argument_dim(program.ast, bound["entry"], bound["consts"], 0)
    if name is None:
        raise BindingError(
            f"--batch binds the dim sizing the first axis of the entry's first argument; "
            f"{args.entry}'s is not sized by a dim",
            code="E3004",
        )
    dims = bound["dims"]
    if name in dims and dims[name] != args.batch:
        raise BindingError(
            f"--batch {args.batch} and --dim {name}={dims[name]} disagree", code="E3004"
        )
    args.dim = [d for d in (args.dim or []) if not d.startswith(f"{name}=")] + [
        f"{name}={args.batch}"
    ]


# The flags of a run's setup a resumed run takes from its checkpoint when left out (the
# bindings, realization and remat come through `apply_checkpoint`), and their defaults.
SETUP_DEFAULTS = {
    "seed": 0,
    "lr": Hyper.lr,
    "warmup": 0,
    "weight_decay": Hyper.wd,
    "clip": Hyper.clip,
}
_HYPER_FLAGS = {"lr": "lr", "warmup": "warmup", "weight_decay": "wd", "clip": "clip"}


def setup_of_run(args, meta: dict) -> None:
    """Fill what `presk train --resume` was not given from the run's recorded setup: its
    data, seed, hyperparameters and backend (a flag given is compared by `resume`)."""
    if args.data is None and meta.get("data"):
        args.data = meta["data"]
    if args.seed is None and isinstance(meta.get("seed"), int):
        args.seed = meta["seed"]
    hyper = meta.get("hyper") if isinstance(meta.get("hyper"), dict) else {}
    for flag, key in _HYPER_FLAGS.items():
        if getattr(args, flag) is None and key in hyper:
            setattr(args, flag, hyper[key])
    if not given(args.backend) and meta.get("backend") in backends.REGISTRY:
        args.backend = meta["backend"]


# What a schedule flag left unset means, in the line saying a resumed run changes it
_UNSET = {"eval_every": "none", "eval_batches": "all", "checkpoint_every": "none"}


def schedule_of_run(args, meta: dict) -> str | None:
    """Fill the schedule flags (loop.SCHEDULE) `presk train --resume` was not given from
    the run's, as its other setup; what the flags given change, as one line to say
    (None when they change nothing, or the checkpoint predates the schedule's record)."""
    changes = []
    for key in SCHEDULE:
        if key not in meta:
            continue
        ran, asked = meta[key], getattr(args, key)
        if asked is None:
            setattr(args, key, ran)
        elif asked != ran:
            was = ran if ran else _UNSET[key]
            changes.append(f"--{key.replace('_', '-')} {asked} (the run's: {was})")
    if not changes:
        return None
    return f"resuming with {', '.join(changes)} from step {meta['step'] + 1} on"


def realization_record(realization: realizations.Realization) -> dict:
    """The realization as a checkpoint records it: its fields, empty ones left out, so
    `f32` and a file saying {"default": "f32"} are one setup and an edited file is not.
    `functions` is always there: a record without it was written when the C library's
    were the default (`realize.read`)."""
    record = asdict(realization)
    del record["spelling"]
    return {k: v for k, v in record.items() if v}


def planned_steps(args, data: Windows | None, core) -> int | None:
    """The steps --steps or --epochs asks for, None if neither is given."""
    if args.steps is not None:
        return args.steps
    if args.epochs is None:
        return None
    if data is None:
        raise UsageError("--epochs counts passes over --data: give --data or --steps")
    steps = args.epochs * data.batches_per_epoch(core.entry_function.arg_types[-1].shape[0])
    if steps < 1:
        raise UsageError(f"--epochs {args.epochs}: {data.path} fills no batch")
    return steps


def resumed_steps(path: str, asked: int | None, ran: int, reached: int) -> int:
    """The steps a run resumed from `path` (a run of `ran` steps, at step `reached`) trains
    to: its run's, or `asked`, which may extend the run (said on stderr: the learning-rate
    schedule ends at the new last step) but not shorten it (E0001)."""
    steps = ran if asked is None else asked
    if steps < reached:
        raise UsageError(f"--steps {steps}: the checkpoint {path} is already at step {reached}")
    if steps < ran:
        raise UsageError(
            f"--steps {steps}: {path} is of a run of {ran} steps; --resume extends a run, "
            "it does not shorten one"
        )
    if steps == reached:
        raise UsageError(
            f"--resume {path}: its run ended at step {reached}; nothing is left to train "
            f"(give --steps past {reached} to extend the run)"
        )
    if steps > ran:
        print(
            f"extending the run from {ran} to {steps} steps: "
            f"the learning-rate schedule now ends at step {steps}",
            file=sys.stderr,
        )
    return steps


def check_stop_at(stop_at: int | None, reached: int) -> None:
    """--stop-at K must name a step after the checkpoint's (E0001)."""
    if stop_at is not None and stop_at <= reached:
        raise UsageError(f"--stop-at {stop_at}: the checkpoint is already at step {reached}")


def run(args) -> int:
    if args.init and args.resume:
        raise UsageError("--init starts a run and --resume continues one: give one of them")
    run_meta = apply_checkpoint(args, args.resume, plan=True) if args.resume else None
    rescheduled = None
    if run_meta is not None:
        check_training_meta(args.resume, run_meta)  # before any of it is used
        setup_of_run(args, run_meta)
        rescheduled = schedule_of_run(args, run_meta)
    if args.eval_every is not None and not args.data:
        raise UsageError("--eval-every evaluates over --data's validation windows: give --data")
    if args.eval_batches is not None and args.eval_every is None:
        raise UsageError("--eval-batches bounds the evaluations of --eval-every: give both")
    for flag, default in SETUP_DEFAULTS.items():
        if getattr(args, flag) is None:
            setattr(args, flag, default)
    # a plan's type, if it names one; the reference takes no plan
    plan = None if backends.backend(args.backend).exact else plan_of(args)
    realization = stages.Lowering.of(args.realize, plan).realization
    check_trainable(realization)  # before the program is elaborated and compiled
    program = load_program(args.file)
    _bind_batch(args, program)
    data = Windows.load(args.data) if args.data else None
    if data is not None:
        if args.resume:  # the same data path, but its file may have been written anew
            check_same(recorded(run_meta, args.resume), args.resume, data.tokenizer, args.data)
        bind_window(args, program, data.window)
    trained = elaborate_args(args, program, train_step=True)
    core = trained.view
    asked = planned_steps(args, data, core)
    hyper = Hyper(lr=args.lr, warmup=args.warmup, wd=args.weight_decay, clip=args.clip)
    meta = {
        "program": os.path.abspath(args.file),
        "entry": args.entry,
        "dims": sorted(args.dim or []),
        "consts": sorted(args.const or []),
        "seed": args.seed,
        "backend": args.backend,
        "bits": args.bits,
        "realize": realization_record(realization),
        "remat": args.remat,
        "data": os.path.abspath(args.data) if args.data else None,
        "init": os.path.abspath(args.init) if args.init else None,
        # a plan given is recorded, as run --weights reads it back (auto, default, tuned by name)
        **({"plan": plan if is_named(plan) else "@" + os.path.abspath(plan)} if plan else {}),
        "hyper": asdict(hyper),
        **(to_meta(data.tokenizer) if data is not None else {}),
    }
    if args.resume:  # checked before the kernels are compiled
        state, ran = resume(args.resume, core, meta)
        check_stop_at(args.stop_at, state.step)
        steps = resumed_steps(args.resume, asked, ran, state.step)
        if rescheduled:
            print(rescheduled, file=sys.stderr)
    else:
        params = parameters(core, args.seed, args.init)
        if args.init and data is not None:  # parameters trained on other tokens are refused
            initial = recorded(checkpoint_meta(args.init), args.init)
            check_same(initial, args.init, data.tokenizer, args.data)
        state = State(params, zeros_like(params), zeros_like(params))
        steps = DEFAULT_STEPS if asked is None else asked
    log_every = args.log_every or max(1, steps // 20)
    checkpoint_every = args.checkpoint_every or 0
    meta |= {
        "steps": steps,
        "log_every": log_every,
        "eval_every": args.eval_every,
        "eval_batches": args.eval_batches,
        "checkpoint_every": checkpoint_every,
    }
    out = args.out or (
        os.path.dirname(os.path.abspath(args.resume))  # a resumed run goes on where it was
        if args.resume
        else os.path.join("runs", os.path.splitext(os.path.basename(args.file))[0])
    )
    backend = compile_args(args, trained).backend
    trainer = Trainer(
        core,
        backend,
        steps=steps,
        seed=args.seed,
        hyper=hyper,
        data=data,
        log_every=log_every,
        ckpt_every=checkpoint_every,
        out=out,
        meta=meta,
        quiet=args.quiet,
        eval_every=args.eval_every or 0,
        eval_batches=args.eval_batches,
    )
    t0 = time.perf_counter()
    last = trainer.run(state, args.stop_at)
    if not args.quiet:
        files = f"checkpoint, {BEST}" if state.best_validation() is not None else "checkpoint"
        print(
            f"trained to step {state.step} in {time.perf_counter() - t0:.1f} s "
            f"on {backend_words(backend)}: "
            f"loss {state.history[0]['loss']:.6f} -> {last['loss']:.6f}; "
            f"{files}, log.csv and loss.png in {out}"
        )
    return 0
