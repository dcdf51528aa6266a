"""presk train: train an entry's parameters with AdamW (the prelude's adamw module)."""

from __future__ import annotations

import os
import time
from dataclasses import asdict

from presk import realize as realizations
from presk.cli.common import count, positive_count, real_number, seed_number
from presk.cli.programs import (
    add_backend_args,
    add_program_args,
    compile_args,
    elaborate_args,
    load_program,
)
from presk.errors import BindingError, UsageError
from presk.front.bindings import parse_assignments
from presk.runtime.inputs import parameters
from presk.train.data import Windows
from presk.train.loop import Hyper, State, Trainer, check_trainable, resume, zeros_like


def configure(p) -> None:
    add_program_args(p, default_entry="loss")
    add_backend_args(p)
    p.add_argument(
        "--steps",
        type=positive_count,
        help="steps to train (default: --epochs of the data, else 100)",
    )
    p.add_argument(
        "--epochs", type=positive_count, help="passes over the training windows (with --data)"
    )
    p.add_argument(
        "--batch",
        type=positive_count,
        metavar="B",
        help="bind the batch axis (the first axis of the entry's first argument)",
    )
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the parameters, batches and dropout (default 0)",
    )
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data`; without it, arguments are drawn each step",
    )
    p.add_argument(
        "--lr",
        type=real_number("a finite learning rate from 0"),
        default=Hyper.lr,
        help=f"peak learning rate (default {Hyper.lr})",
    )
    p.add_argument(
        "--warmup", type=count, default=0, help="warm-up steps (default: a tenth of the run)"
    )
    p.add_argument(
        "--weight-decay",
        type=real_number("a finite weight decay from 0"),
        default=Hyper.wd,
        help=f"AdamW's weight decay (default {Hyper.wd})",
    )
    p.add_argument(
        "--clip",
        type=real_number("a finite positive gradient norm", strict=True),
        default=Hyper.clip,
        help=f"largest gradient 2-norm (default {Hyper.clip})",
    )
    p.add_argument(
        "--log-every",
        type=positive_count,
        help="log a line every K steps (default: 20 lines a run)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=count,
        default=0,
        metavar="K",
        help="also checkpoint every K steps",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="checkpoint, log.csv and loss.png go here (default runs/<program>)",
    )
    p.add_argument(
        "--init",
        metavar="P",
        help="start from these parameters (a checkpoint, or an .npz or .safetensors file "
        "from presk params) instead of the initializers",
    )
    p.add_argument("--resume", metavar="CKPT.psk.d", help="continue from a checkpoint of this run")
    p.add_argument(
        "--stop-at",
        type=positive_count,
        metavar="K",
        help="checkpoint and stop after step K (resume later)",
    )
    p.add_argument("--quiet", action="store_true", help="no log lines")


def _bind_batch(args, program) -> None:
    """--batch B binds the dim naming the first axis of the entry's first argument."""
    if args.batch is None:
        return
    first = elaborate_args(args, program)
    fn = first.view.entry_function
    arg_types = fn.arg_types[1:] if first.elaborated.signature.params is not None else fn.arg_types
    name = arg_types[0].axes[0].name if arg_types and getattr(arg_types[0], "axes", ()) else None
    if name is None:
        raise BindingError(
            "--batch binds the first axis of the entry's first argument, which has no name",
            code="E3004",
        )
    dims = parse_assignments(args.dim, "--dim", "E3004")
    if name in dims and dims[name] != args.batch:
        raise BindingError(
            f"--batch {args.batch} and --dim {name}={dims[name]} disagree", code="E3004"
        )
    args.dim = [d for d in (args.dim or []) if not d.startswith(f"{name}=")] + [
        f"{name}={args.batch}"
    ]


def realization_record(realization: realizations.Realization) -> dict:
    """The realization as a checkpoint records it: its fields, empty ones left out, so
    `f32` and a file saying {"default": "f32"} are one setup and an edited file is not."""
    record = asdict(realization)
    del record["spelling"]
    return {k: v for k, v in record.items() if v}


def check_stop_at(stop_at: int | None, reached: int) -> None:
    """--stop-at K must name a step after the checkpoint's (E0001)."""
    if stop_at is not None and stop_at <= reached:
        raise UsageError(f"--stop-at {stop_at}: the checkpoint is already at step {reached}")


def run(args) -> int:
    if args.init and args.resume:
        raise UsageError("--init starts a run and --resume continues one: give one of them")
    realization = realizations.read(args.realize)
    check_trainable(realization)  # before the program is elaborated and compiled
    program = load_program(args.file)
    _bind_batch(args, program)
    data = Windows.load(args.data) if args.data else None
    trained = elaborate_args(args, program, train_step=True)
    core = trained.view
    if args.steps is not None:
        steps = args.steps
    elif args.epochs is not None:
        if data is None:
            raise UsageError("--epochs counts passes over --data: give --data or --steps")
        batch = core.entry_function.arg_types[-1].shape[0]
        steps = args.epochs * data.batches_per_epoch(batch)
    else:
        steps = 100
    if steps < 1:
        raise UsageError(f"--steps {steps}: train at least one step")
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
        "hyper": asdict(hyper),
        "steps": steps,
    }
    out = args.out or os.path.join("runs", os.path.splitext(os.path.basename(args.file))[0])
    backend = compile_args(args, trained).backend
    if args.resume:
        state = resume(args.resume, core, meta)
        if state.step == steps:
            raise UsageError(
                f"--resume {args.resume}: its run ended at step {steps}; nothing is left to train"
            )
        check_stop_at(args.stop_at, state.step)
    else:
        params = parameters(core, args.seed, args.init)
        state = State(params, zeros_like(params), zeros_like(params))
    trainer = Trainer(
        core,
        backend,
        steps=steps,
        seed=args.seed,
        hyper=hyper,
        data=data,
        log_every=args.log_every or max(1, steps // 20),
        ckpt_every=args.checkpoint_every,
        out=out,
        meta=meta,
        quiet=args.quiet,
    )
    t0 = time.perf_counter()
    last = trainer.run(state, args.stop_at)
    if not args.quiet:
        print(
            f"trained to step {state.step} in {time.perf_counter() - t0:.1f} s: "
            f"loss {state.history[0]['loss']:.6f} -> {last['loss']:.6f}; "
            f"checkpoint, log.csv and loss.png in {out}"
        )
    return 0
