"""The training loop: `train.step` called once a step on a backend, with logging,
checkpoints written atomically, a CSV and a loss curve, and resumption.

A step's batch, learning rate and dropout masks depend only on the seed and the step's
number, and the optimiser's state (m, v, t) travels in the checkpoint in the backend's
own numbers, so a run resumed from a checkpoint computes what the uninterrupted run did,
bit for bit. Under a realization that types parameters (`params`), each step calls
`train.master_step`: its forward and backward read a copy of the parameters rounded to
their types, made afresh each step, and its update the master parameters, which the
state (and so the checkpoint) holds in the backend's type. Rows are logged at steps the
step number alone picks (the first, every K-th, the run's last), so a resumed run's log is
the uninterrupted run's too.

With validation data (`eval_every`), every K-th step and the last also evaluate the loss
over the validation windows at the step's parameters (presk/train/evaluate.py); the
lowest is kept as a second checkpoint, `best.psk.d`. Every step's loss is kept in memory
for the loss curve, however sparse the logged rows.
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from presk.backends.host import CallContext
from presk.core.program import HostProgram
from presk.errors import BindingError, FileFormatError, RealizationError, RuntimeDataError
from presk.fileio import write_atomic
from presk.ir.types import REAL_SCALAR, TensorType
from presk.jsontext import first_violation
from presk.progress import Progress
from presk.quantize import parameter_values
from presk.realize import Realization
from presk.runtime import checkpoint
from presk.runtime.inputs import param_type
from presk.runtime.synth import entry_arguments, synth_input
from presk.runtime.values import Tensor, Value, map_tensors
from presk.schemas import REALIZATION
from presk.train.data import Windows, next_token_pair
from presk.train.evaluate import backend_words, check_validation, validation_loss
from presk.train.step import HYPER, MASTER, SYMBOL
from presk.train.tokenizer import BPE, KINDS

# The setup a checkpoint records and a resumed run must share (E9005 otherwise), but for
# `steps`: a resumed run may extend its run (presk/cli/cmd_train.py decides).
SETUP = (
    "program",
    "entry",
    "dims",
    "consts",
    "seed",
    "backend",
    "bits",
    "realize",
    "remat",
    "data",
    "hyper",
    "steps",
)


# When a run logs, validates and checkpoints (`presk train --log-every`, `--eval-every`,
# `--eval-batches`, `--checkpoint-every`): recorded, and taken back by a resumed run for
# the flags it is not given (presk/cli/cmd_train.py), so that it validates and keeps
# best.psk.d as the run did.
SCHEDULE = ("log_every", "eval_every", "eval_batches", "checkpoint_every")

# What a run writes in --out, beside log.csv and loss.png.
CHECKPOINT = "checkpoint.psk.d"
BEST = "best.psk.d"  # the checkpoint of the lowest validation loss
LOG_FIELDS = ["step", "epoch", "loss", "lr", "grad_norm", "seconds", "val_loss"]


@dataclass
class Hyper:
    lr: float = 1e-2  # the peak learning rate
    warmup: int = 0  # steps of linear warm-up (0: a tenth of the run)
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    wd: float = 0.0
    clip: float = 1.0  # the largest 2-norm a gradient keeps


@dataclass
class State:
    params: Value
    m: Value
    v: Value
    step: int = 0  # steps taken
    history: list[dict] = field(default_factory=list)  # the logged rows

    def best_validation(self) -> float | None:
        """The lowest validation loss the history records, if any."""
        losses = [row["val_loss"] for row in self.history if "val_loss" in row]
        return min(losses, default=None)


def zeros_like(value: Value) -> Value:
    return map_tensors(lambda t: Tensor(t.type, np.zeros(t.type.shape)), value)


def _scalar(x: float) -> Tensor:
    return Tensor(REAL_SCALAR, np.array(float(x)))


def _float(t: Tensor) -> float:
    return float(np.asarray(t.data).item())


def sci(x: float, digits: int) -> str:
    """1.4102e0, 1.500e-5: scientific notation with an unpadded exponent (inf, nan as such)."""
    if not math.isfinite(x):
        return str(x)
    mantissa, exp = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exp)}"


def check_trainable(r: Realization) -> None:
    """Refuse (E7002) a realization with integer weights: training updates real numbers."""
    if r.quant:
        raise RealizationError(
            f"{r.label}: training updates real parameters, not integer weights (quant): "
            "train them real or typed (params), then quantise the result",
            code="E7002",
        )


def step_symbol(r: Realization) -> str:
    """The training step a run under `r` calls: the master weights' if it types parameters."""
    return MASTER if r.params else SYMBOL


def check_token_entry(program: HostProgram, data: Windows) -> tuple[TensorType, int]:
    """The type of an entry's (tokens, targets) arguments and their vocabulary V, checked
    against the data's windows (E3011, E3010)."""
    arguments = entry_arguments(program, program.entry_function)
    types = [t for _, t in arguments]
    ok = (
        len(types) == 2
        and all(isinstance(t, TensorType) and t.kind == "index" and t.rank == 2 for t in types)
        and types[0] == types[1]
    )
    if not ok:
        raise BindingError(
            "--data feeds an entry taking (tokens, targets : nat{V}[B, T]); "
            f"{program.entry} takes {', '.join(t.text() for t in types)}",
            code="E3011",
        )
    batch, window = types[0].shape
    vocab = vocabulary(program, arguments[0][0])
    if data.tokenizer.kind == BPE and vocab < data.tokenizer.size:
        raise BindingError(
            f"{data.path} holds the tokens of {data.tokenizer.describe()}, the entry reads "
            f"V = {vocab}: give V of at least {data.tokenizer.size}",
            code="E3011",
        )
    if window != data.window:
        raise BindingError(
            f"{data.path} holds windows of {data.window} tokens, the entry reads {window}",
            code="E3011",
        )
    if data.batches_per_epoch(batch) < 1:
        raise BindingError(
            f"{data.path} has {len(data.train)} training windows, fewer than a batch of {batch}",
            code="E3011",
        )
    return types[0], vocab


def token_argument(program: HostProgram, feeder: str) -> tuple[TensorType, int]:
    """The type of an entry's one argument, tokens `nat{V}[B, T]`, and their V: refused
    (E3014) unless the entry takes exactly that, saying who feeds it (`feeder`:
    "generation feeds it"), or (E3010) if the tokens have no bound."""
    arguments = entry_arguments(program, program.entry_function)
    tokens = arguments[0][1] if len(arguments) == 1 else None
    if not (isinstance(tokens, TensorType) and tokens.kind == "index" and tokens.rank == 2):
        taken = ", ".join(t.text() for _, t in arguments) or "nothing"
        raise BindingError(
            f"{program.entry} takes {taken}: {feeder} one argument of tokens nat{{V}}[B, T]",
            code="E3014",
        )
    return tokens, vocabulary(program, arguments[0][0])


def vocabulary(program: HostProgram, name: str) -> int:
    """The bound V of the tokens argument `name` (E3010 if it has none)."""
    bound = program.attrs.get("psk.bounds", {}).get(name)
    if bound is None:
        raise BindingError(
            f"argument {name} needs its vocabulary: declare it nat{{V}}[...]", code="E3010"
        )
    return bound


def log_line(row: dict) -> str:
    """step 100  epoch 7  loss 4.132775  lr 1.500e-5  |g| 1.4102e0 (the epoch only with
    data: drawn arguments have none)"""
    epoch = f"  epoch {row['epoch']}" if "epoch" in row else ""
    return (
        f"step {row['step']}{epoch}  loss {row['loss']:.6f}  "
        f"lr {sci(row['lr'], 3)}  |g| {sci(row['grad_norm'], 4)}"
    )


def progress(step: int, steps: int, rate: float, loss: float) -> str:
    """The training's progress line after its label: `step 40/600  12.3 steps/s  ETA 46 s
    loss 3.210000`."""
    left = (steps - step) / rate
    eta = f"{left:.0f} s" if left < 100 else f"{left / 60:.0f} min"
    return f"step {step}/{steps}  {rate:.1f} steps/s  ETA {eta}  loss {loss:.6f}"


class Trainer:
    def __init__(
        self,
        program: HostProgram,
        backend,
        *,
        steps: int,
        seed: int,
        hyper: Hyper,
        data: Windows | None,
        log_every: int,
        ckpt_every: int,
        out: str | None,
        meta: dict,
        quiet: bool = False,
        eval_every: int = 0,
        eval_batches: int | None = None,
    ):
        self.program = program
        self.backend = backend
        self.steps = steps
        self.seed = seed
        self.hyper = hyper
        self.data = data
        self.log_every = max(1, log_every)
        self.ckpt_every = ckpt_every
        self.out = out
        self.meta = meta
        self.quiet = quiet
        self.eval_every = eval_every
        self.eval_batches = eval_batches
        check_trainable(backend.realization)
        self.symbol = step_symbol(backend.realization)
        loss = program.entry_function
        self.arguments = entry_arguments(program, loss)
        self.warmup = hyper.warmup or max(1, steps // 10)
        if data is not None:
            self.token_type, self.vocab = check_token_entry(program, data)
        if eval_every:  # validation reads the data's validation windows
            check_validation(data, self.token_type.shape[0])
        self.curve: list[tuple[int, float]] = []  # (step, loss) of every step, for the plot

    @classmethod
    def detached(
        cls, program: HostProgram, backend, steps: int, seed: int, hyper=None, data=None
    ) -> Trainer:
        """A trainer for single steps, without logging or files: a step's batch drawn,
        unless `data` gives its windows."""
        return cls(
            program,
            backend,
            steps=steps,
            seed=seed,
            hyper=hyper or Hyper(),
            data=data,
            log_every=1,
            ckpt_every=0,
            out=None,
            meta={},
            quiet=True,
        )

    def batch(self, step: int) -> tuple[list[Value], int | None]:
        """The entry's arguments at step `step`, and its epoch (None without data)."""
        if self.data is None:
            bounds = self.program.attrs.get("psk.bounds", {})
            args = [
                synth_input(f"step{step}/{n}", t, bounds.get(n), self.seed)
                for n, t in self.arguments
            ]
            return args, None
        t = self.token_type
        windows, epoch = self.data.batch(step, t.shape[0], self.seed)
        tokens, targets = next_token_pair(windows, self.vocab)
        return [Tensor(t, tokens), Tensor(t, targets)], epoch

    def hyper_args(self, step: int) -> list[Tensor]:
        h = self.hyper
        values = {
            "t": step,
            "peak": h.lr,
            "warmup": self.warmup,
            "total": self.steps,
            "b1": h.b1,
            "b2": h.b2,
            "eps": h.eps,
            "wd": h.wd,
            "max_norm": h.clip,
        }
        return [_scalar(values[k]) for k in HYPER]

    def step_args(self, state: State, step: int) -> tuple[list[Value], int | None]:
        """The step's arguments at step `step` from `state`, and the batch's epoch."""
        batch, epoch = self.batch(step)
        return self.call_args(state, step, batch), epoch

    def call_args(self, state: State, step: int, batch: list[Value]) -> list[Value]:
        """The step's arguments at step `step` from `state` on `batch`: for the master
        weights' step, the parameters' read copy first."""
        read = [self.read_copy(state.params)] if self.symbol == MASTER else []
        return [*read, state.params, state.m, state.v, *self.hyper_args(step), *batch]

    def read_copy(self, params: Value) -> Value:
        """The parameters with each leaf the realization types rounded to its type: buffers
        of their types on the machine backends, float64 values on the reference."""
        backend = self.backend
        return parameter_values(params, backend.realization, native=not backend.spec.exact)

    def context(self, step: int) -> CallContext:
        return CallContext(training=True, step=step, seed=self.seed)

    def evaluated(self, step: int) -> bool:
        """Whether step `step` ends with a validation: every K-th step and the last."""
        return bool(self.eval_every) and (step % self.eval_every == 0 or step == self.steps)

    def recorded(self, step: int) -> bool:
        """Whether step `step`'s row goes into the history: the step number alone decides."""
        return step == 1 or step % self.log_every == 0 or step == self.steps or self.evaluated(step)

    def validate(self, params: Value) -> float:
        """The mean loss over the validation windows at `params`, on the training backend."""
        t = self.token_type
        v = validation_loss(
            self.backend, params, self.data, t, self.vocab, self.seed, self.eval_batches
        )
        return v.loss

    def run(self, state: State, stop_at: int | None = None) -> dict:
        """Train from the step after `state`'s (some step must remain) to the last, or to
        `stop_at`; the last step's row. A step whose loss or gradient norm is not finite
        is logged, then stops the run (E8004), as does a validation loss that is not."""
        start = time.perf_counter()
        first = state.step + 1
        last = self.steps if stop_at is None else min(self.steps, stop_at)
        self.curve = [(r["step"], r["loss"]) for r in state.history]  # before this session
        best = state.best_validation()
        with Progress("training", last - first + 1, enabled=not self.quiet) as bar:
            row = self.steps_from(state, first, last, start, best, bar)
        if self.out:
            self.save(state)
            self.write_logs(state)
        return row

    def steps_from(
        self, state: State, first: int, last: int, start: float, best: float | None, bar
    ) -> dict:
        """Steps `first` to `last`, each logged, checkpointed and shown on `bar`; the last
        step's row."""
        for step in range(first, last + 1):
            args, epoch = self.step_args(state, step)
            out = self.backend.call(args, self.context(step), self.symbol)
            loss, gnorm, lr = (_float(t) for t in out[:3])
            state.params, state.m, state.v = out[3], out[4], out[5]
            state.step = step
            self.curve.append((step, loss))
            row = {"step": step} | ({} if epoch is None else {"epoch": epoch})
            row |= {"loss": loss, "lr": lr, "grad_norm": gnorm}
            finite = math.isfinite(loss) and math.isfinite(gnorm)
            if finite and self.evaluated(step):
                row["val_loss"] = self.validate(state.params)
            row["seconds"] = round(time.perf_counter() - start, 3)
            if self.recorded(step) or not finite:
                state.history.append(row)
            # a --stop-at step is shown, not recorded: the resumed run records its own rows
            if self.recorded(step) or step == last or not finite:
                self.show(row, bar)
            if not (finite and math.isfinite(row.get("val_loss", 0.0))):
                self.diverged(state, row)
            if "val_loss" in row and (best is None or row["val_loss"] < best):
                best = row["val_loss"]
                if self.out:
                    self.save(state, BEST)
            # the rate after the session's first step, which compiles the kernels
            if step == first:
                warm = time.perf_counter()
            elif step > first:
                rate = (step - first) / (time.perf_counter() - warm)
                bar.advance(detail=progress(step, self.steps, rate, loss))
            if self.out and self.ckpt_every and step % self.ckpt_every == 0 and step != last:
                self.save(state)
        return row

    def show(self, row: dict, bar: Progress) -> None:
        """Print a row's log line (the progress line cleared first)."""
        bar.clear()
        if not self.quiet:
            print(log_line(row), flush=True)
            if "val_loss" in row:
                print(f"step {row['step']}  val loss {row['val_loss']:.6f}", flush=True)

    def diverged(self, state: State, row: dict) -> None:
        """Stop a run whose loss or gradient norm is infinite or NaN, after writing its log;
        its parameters are not checkpointed."""
        if self.out:
            self.write_logs(state)
        val = f", validation loss {row['val_loss']}" if "val_loss" in row else ""
        raise RuntimeDataError(
            f"training diverged at step {row['step']}: loss {row['loss']}, "
            f"|g| {row['grad_norm']}{val} (try a lower --lr)",
            code="E8004",
        )

    # ---- files ----
    def save(self, state: State, name: str = CHECKPOINT) -> None:
        """The state as a checkpoint in --out: `checkpoint.psk.d`, or `best.psk.d`."""
        meta = {**self.meta, "step": state.step, "history": state.history}
        checkpoint.save(
            os.path.join(self.out, name),
            state.params,
            meta,
            extra={"m": state.m, "v": state.v},
        )

    def write_logs(self, state: State) -> None:
        """log.csv, the recorded rows (an empty epoch without data, an empty val_loss where
        no validation ran), and loss.png, every step's loss and the validation points."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=LOG_FIELDS, lineterminator="\n")
        w.writeheader()
        for row in state.history:
            w.writerow({k: _cell(row.get(k)) for k in LOG_FIELDS})
        write_atomic(os.path.join(self.out, "log.csv"), buf.getvalue())
        validation = [(r["step"], r["val_loss"]) for r in state.history if "val_loss" in r]
        title = f"{self.meta.get('entry', '')} on {backend_words(self.backend)}"
        write_atomic(os.path.join(self.out, "loss.png"), loss_curve(self.curve, validation, title))


def _cell(x) -> str:
    """A log.csv cell: a float every digit (repr), nothing for a field the row lacks."""
    return "" if x is None else repr(x) if isinstance(x, float) else str(x)


def smoothed(curve: list[tuple[int, float]], weight: float = 0.9) -> list[float]:
    """An exponential moving average of (step, loss) points, each step weighing `weight`
    times the next, its bias toward the start corrected (as TensorBoard smooths): a point
    d steps after the one before decays the average by weight^d, so the sparse rows a
    resumed run has of its earlier steps are averaged as the steps they stand for."""
    out, average, norm, before = [], 0.0, 0.0, None
    for step, x in curve:
        decay = weight ** (1 if before is None else step - before)
        average = decay * average + (1 - decay) * x
        norm = decay * norm + (1 - decay)
        out.append(average / norm)
        before = step
    return out


def loss_curve(
    curve: list[tuple[int, float]], validation: list[tuple[int, float]], title: str
) -> bytes:
    """The loss curve as a PNG: each step's training loss as a light line, its moving
    average over it, the validation losses as markers; a log scale where the losses span
    more than a factor of 20."""
    from matplotlib.figure import Figure  # no pyplot: no global figures, no GUI backend

    steps = [s for s, _ in curve]
    losses = [x for _, x in curve]
    fig = Figure(figsize=(6, 3.5), dpi=100)
    ax = fig.subplots()
    ax.plot(steps, losses, color="tab:blue", alpha=0.3, linewidth=0.8, label="training loss")
    ax.plot(steps, smoothed(curve), color="tab:blue", linewidth=1.5, label="moving average (0.9)")
    if validation:
        ax.plot(
            [s for s, _ in validation],
            [x for _, x in validation],
            "o",
            color="tab:orange",
            markersize=4,
            label="validation loss",
        )
    shown = [x for x in losses + [x for _, x in validation] if math.isfinite(x)]
    if shown and min(shown) > 0 and max(shown) > 20 * min(shown):
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    return buf.getvalue()


_NAMES = {"type": "array", "items": {"type": "string"}}
_ROW = {
    "type": "object",
    "properties": {
        "step": {"type": "integer", "minimum": 1},
        "epoch": {"type": "integer", "minimum": 1},  # with --data only
        "loss": {"type": "number"},
        "lr": {"type": "number"},
        "grad_norm": {"type": "number"},
        "seconds": {"type": "number", "minimum": 0},
        "val_loss": {"type": "number"},  # at a validation step only
    },
    "required": ["step", "loss", "lr", "grad_norm", "seconds"],
    "additionalProperties": False,
}
# What `resume` reads from a checkpoint's meta (the setup `presk train` writes, the step
# reached and the rows logged), checked before any of it is used.
TRAINING_META = {
    "type": "object",
    "properties": {
        "program": {"type": "string"},
        "entry": {"type": "string"},
        "dims": _NAMES,
        "consts": _NAMES,
        "seed": {"type": "integer"},
        "backend": {"type": "string"},
        "bits": {"type": "integer", "minimum": 2},
        "realize": REALIZATION,
        "remat": {"type": "string"},
        "data": {"type": ["string", "null"]},
        "init": {"type": ["string", "null"]},
        "hyper": {
            "type": "object",
            "properties": {
                "lr": {"type": "number"},
                "warmup": {"type": "integer", "minimum": 0},
                "b1": {"type": "number"},
                "b2": {"type": "number"},
                "eps": {"type": "number"},
                "wd": {"type": "number"},
                "clip": {"type": "number"},
            },
            "required": ["lr", "warmup", "b1", "b2", "eps", "wd", "clip"],
            "additionalProperties": False,
        },
        "steps": {"type": "integer", "minimum": 1},
        "step": {"type": "integer", "minimum": 1},
        "history": {"type": "array", "items": _ROW, "minItems": 1},
        # the schedule (SCHEDULE), recorded since a resumed run takes it back
        "log_every": {"type": "integer", "minimum": 1},
        "eval_every": {"type": ["integer", "null"], "minimum": 1},
        "eval_batches": {"type": ["integer", "null"], "minimum": 1},
        "checkpoint_every": {"type": "integer", "minimum": 0},
        # the data's tokenizer (presk/train/tokenizer.py checks its vocab), with --data
        "tokenizer": {"enum": list(KINDS)},
    },
    "required": [*SETUP, "step", "history"],
}


def check_training_meta(path: str, meta) -> None:
    """Refuse (E9002) a checkpoint meta that `resume` cannot read: a field missing or of
    the wrong type, a step past the run's end, rows out of order or past the step."""
    error = first_violation(meta, TRAINING_META)
    if error is not None:
        where = "meta" + "".join(f"[{p!r}]" for p in error.absolute_path)
        raise FileFormatError(f"{path}: header.json: {where}: {error.message}", code="E9002")
    why = _step_problem(meta)
    if why is not None:
        raise FileFormatError(f"{path}: header.json: meta: {why}", code="E9002")


def _step_problem(meta: dict) -> str | None:
    """What is wrong with a schema-valid meta's step and history's steps, if anything."""
    if meta["step"] > meta["steps"]:
        return f"step {meta['step']} is past the run's {meta['steps']} steps"
    steps = [row["step"] for row in meta["history"]]
    for before, step in pairwise(steps):
        if step <= before:
            return f"the history's step {step} follows its step {before}"
    if steps[-1] > meta["step"]:
        return f"the history's step {steps[-1]} is past the checkpoint's step {meta['step']}"
    return None


def first_step(
    program: HostProgram, backend, params: Value, seed: int = 0, steps: int = 100
) -> tuple[list[Value], CallContext]:
    """The arguments and context of the first call of the training step (`step_symbol`)
    from `params` (moments zero) in a run of `steps` steps, without the loop's logging or
    files: one step to time or to check."""
    trainer = Trainer.detached(program, backend, steps, seed)
    args, _ = trainer.step_args(State(params, zeros_like(params), zeros_like(params)), 1)
    return args, trainer.context(1)


def resume(path: str, program: HostProgram, meta: dict) -> tuple[State, int]:
    """The state a checkpoint holds and its run's steps, refused unless written by this
    very run's setup; the steps are not compared (a resumed run may extend its run)."""
    t = param_type(program)
    params, c = checkpoint.load(path, t)
    check_training_meta(path, c.meta)
    for key in SETUP:
        if key != "steps" and c.meta[key] != meta[key]:
            raise FileFormatError(
                f"{path}: written with {key} = {c.meta[key]!r}, this run has {meta[key]!r}",
                code="E9005",
            )
    m = checkpoint.tree_from(c, t, "m", path)
    v = checkpoint.tree_from(c, t, "v", path)
    return State(params, m, v, c.meta["step"], c.meta["history"]), c.meta["steps"]
