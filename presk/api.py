"""presk as a library: stage objects from source to a callable (docs/api.md).

    load(path or text)                  -> Program   parsed and checked, the prelude joined
      .elaborate(entry, dims, consts)   -> Core      PSK-Core, its derivatives expanded
        .reference(bits, kind)          -> Compiled  the exact value, a callable
        .lower(realize, plan)           -> Kernels   the kernel stage, lowered once
          .compile(backend, threads)    -> Compiled  a callable on numpy arrays

Each stage holds what it made and shows it (`as_text(stage)`); every stage stays usable.
The backends change the module they run, so each compile starts from a copy of the stage
it consumes: one Core lowers to any number of realizations, one Kernels compiles for any
number of machine backends (presk/backends: the registry says which backend is which).
Tensors go in as numpy arrays and come out as the realization holds them (reals float64,
float32 or bfloat16; indices int64, masks bool), records (a parameter tree) as dicts of
arrays by dotted path, tuples as tuples. What a user gets wrong is a `PreskError`, with
the code the command line gives it, naming the argument (`dims={"N": …}`) where the
command line names its flag. The commands of `presk` are these calls behind flags
(presk/cli/programs.py), whose programs `load_file` reads with the flags' spelling.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from mlir import ir

from presk import backends, quantize, stages
from presk import realize as realizations
from presk.backends.host import CallContext
from presk.backends.kernel import kernels_of
from presk.constants import MAX_BITS
from presk.core.program import HostProgram, read_host_program
from presk.core.text import core_text
from presk.errors import BindingError, FileFormatError, UsageError
from presk.fileio import MAX_SOURCE_BYTES, read_text
from presk.front import ast
from presk.front.bindings import (
    ARGUMENTS,
    FLAGS,
    Entry,
    Spelling,
    available_entries,
    check_memory,
    checked_size,
    missing_entry,
    parse_entry,
)
from presk.front.check import checked_source
from presk.front.elaborate import Elaborated, elaborate, parameter_type
from presk.front.unparse import program as unparse
from presk.ir.context import new_context
from presk.ir.ops import clone_module
from presk.ir.types import PskType, TensorType
from presk.ir.types import leaves as leaf_types
from presk.kernel.text import kernel_text
from presk.language import REMATS
from presk.plans import plan_path
from presk.runtime import output
from presk.runtime.arrays_file import read_leaf
from presk.runtime.inputs import arguments, param_type, parameters
from presk.runtime.values import Tensor, Value, build
from presk.toolchain import check_threads
from presk.toolchain import vector_bytes as host_vector_bytes
from presk.train.data import Windows
from presk.train.loop import Hyper, State, Trainer, first_step, step_symbol, zeros_like
from presk.train.step import add_train_step
from presk.train.tokenizer import Vocabulary


def load(source: str | os.PathLike) -> Program:
    """The program in a file (a path) or in `source` itself: a string is source when it
    holds a newline, or when no file is there and it does not look like a path (it has
    whitespace and does not end in `.psk`), so a path that is missing is refused (E0002)
    rather than parsed. Refusals name the API's arguments (`dims={"N": …}`)."""
    if isinstance(source, str) and _is_source(source):
        return load_text(source, spelling=ARGUMENTS)
    return load_file(os.fspath(source), ARGUMENTS)


def _is_source(text: str) -> bool:
    if "\n" in text:
        return True
    looks_like_a_path = text.endswith(".psk") or not any(c.isspace() for c in text)
    return not (looks_like_a_path or os.path.exists(text))


def load_file(path: str, spelling: Spelling = FLAGS) -> Program:
    """The program at `path` (E0002 if it cannot be read as text of at most
    MAX_SOURCE_BYTES); its refusals of bindings name them as `spelling` does (the
    command line's flags by default)."""
    return load_text(read_text(path, MAX_SOURCE_BYTES), path, spelling)


def load_text(text: str, name: str = "<text>", spelling: Spelling = FLAGS) -> Program:
    """The program `text`, its errors located in `name`."""
    return Program(checked_source(text, name), spelling)


def data(path: str | os.PathLike) -> Data:
    """The data file of `presk data` at `path` (E9007 unless it is one): its windows and
    the tokenizer they were made with."""
    windows = Windows.load(os.fspath(path))
    return Data(windows, Tokenizer(Vocabulary(windows.tokenizer, windows.tokenizer.size)))


@dataclass(frozen=True)
class Data:
    """A data file: `windows` (presk/train/data.py) holds `train` and `val`, rows of T + 1
    tokens, and draws presk train's batches (`batch(step, batch, seed)`)."""

    windows: Windows
    tokenizer: Tokenizer


@dataclass(frozen=True)
class Tokenizer:
    """Text to tokens and back, as a model of `size` tokens reads them (a thin face on
    presk/train/tokenizer.py's `Vocabulary`: the tokenization is its)."""

    vocabulary: Vocabulary

    @property
    def size(self) -> int:
        return self.vocabulary.size

    def for_model(self, size: int) -> Tokenizer:
        """This tokenizer as a model of `size` tokens (V) reads it: when V is less than its
        tokens, every token from V − 1 on is V − 1, which decodes to U+FFFD."""
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
            raise UsageError(f"size {size!r}: a model's tokens are a positive whole number")
        return Tokenizer(Vocabulary(self.vocabulary.tokenizer, int(size)))

    def encode(self, text: str | bytes) -> np.ndarray:
        """The tokens of `text` (a str as its UTF-8 bytes), an int64 array."""
        raw = text.encode() if isinstance(text, str) else bytes(text)
        return np.array(self.vocabulary.encode(raw), dtype=np.int64)

    def decode_bytes(self, tokens) -> bytes:
        """The bytes `tokens` stand for, exactly."""
        return b"".join(self.vocabulary.decode(int(t)) for t in np.ravel(tokens))

    def decode(self, tokens) -> str:
        """The text `tokens` stand for, bytes that are not UTF-8 as U+FFFD."""
        return self.decode_bytes(tokens).decode("utf-8", errors="replace")


class Program:
    """A checked program, the prelude joined: the stage before an entry is chosen."""

    def __init__(self, tree: ast.SourceTree, spelling: Spelling = FLAGS):
        self.ast = tree
        self.spelling = spelling  # how a refusal names the bindings: flags or arguments

    def entries(self) -> list[str]:
        """The entries `elaborate` takes: functions, and modules' functions with their consts."""
        return available_entries(self.ast)

    def text(self) -> str:
        """The syntax tree printed back (`presk dump --stage ast`)."""
        return unparse(self.ast)

    def mlir(self) -> str:
        raise UsageError("a program is MLIR once an entry is elaborated: elaborate(entry).mlir()")

    def elaborate(
        self,
        entry: str,
        dims: dict[str, int] | None = None,
        consts: dict[str, int] | None = None,
        remat: str = "store",
        train_step: bool = False,
    ) -> Core:
        """`entry` (`fn`, `Module.fn`, `'Module{3, 2}.fn'`, `fn.grad`) at these sizes, in
        PSK-Core with its derivatives expanded (`remat`: a derivative's residuals stored
        or recomputed); with `train_step`, the entry a loss and `train.step` beside it
        (presk/train/step.py). Refused (E3012) if its buffers would not fit in memory."""
        if remat not in REMATS:
            raise UsageError(f"remat {remat!r}: choose from {', '.join(REMATS)}")
        parsed, dims, consts = self._bindings(entry, dims, consts)
        elaborated = elaborate(self.ast, parsed, dims, consts, new_context(), self.spelling)
        check_memory(elaborated.module, parsed, dims | consts)
        stages.core(elaborated.module, remat)
        if train_step:
            add_train_step(elaborated, remat)
        return Core(self, entry, dims, consts, remat, train_step, elaborated)

    def parameter_type(
        self, entry: str, dims: dict[str, int] | None = None, consts: dict[str, int] | None = None
    ) -> PskType | None:
        """The parameter record of the entry's module (None for a plain function), its
        functions not elaborated."""
        bindings = self._bindings(entry, dims, consts)
        return parameter_type(self.ast, *bindings, new_context(), self.spelling)

    def _bindings(self, entry: str | None, dims, consts) -> tuple[Entry, dict, dict]:
        """The entry and its sizes, checked as `--entry`, `--dim` and `--const` are (E3xxx)."""
        if entry is None:
            raise missing_entry(self.ast, self.spelling)
        dims = _sizes(dims, "dim", "E3004", self.spelling)
        consts = _sizes(consts, "const", "E3007", self.spelling)
        return parse_entry(entry), dims, consts


def _sizes(given: Mapping | None, kind: str, code: str, spelling: Spelling) -> dict[str, int]:
    """`{name: size}` for a dim or const (`kind`), each a positive whole number (E3005):
    an int, not a float or a string of digits."""
    if given is not None and not isinstance(given, Mapping):
        raise UsageError(f"{kind}s: a dict of sizes by name, not {type(given).__name__}")
    sizes = {}
    for name, value in (given or {}).items():
        if not isinstance(name, str):
            raise BindingError(f"{kind}s: the name {name!r} is not a string", code=code)
        whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        text = str(value) if whole else repr(value)  # '8' shows as the string it is
        sizes[name] = checked_size(text, spelling.binding(kind, name, text))
    return sizes


@dataclass(eq=False)
class Core:
    """An entry elaborated into PSK-Core, its derivatives expanded: what the references
    compute and every lowering starts from."""

    program: Program
    entry: str
    dims: dict[str, int]
    consts: dict[str, int]
    remat: str
    train_step: bool
    elaborated: Elaborated

    @property
    def module(self) -> ir.Module:
        return self.elaborated.module

    @cached_property
    def view(self) -> HostProgram:
        """The module read once for the executors (presk/core/program.py)."""
        return read_host_program(self.module)

    def as_text(self, stage: str = "core", mlir: bool = False) -> str:
        """PSK-Core, the stage this object holds: its readable text (`presk dump --stage
        core`), or with `mlir` the module in MLIR's generic form."""
        _check_stage(stage, ("core",), "a Core", "lower(realize).as_text(stage)")
        return str(self.module) if mlir else core_text(self.module)

    def text(self) -> str:
        return self.as_text()

    def mlir(self) -> str:
        return self.as_text(mlir=True)

    def params(self, seed: int = 0, weights: str | None = None) -> dict[str, np.ndarray] | None:
        """The entry module's parameters by path: initialised from `seed`, or read from a
        checkpoint or parameters file; None for a plain function."""
        value = parameters(self.view, seed, weights)
        return None if value is None else to_numpy(value)

    def lower(self, realize="f64", plan: str | None = None) -> Kernels:
        """The entry's kernels in a realization (`f64`, `f32`, `bf16`, `@R.json` or a
        `Realization`), the nests a plan file names (`@P.json`) at its layouts: the
        realization and plan resolved once (a plan's machine type replaces a uniform
        realization's), the kernel stage lowered once from them."""
        return Kernels(
            self, stages.Lowering.of(self._realization(realize), plan_path(plan) if plan else None)
        )

    def reference(self, bits: int = 256, kind: str = "interp", realize="f64") -> Compiled:
        """The entry on a reference backend (`kind`: the exact interpreter over MPFR
        numbers) at `bits` of precision; of `realize`, only its parameters' types apply
        (a parameter stored in bf16 is rounded to it, then computed on exactly)."""
        spec = backends.backend(kind)
        if not spec.exact:
            raise UsageError(
                f"kind {kind!r} is no reference (references: {', '.join(backends.names(True))});"
                f" lower(realize).compile({kind!r}) runs it"
            )
        r = self._realization(realize)
        module = clone_module(self.module)
        executor = spec.make(module, r, None, _checked_bits(bits), None)
        return Compiled(self, None, executor, module, None, bits)

    def copy(self) -> ir.Module:
        """A copy of the module, for a lowering to change in place."""
        return clone_module(self.module)

    def _realization(self, realize) -> realizations.Realization:
        if isinstance(realize, realizations.Realization):
            return realize
        return realizations.read(realize, self.program.spelling.flag("realize"))

    def compile(
        self,
        backend: str = "mlir",
        realize="f64",
        plan: str | None = None,
        threads: int | None = None,
        bits: int = 256,
    ) -> Compiled:
        """The entry on `backend`, whichever it is: a reference's `reference(bits, backend,
        realize)`, else `lower(realize, plan).compile(backend, threads)`."""
        if backends.backend(backend).exact:
            return self.reference(bits, backend, realize)
        return self.lower(realize, plan).compile(backend, threads)

    def derived(self, entry: str | None = None, train_step: bool | None = None) -> Core:
        """This Core's program and sizes elaborated again, for another entry (a derivative)
        or with a training step."""
        return self.program.elaborate(
            entry or self.entry,
            self.dims,
            self.consts,
            self.remat,
            self.train_step if train_step is None else train_step,
        )


def _check_stage(stage: str, held: tuple[str, ...], what: str, elsewhere: str) -> None:
    if stage not in held:
        raise UsageError(f"stage {stage!r}: {what} shows {', '.join(held)}; {elsewhere}")


def _checked_bits(bits) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= MAX_BITS:
        raise UsageError(f"bits {bits!r} is not a whole number of bits from 2 to {MAX_BITS}")
    return bits


class Kernels:
    """A Core lowered once for a realization and a plan (`lowering`): the kernel stage,
    which `compile` runs on a machine backend."""

    def __init__(self, core: Core, lowering: stages.Lowering):
        self.core = core
        self.lowering = lowering
        self.realization = lowering.realization  # the plan's machine type, if it names one
        self.plan = lowering.plan

    @cached_property
    def module(self) -> ir.Module:
        """The kernel stage: a copy of the Core lowered, realized and planned."""
        return self.lowering.lower(clone_module(self.core.module))

    def as_text(self, stage: str = "kernel", mlir: bool = False, vector_bytes: int = 0) -> str:
        """The kernel stage (`presk dump --stage kernel`): each kernel's readable text in the
        module's order, or with `mlir` the module. `affine` and `llvm`: the kernels lowered
        further from it for vectors of `vector_bytes` (0: this machine's), at the layouts
        the kernel stage holds (the mlir backend moves nests that no plan places to the
        cost model's layouts first)."""
        _check_stage(stage, ("kernel", "affine", "llvm"), "Kernels", "its core shows core")
        if stage == "kernel":
            module = self.module
            if mlir:
                return str(module)
            return "\n".join(map(kernel_text, kernels_of(module).values())) + "\n"
        module = stages.affine(clone_module(self.module), vector_bytes or host_vector_bytes())
        if stage == "llvm":
            stages.llvm(module)
        if mlir:
            return str(module)
        shown = [str(f) for f in module.body.operations if _is_kernel(f.operation)]
        return "\n".join(shown) + "\n"

    def text(self) -> str:
        return self.as_text()

    def mlir(self) -> str:
        return self.as_text(mlir=True)

    def compile(self, backend: str = "mlir", threads: int | None = None) -> Compiled:
        """The entry on a machine backend: `kernel` the kernel evaluator, `mlir` native code
        on `threads` workers (default $PRESK_THREADS, else the cores). The references
        compute PSK-Core, not kernels: `core.reference(bits)`."""
        spec = backends.backend(backend)
        if spec.exact:
            raise UsageError(
                f"backend {backend!r} is a reference: it computes PSK-Core exactly, not these "
                "kernels; core.reference(bits=…) runs it"
            )
        threads = check_threads(threads, "threads") if threads is not None else None
        module = clone_module(self.module)
        executor = spec.make(module, self.realization, self.plan, threads=threads)
        return Compiled(self.core, self, executor, module, threads, None)


def _is_kernel(op) -> bool:
    return "psk_kernel.kernel" in op.attributes or op.name == "llvm.func"


class Compiled:
    """An entry compiled for a backend, called on numpy arrays:
    `f(params, x, …, seed=0)`, the parameters first for a module's function."""

    def __init__(
        self, core: Core, kernels: Kernels | None, backend, module: ir.Module, threads, bits
    ):
        self.core = core
        self.kernels = kernels  # None for a reference
        self.backend = backend  # the executor
        self.module = module  # the stage the backend runs
        self.threads = threads
        self.bits = bits  # a reference's; None for a machine backend

    def __call__(self, *args, seed: int = 0):
        """The entry's output on `args`, as numpy (`seed` keys its random draws)."""
        return to_numpy(self.backend.call(self.values(args), CallContext(seed=seed)))

    def values(self, args) -> list[Value]:
        return entry_values(self.core, args)

    def params(self, seed: int = 0, weights: str | None = None) -> dict[str, np.ndarray] | None:
        return self.core.params(seed, weights)

    @cached_property
    def grad(self) -> Compiled:
        """The gradient of the entry (a function returning ℝ): the entry `f.grad`, compiled
        as this is; for a module's function, the gradient of its parameters."""
        return self._recompiled(self.core.derived(entry=f"{self.core.entry}.grad"))

    @cached_property
    def train_step(self) -> TrainStep:
        """One AdamW step of the entry (a module's function returning ℝ), compiled as this is."""
        return TrainStep(self._recompiled(self.core.derived(train_step=True)))

    def _recompiled(self, core: Core) -> Compiled:
        name = self.backend.spec.name
        if self.kernels is None:
            return core.reference(self.bits, name, self.backend.realization)
        return Kernels(core, self.kernels.lowering).compile(name, self.threads)

    def drawn(self, seed: int = 0, weights: str | None = None) -> Callable[[], Value]:
        """One call on the inputs `seed` draws and the parameters `weights` holds (a
        checkpoint or parameters file), else those `seed` draws (for a Core with a
        training step, the first step from them), everything prepared once: a call to
        time."""
        view, backend = self.core.view, self.backend
        params = parameters(view, seed, weights)
        if self.core.train_step:  # the step rounds its read copy of the master parameters
            step_args, ctx = first_step(view, backend, params, seed)
            symbol = step_symbol(backend.realization)
            return lambda: backend.call(step_args, ctx, symbol)
        if not backend.spec.exact:  # typed and quantised once
            params = quantize.stored_parameters(params, backend.realization, backend.machine)
        call_args = ([params] if params is not None else []) + arguments(view, seed, None)
        ctx = CallContext(seed=seed)
        return lambda: backend.call(call_args, ctx)

    def as_text(self, mlir: bool = False) -> str:
        """What the backend runs, the stage it holds (its record's `stage`): PSK-Core for a
        reference, the kernels for the kernel evaluator, the kernels as affine loops for
        native code; with `mlir`, the module."""
        if mlir:
            return str(self.module)
        stage = self.backend.spec.stage
        if stage == "core":
            return core_text(self.module)
        show = kernel_text if stage == "kernel" else str
        return "\n".join(map(show, kernels_of(self.module).values())) + "\n"

    def text(self) -> str:
        return self.as_text()

    def mlir(self) -> str:
        return self.as_text(mlir=True)


@dataclass
class StepResult:
    loss: float
    grad_norm: float  # before clipping
    lr: float  # this step's learning rate
    params: dict[str, np.ndarray]
    m: dict[str, np.ndarray]  # AdamW's moments
    v: dict[str, np.ndarray]


class TrainStep:
    """`train.step` (presk/train/step.py) on a backend: a loss's forward and backward, the
    gradient clipped, AdamW's step, every number computed by the backend. Under a
    realization typing parameters, `train.master_step`: the forward and backward read the
    parameters rounded to their types, the step updates `params`, the master copy."""

    def __init__(self, compiled: Compiled):
        self.compiled = compiled

    def __call__(
        self,
        params: dict,
        *batch,
        m: dict | None = None,
        v: dict | None = None,
        step: int = 1,
        steps: int = 100,
        hyper: Hyper | None = None,
        seed: int = 0,
    ) -> StepResult:
        """Step `step` of a run of `steps` from `params` and AdamW's moments (zero when not
        given) on `batch`, the loss's arguments (drawn from `seed` when not given, as
        `presk train` draws them without --data)."""
        compiled = self.compiled
        view = compiled.core.view
        trainer = Trainer.detached(view, compiled.backend, steps, seed, hyper)
        batch = batch or to_numpy(tuple(trainer.batch(step)[0]))
        p, *data = compiled.values([params, *batch])
        ptype = param_type(view)
        state = State(
            p,
            zeros_like(p) if m is None else to_value(ptype, m, "", "E9005", "m"),
            zeros_like(p) if v is None else to_value(ptype, v, "", "E9005", "v"),
        )
        args = trainer.call_args(state, step, data)
        out = compiled.backend.call(args, trainer.context(step), trainer.symbol)
        loss, grad_norm, lr = (float(output.float64(t)) for t in out[:3])
        return StepResult(loss, grad_norm, lr, *map(to_numpy, out[3:]))


class _Arrays:
    """Arrays in memory, read by `read_leaf` as it reads the members of a file."""

    def __init__(self, by_path: dict):
        self._arrays = {p: np.asarray(a) for p, a in by_path.items()}

    @property
    def names(self) -> list[str]:
        return list(self._arrays)

    def header(self, name: str):
        return self._arrays[name].shape, self._arrays[name].dtype

    def read(self, name: str) -> np.ndarray:
        return self._arrays[name]


def entry_values(core: Core, args) -> list[Value]:
    """The runtime values of a call's arguments to `core`'s entry, each array checked
    against its leaf: the parameters as a parameters file's (E9005), the others as
    `--inputs` (E9006)."""
    view = core.view
    fn = view.entry_function
    if len(args) != len(fn.arg_types):
        names = ", ".join(fn.arg_names)
        raise UsageError(
            f"{core.entry} takes {len(fn.arg_types)} arguments ({names}), given {len(args)}"
        )
    takes_params = param_type(view) is not None  # the parameter record comes first
    values = []
    for i, (name, t, given) in enumerate(zip(fn.arg_names, fn.arg_types, args, strict=True)):
        name, code = ("", "E9005") if takes_params and i == 0 else (name, "E9006")
        values.append(to_value(t, given, name, code, core.entry))
    return values


def to_value(t: PskType, given, name: str, code: str, what: str) -> Value:
    """`given` as the runtime value `name` (an argument's name, "" for the parameters) of
    type `t`: an array for a tensor, else a dict of arrays by dotted path, every path
    present and no other (`code`), each array of its leaf's shape (`code`) and kind
    (E9006). `what` heads a refusal."""
    if isinstance(t, TensorType):
        given = {"": given}
    elif not isinstance(given, dict):
        raise UsageError(f"{what}: {name or 'the parameters'} is a dict of arrays by path")
    want = dict(leaf_types(t))
    for path in [p for p in want if p not in given] + [p for p in given if p not in want]:
        full = _joined(name, path)
        why = f"no array {full} ({want[path].text()})" if path in want else f"no leaf {full}"
        raise FileFormatError(f"{what}: {why} in {t.text()}", code=code)
    arrays = _Arrays({_joined(name, p): a for p, a in given.items()})
    return build(t, lambda p, leaf: Tensor(leaf, read_leaf(what, arrays, p, leaf, code)), name)


def _joined(prefix: str, path: str) -> str:
    return f"{prefix}.{path}" if prefix and path else prefix or path


def to_numpy(value: Value):
    """A runtime value as numpy: a tensor an array (reals in the type the realization
    holds them in, exactly: float64, float32 or bfloat16; an exact one rounded once to
    float64), a record a dict of arrays by dotted path, a tuple a tuple."""
    if isinstance(value, tuple):
        return tuple(map(to_numpy, value))
    arrays = output.held_arrays(value)
    return arrays[""] if isinstance(value, Tensor) else arrays
