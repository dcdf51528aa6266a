"""Sensitivities: where precision matters, from one reverse sweep on the exact reference.

For a scalar entry L and a value v the program computes, the sensitivity of L to a
perturbation of v is ‖∂L/∂v‖₁. The reverse sweep of `E.vjp` already computes ∂L/∂v for
every forward value on its way to the parameters; psk-vjp marks, in each `F.bwd`, what
yields the complete cotangent of each forward site (`psk.cotangent_of`), and the
reference's host hands every function run's values to a watcher (`Host.observe`), which
sums the marked ones by site. So one run gives every site's ‖∂L/∂v‖₁, summed over the
value's elements and over every call and fold layer that runs the site, and the same per
element. The parameters' and real arguments' rows are the sweep's own result, the
gradient. A tensor-valued entry is seeded with ones over its output (L = Σ of it).

The sweep runs `E.vjp` with `remat=recompute`, so each `F.bwd` replays F's forward ops,
their sites kept, before the adjoints: a marked cotangent and its forward value are in
the same run's slots. Each site's row also holds, per narrower type t, the first-order
effect of rounding the value to t element by element, Σᵢ |∂L/∂vᵢ|·|fl_t(vᵢ) − vᵢ|
(`weighted`), summed like ‖∂L/∂v‖₁; a parameter's and an argument's pair the sweep's
arguments with their gradient. `presk solve --rounding weighted` uses it as the term.

The sweep runs on the reference (`sweep="reference"`) or, for large models, in binary64
on the kernel evaluator (`sweep="f64"`): the vjp lowered to f64 kernels without fusion,
one launch a Core op, so every value the Recorder reads is in a host slot, and the
lowered functions' slots are read in the Core functions' numbering (`_core_slots`). Its
sums are float64 sums; it ranks as the reference does but for values whose cotangent
cancels to near 0 (a row's mean under a centring), where float64 keeps the noise.

A sensitivity ranks; a bound guarantees. Nothing here bounds an error: it says where a
perturbation would move L most, to first order, at these parameters and inputs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from mlir import ir

from presk.api import Core, entry_values
from presk.backends.host import CallContext
from presk.backends.kernel import KernelBackend
from presk.core.autodiff import COTANGENT_OF
from presk.core.program import Function, read_host_program
from presk.errors import BindingError, UsageError
from presk.front import ast
from presk.front.bindings import parse_entry, resolve_entry
from presk.ir.ops import module_functions
from presk.ir.types import PskType, TensorType
from presk.ir.types import leaves as leaf_types
from presk.kernel.machine import MACHINES
from presk.passes.psk_lower_to_kernel import PskLowerToKernel
from presk.passes.psk_verify import PskVerify
from presk.pipeline import Pipeline
from presk.precision.calibrate import ROUNDING_ERRORS
from presk.precision.choices import SWEEPS
from presk.precision.envelope import TYPES
from presk.prims import exact
from presk.runtime.inputs import arguments, param_type, parameters
from presk.runtime.values import Tensor, build, leaves


@dataclass(frozen=True)
class Sensitivity:
    key: str  # a site "<function>/%<n>", a parameter's path, or an argument's name
    what: str  # the site's op (and its `let` name), "parameter" or "argument"
    source: str  # "file:line" of the op or the parameter's declaration ("" if unknown)
    l1: float  # ‖∂L/∂v‖₁, over the value's elements and every run of the site
    elements: int  # the elements summed: the value's, times its runs
    # by type in TYPES, Σᵢ |∂L/∂vᵢ|·|fl_t(vᵢ) − vᵢ| over the same elements; None when the
    # sweep found no forward value to pair with the cotangent
    weighted: dict[str, float] | None = None

    @property
    def per_element(self) -> float:
        return self.l1 / self.elements


@dataclass(frozen=True)
class Sensitivities:
    entry: str
    rows: list[Sensitivity]  # by ‖∂L/∂v‖₁, largest first
    weights: str | None  # the parameters' file, None when initialised from the seed
    sweep: str = "reference"  # where the sweep ran: one of SWEEPS
    # by parameter path, ∂L/∂p in float64: kept only when asked (`presk solve --quant`)
    gradients: dict[str, np.ndarray] = field(default_factory=dict)


# The vjp in f64 kernels, one a Core op: no psk-fuse, so no value stays inside a kernel,
# and no psk-dce, so every Core op has its counterpart in the lowered host program.
UNFUSED_F64 = Pipeline((PskLowerToKernel(type="f64"), PskVerify()))


def sensitivities(
    core: Core,
    seed: int = 0,
    weights: str | None = None,
    bits: int = 128,
    sample: list | None = None,
    sweep: str = "reference",
    keep_gradients: bool = False,
) -> Sensitivities:
    """Every site's, parameter's and real argument's ‖∂L/∂v‖₁ for the entry of `core` at
    the parameters (`weights`, else initialised from `seed`) and inputs `seed` draws, or at
    `sample`'s arguments (numpy, the parameters first, as `samples.sample_arguments` gives
    them), from one run of `E.vjp` outside training (dropout the identity; `seed` keys any
    other draw): on the reference at `bits`, or with `sweep="f64"` in binary64 on the
    kernel evaluator. With `keep_gradients`, each parameter's whole gradient is kept too."""
    if sweep not in SWEEPS:
        raise UsageError(f"unknown sweep {sweep!r} (sweeps: {', '.join(SWEEPS)})")
    check_differentiable(core)
    # recomputed residuals: each F.bwd holds its forward values beside their cotangents
    vjp = core.program.elaborate(f"{core.entry}.vjp", core.dims, core.consts, "recompute")
    recorder = Recorder(cotangent_marks(vjp), forward_slots(vjp))
    backend = _reference(vjp, bits, recorder) if sweep == "reference" else _f64(vjp, recorder)
    args = _arguments(core, seed, weights, sample)
    with exact.context(bits):  # every sum of exact magnitudes at the reference's precision
        cts = backend.call(args, CallContext(seed=seed))
        rows = recorder.rows(site_descriptions(vjp)) + _input_rows(core, args[:-1], cts)
    rows.sort(key=lambda r: (-r.l1, r.key))
    kept = _gradients(core, cts) if keep_gradients else {}
    return Sensitivities(core.entry, rows, weights, sweep, kept)


def _gradients(core: Core, cts: tuple) -> dict[str, np.ndarray]:
    """The sweep's result for the parameter record, by path, in float64."""
    if param_type(core.view) is None:
        return {}
    out = {}
    for path, t in leaves(cts[0]):
        if t.type.kind == "real":
            data = np.asarray(t.data)
            out[path] = exact.to_float64(data) if data.dtype == object else data.astype(np.float64)
    return out


def _reference(vjp: Core, bits: int, recorder: Recorder):
    """The reference at `bits`, its host watched by `recorder`."""
    backend = vjp.reference(bits).backend
    backend.host.observe = recorder
    return backend


def _f64(vjp: Core, recorder: Recorder) -> KernelBackend:
    """The kernel evaluator in binary64 over `vjp` lowered one launch a Core op, its host
    watched by `recorder` in the Core functions' slot numbering."""
    module = vjp.copy()
    UNFUSED_F64.run(module)
    lowered = read_host_program(module)
    backend = KernelBackend(lowered, module, MACHINES["f64"])
    numbering = {
        name: _core_slots(fn, lowered.functions[name]) for name, fn in vjp.view.functions.items()
    }

    def observe(fn: Function, slots: list) -> None:
        recorder(fn, [slots[j] for j in numbering[fn.name]])

    backend.host.observe = observe
    return backend


def _core_slots(core_fn: Function, lowered: Function) -> list[int]:
    """For each slot of a Core function, the slot of the same value in its lowering one
    launch an op: the arguments' own, then each op's counterpart in order, passing over
    the tuples psk-lower-to-kernel builds of each launch's operands."""
    packing = _launch_operands(lowered)
    counterparts = [op for op in lowered.ops if op.out not in packing]
    slots = list(range(core_fn.slots))
    for op, low in zip(core_fn.ops, counterparts, strict=True):
        if op.site != low.site:
            raise AssertionError(f"{core_fn.name}: {op.site} was lowered as {low.site}")
        slots[op.out] = low.out
    return slots


def _launch_operands(fn: Function) -> set[int]:
    """The slots of the tuples of launch operands in a lowered function: each launch's
    operand, a chain of `psk.tuple_append` from a `psk.tuple_empty`."""
    made_by = {op.out: op for op in fn.ops}
    found: set[int] = set()
    for launch in (op for op in fn.ops if op.name == "psk_kernel.launch"):
        link = made_by[launch.ins[0]]
        found.add(link.out)
        while link.name == "psk.tuple_append":
            link = made_by[link.ins[0]]
            found.add(link.out)
    return found


def check_differentiable(core: Core) -> None:
    """Refuse (E3013) a derivative entry (its sweep would be a second derivative), and an
    entry whose result has no reals or that has no real argument or parameter."""
    if resolve_entry(core.program.ast, parse_entry(core.entry), core.consts).derivative:
        raise BindingError(
            f"{core.entry} is a derivative: its sensitivities need a second derivative, "
            "which presk does not take",
            code="E3013",
        )
    fn = core.view.entry_function
    if not _has_reals(fn.result_type):
        raise BindingError(
            f"{core.entry} returns {fn.result_type.text()}: a sensitivity is of a real result",
            code="E3013",
        )
    if not any(_has_reals(t) for t in fn.arg_types):
        raise BindingError(
            f"{core.entry} has no real argument or parameter: nothing to differentiate",
            code="E3013",
        )


def _has_reals(t: PskType) -> bool:
    return any(leaf.kind == "real" for _, leaf in leaf_types(t))


def _arguments(core: Core, seed: int, weights: str | None, sample: list | None) -> list:
    """The vjp's arguments: `sample`'s, else the parameters and the inputs `presk run
    --seed` gives the entry; then the seed of the sweep, ones over every real of the
    entry's result."""
    view = core.view
    ones = build(view.entry_function.result_type, lambda _, leaf: Tensor(leaf, _ones(leaf)))
    if sample is not None:
        return entry_values(core, sample) + [ones]
    params = parameters(view, seed, weights)
    return ([params] if params is not None else []) + arguments(view, seed, None) + [ones]


def _ones(leaf: TensorType) -> np.ndarray:
    """Ones for a real leaf; an index or mask has no cotangent, so zeros of its kind."""
    if leaf.kind == "real":
        return np.ones(leaf.shape)
    return np.zeros(leaf.shape, dtype=bool if leaf.kind == "bool" else np.int64)


def cotangent_marks(core: Core) -> dict[str, list[tuple[int, list[str]]]]:
    """By function, the slots psk-vjp marked as a forward site's complete cotangent (an
    argument's slot is its position; an op's, its result's in `core.view`), with the
    sites each is the cotangent of."""
    marks: dict[str, list[tuple[int, list[str]]]] = {}
    for f in module_functions(core.module.operation):
        name = ir.StringAttr(f.attributes["sym_name"]).value
        found = [(i, _sites(d)) for i, d in enumerate(_arg_attrs(f)) if COTANGENT_OF in d]
        ops = [op for op in f.regions[0].blocks[0].operations if op.name != "func.return"]
        for op, read in zip(ops, core.view.functions[name].ops, strict=True):
            if COTANGENT_OF in op.attributes:
                found.append((read.out, _sites(op.attributes)))
        if found:
            marks[name] = found
    return marks


def _arg_attrs(f) -> list[ir.DictAttr]:
    if "arg_attrs" not in f.attributes:
        return []
    return [ir.DictAttr(d) for d in ir.ArrayAttr(f.attributes["arg_attrs"])]


def _sites(attrs) -> list[str]:
    return [ir.StringAttr(s).value for s in ir.ArrayAttr(attrs[COTANGENT_OF])]


def forward_slots(core: Core) -> dict[str, dict[str, int]]:
    """By function, the slot of each forward site its ops replay (the first op with it)."""
    out: dict[str, dict[str, int]] = {}
    for name, fn in core.view.functions.items():
        found: dict[str, int] = {}
        for op in fn.ops:
            if op.site:
                found.setdefault(op.site, op.out)
        out[name] = found
    return out


class Recorder:
    """A host watcher: the marked values of each function run, their magnitudes summed
    by the site they are the cotangent of, and weighted by the rounding of the forward
    value the same run replays (a site with no such value in some run gets none)."""

    def __init__(
        self, marks: dict[str, list[tuple[int, list[str]]]], forward: dict[str, dict[str, int]]
    ):
        self.marks = marks
        self.forward = forward
        self.l1: dict[str, object] = defaultdict(int)  # site -> Σ|∂L/∂v|
        self.elements: Counter[str] = Counter()
        self.weighted: dict[str, dict[str, object] | None] = {}  # site -> by type

    def __call__(self, fn: Function, slots: list) -> None:
        forward = self.forward.get(fn.name, {})
        for slot, sites in self.marks.get(fn.name, ()):
            ct: Tensor = slots[slot]
            total = l1(ct)
            for site in sites:
                self.l1[site] += total
                self.elements[site] += ct.type.size
                value = slots[forward[site]] if site in forward else None
                self._weigh(site, ct, value)

    def _weigh(self, site: str, ct: Tensor, value: Tensor | None) -> None:
        sums = self.weighted.get(site, {})
        if sums is None:
            return
        added = weighted(ct, value)
        self.weighted[site] = (
            None if added is None else {t: sums.get(t, 0) + added[t] for t in TYPES}
        )

    def rows(self, described: dict[str, tuple[str, str]]) -> list[Sensitivity]:
        return [
            Sensitivity(
                site,
                *described.get(site, ("", "")),
                float(l1),
                self.elements[site],
                _floats(self.weighted.get(site)),
            )
            for site, l1 in self.l1.items()
        ]


def weighted(ct: Tensor, value: Tensor | None) -> dict[str, object] | None:
    """By type t, Σᵢ |ctᵢ|·|fl_t(vᵢ) − vᵢ| (`total`); None without a forward value of
    the cotangent's shape to pair."""
    if value is None or value.type.shape != ct.type.shape:
        return None
    magnitudes = np.abs(np.asarray(ct.data))
    return {t: total(magnitudes * ROUNDING_ERRORS[t](value.data)) for t in TYPES}


def _floats(sums: dict[str, object] | None) -> dict[str, float] | None:
    return None if sums is None else {t: float(x) for t, x in sums.items()}


def l1(t: Tensor):
    """Σ|t| (`total`)."""
    return total(np.abs(np.asarray(t.data)))


def total(a: np.ndarray):
    """Σ of `a`'s elements: MPFR numbers term by term in index order at the context's
    precision (exact up to that rounding), float64 numbers by numpy's float64 sum."""
    a = np.asarray(a)
    return sum(a.flat) if a.dtype == object else float(np.sum(a))


def site_descriptions(core: Core) -> dict[str, tuple[str, str]]:
    """Each forward site's op (with its `let` name) and source line."""
    out: dict[str, tuple[str, str]] = {}
    for fn in core.view.functions.values():
        for op in fn.ops:
            if op.site and op.site not in out:
                what = op.prim.name if op.prim else op.name
                what += f" ({op.let})" if op.let else ""
                out[op.site] = (what, f"{op.loc.file}:{op.loc.line}" if op.loc else "")
    return out


def _input_rows(core: Core, args: list, cts: tuple) -> list[Sensitivity]:
    """The sweep's result, the cotangents of the entry's arguments: a row for each
    parameter leaf (by its path) and each real argument (by its name), each paired with
    the value the sweep was given (`args`, the seed of the sweep left off)."""
    fn = core.view.entry_function
    declared = {
        path: f"{d.span.file}:{d.span.line}" for path, d in parameter_declarations(core).items()
    }
    rows = []
    for i, (name, arg, ct) in enumerate(zip(fn.arg_names, args, cts, strict=True)):
        is_params = i == 0 and param_type(core.view) is not None
        prefix = "" if is_params else name
        values = dict(leaves(arg, prefix))
        for path, t in leaves(ct, prefix):
            if t.type.kind == "real":
                what, source = (
                    ("parameter", declared.get(path, "")) if is_params else ("argument", "")
                )
                paired = _floats(weighted(t, values.get(path)))
                rows.append(Sensitivity(path, what, source, float(l1(t)), t.type.size, paired))
    return rows


def parameter_declarations(core: Core) -> dict[str, ast.ParamDef]:
    """Each parameter path's declaration in the entry's module (a stack's axis left off
    its type), through its submodules."""
    module = core.view.attrs.get("psk.module")
    if module is None:
        return {}
    tree = core.program.ast
    out: dict[str, ast.ParamDef] = {}

    def walk(defn: ast.ModuleDef, prefix: str) -> None:
        for m in defn.members:
            path = f"{prefix}.{m.name}" if prefix else m.name
            if isinstance(m, ast.ParamDef):
                out[path] = m
            elif isinstance(m, ast.SubDef):
                walk(tree.modules[m.module], path)

    walk(tree.modules[module.split("{")[0]], "")
    return out


def text(found: Sensitivities) -> str:
    """The ranking as `presk dump --stage sensitivity` prints it: the non-zero rows, then
    one line counting the values whose sensitivity is exactly 0."""
    nonzero = [r for r in found.rows if r.l1 != 0]
    head = ("site", "what", "source", "‖∂L/∂v‖₁", "per element")
    table = [head] + [
        (r.key, r.what, r.source, f"{r.l1:.4g}", f"{r.per_element:.4g}") for r in nonzero
    ]
    widths = [max(len(row[k]) for row in table) for k in range(len(head))]
    where = "on the reference" if found.sweep == "reference" else "in binary64 (--sweep f64)"
    lines = [f"-- sensitivity of {found.entry}: ‖∂L/∂v‖₁, one reverse sweep {where}"]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    ]
    zero = len(found.rows) - len(nonzero)
    if zero:
        lines.append(f"-- every other sensitivity is exactly 0 ({zero} values){_why_zero(found)}")
    return "\n".join(lines) + "\n"


def _why_zero(found: Sensitivities) -> str:
    if not zero_at_initialisation(found, [r.key for r in found.rows]):
        return ""
    return f": {AT_INITIALISATION}; pass --weights with trained parameters"


# why a sensitivity of exactly 0 at parameters drawn from their initializers is vacuous
AT_INITIALISATION = (
    "at initialisation, a parameter initialised to zeros (an output head) passes no "
    "gradient upstream"
)


def zero_at_initialisation(found: Sensitivities, keys) -> list[str]:
    """Of `keys`, those whose sensitivity is exactly 0 at parameters drawn from their
    initializers (no weights): the zero is the initialisation's (AT_INITIALISATION), not
    the model's. None for an entry without parameters, whose zeros are its own."""
    if found.weights is not None or not any(r.what == "parameter" for r in found.rows):
        return []
    zero = {r.key for r in found.rows if r.l1 == 0}
    return [k for k in keys if k in zero]
