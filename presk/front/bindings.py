"""Entries and bindings: `--entry 'Linear{3, 2}.apply'`, `--dim batch=4`, `--const D=32`.

Errors are E3xxx: a malformed, unknown (the nearest named) or missing entry, a dim or
const that the program does not declare, a value that is not a positive whole number,
sizes whose buffers would not fit in this machine's memory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from presk.core.program import read_host_program
from presk.errors import BindingError, closest
from presk.front import ast, unparse
from presk.front.prelude import FILE as PRELUDE
from presk.ir.types import PskType, leaves
from presk.language import counted

_ENTRY = re.compile(
    r"^\s*(?P<mod>[^\W\d]\w*)\s*(?:\{(?P<consts>[^{}]*)\})?\s*\.\s*(?P<fn>[^\W\d]\w*)"
    r"(?:\s*\.\s*(?P<derivative>grad|vjp))?\s*$"
)
# `--entry f.grad`, `'M{3}.loss.vjp'`: the derivative of a function, as if the program
# declared `fn _ = grad(f)` or `fn _ = f.vjp` beside it.
DERIVATIVES = ("grad", "vjp")
_FN = re.compile(r"^\s*(?P<fn>[^\W\d]\w*)\s*$")
MAX_SIZE = 2**63 - 1  # MLIR holds sizes as 64-bit integers


def positive_size(text: str) -> int | None:
    """`text` as a size: a positive whole number in decimal digits, below 2^63; else None."""
    if not re.fullmatch(r"[0-9]+", text):
        return None
    n = int(text)
    return n if 0 < n <= MAX_SIZE else None


def _not_a_size(text: str) -> str:
    """Why `text` is no size, for a message."""
    if re.fullmatch(r"[0-9]+", text) and int(text) > 0:
        return "is too large (sizes are below 2^63)"
    return "is not a positive whole number"


def checked_size(text: str, given: str) -> int:
    """`text` as a size, else E3005 naming the binding as the user wrote it (`given`)."""
    n = positive_size(text)
    if n is None:
        raise BindingError(f"{given}: the value {_not_a_size(text)}", code="E3005")
    return n


@dataclass(frozen=True)
class Spelling:
    """How a message names what the user bound: the command line's flags (`--dim N=8`,
    `--entry`) or the library API's arguments (`dims={"N": 8}`, `entry`)."""

    api: bool

    def binding(self, kind: str, name: str, value: object = None) -> str:
        """A dim or const (`kind`) by name, with its value if given."""
        if self.api:
            return f'{kind}s={{"{name}": {"…" if value is None else value}}}'
        return f"--{kind} {name}" + ("" if value is None else f"={value}")

    def wanted(self, kind: str, name: str) -> str:
        """How to give a dim or const that is missing."""
        return self.binding(kind, name, None if self.api else "N")

    def flag(self, name: str) -> str:
        """An option by name: the flag `--realize`, or the argument `realize`."""
        return name if self.api else f"--{name}"

    @property
    def entry(self) -> str:
        """How to give the entry: `--entry`, or the argument `entry`."""
        return "as the argument entry" if self.api else "with --entry"


FLAGS, ARGUMENTS = Spelling(api=False), Spelling(api=True)


@dataclass(frozen=True)
class Entry:
    module: str | None  # None for a top-level function
    const_args: tuple[str, ...] | None  # as written inside { }, or None when absent
    function: str
    derivative: str | None = None  # "grad" or "vjp" of the function, or None

    def __str__(self) -> str:
        suffix = f".{self.derivative}" if self.derivative else ""
        if self.module is None:
            return self.function + suffix
        consts = "{" + ", ".join(self.const_args) + "}" if self.const_args is not None else ""
        return f"{self.module}{consts}.{self.function}{suffix}"


def parse_entry(text: str) -> Entry:
    m = _FN.match(text)
    if m:
        return Entry(None, None, m["fn"])
    m = _ENTRY.match(text)
    if not m:
        raise BindingError(
            f"malformed entry '{text}' (write fn, Module.fn or 'Module{{c1, c2}}.fn')", code="E3002"
        )
    consts = None
    if m["consts"] is not None:
        consts = tuple(c.strip() for c in m["consts"].split(","))
        if any(not c for c in consts):
            raise BindingError(f"malformed entry '{text}': an empty const", code="E3002")
    return Entry(m["mod"], consts, m["fn"], m["derivative"])


def parse_assignments(items: list[str] | None, flag: str, code: str) -> dict[str, int]:
    """`["batch=4", "T=8"]` as a dict; each value a positive whole number."""
    out: dict[str, int] = {}
    for item in items or []:
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name:
            raise BindingError(f"{flag} {item!r} is not NAME=VALUE", code=code)
        n = checked_size(value, f"{flag} {name}={value}")
        if name in out and out[name] != n:
            raise BindingError(f"{flag} {name} is given twice", code=code)
        out[name] = n
    return out


def check_dims(program: ast.SourceTree, dims: dict[str, int], spelling: Spelling = FLAGS) -> None:
    declared = {n for n, _ in program.dims}
    for name in dims:
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise BindingError(
                f"{spelling.binding('dim', name)}: the program declares no dim {name} "
                f"(dims: {known})",
                code="E3004",
            )


def resolve_entry(program: ast.SourceTree, entry: Entry, consts: dict[str, int]) -> Entry:
    """A bare function name that is no top-level function names the module that has it:
    the only one, or the only one whose consts are exactly those `--const` binds."""
    if (
        entry.module not in program.modules
        and entry.function in DERIVATIVES
        and entry.const_args is None
        and entry.derivative is None
    ):  # `f.grad` for a function f, not a module's function
        entry = Entry(None, None, entry.module, entry.function)
    if entry.module is not None or entry.function in program.functions:
        return entry
    owners = [
        m.name
        for m in program.modules.values()
        if isinstance(m.member(entry.function), (ast.FnDef, ast.FnAlias))
    ]
    if len(owners) > 1:
        exact = [o for o in owners if set(program.modules[o].consts) == set(consts)]
        owners = exact or owners
    if len(owners) == 1:
        return Entry(owners[0], None, entry.function, entry.derivative)
    if len(owners) > 1:
        raise BindingError(
            f"entry '{entry}' is in several modules ({', '.join(owners)}): "
            f"write Module.{entry.function}",
            code="E3001",
        )
    raise _unknown_entry(program, entry)


def entry_consts(
    program: ast.SourceTree, entry: Entry, consts: dict[str, int], spelling: Spelling = FLAGS
) -> dict[str, int]:
    """The values of the entry module's consts, from the entry text and `--const` (or the
    API's `consts`, as `spelling` names them)."""
    if entry.module is None:
        if entry.function not in program.functions:
            raise _unknown_entry(program, entry)
        if consts:
            raise BindingError(
                f"{spelling.binding('const', next(iter(consts)))}: entry {entry} is not in a "
                "module",
                code="E3007",
            )
        return {}
    mod = program.modules.get(entry.module)
    if mod is None:
        raise _unknown_entry(program, entry)
    member = mod.member(entry.function)
    if not isinstance(member, (ast.FnDef, ast.FnAlias)):
        raise _unknown_entry(program, entry)
    for name in consts:
        if name not in mod.consts:
            known = ", ".join(mod.consts) or "none"
            raise BindingError(
                f"{spelling.binding('const', name)}: module {mod.name} has no const {name} "
                f"(consts: {known})",
                code="E3007",
            )
    values: dict[str, int] = {}
    if entry.const_args is not None:
        if len(entry.const_args) != len(mod.consts):
            raise BindingError(
                f"{mod.name} takes {counted(len(mod.consts), 'const')} "
                f"({', '.join(mod.consts) or 'none'}), "
                f"entry {entry} gives {len(entry.const_args)}",
                code="E3009",
            )
        for name, text in zip(mod.consts, entry.const_args, strict=True):
            if text in consts:
                values[name] = consts[text]
            elif text in mod.consts:
                raise BindingError(
                    f"entry {entry} needs const {text} (give {spelling.wanted('const', text)})",
                    code="E3006",
                )
            elif positive_size(text) is not None:
                values[name] = positive_size(text)
            else:
                why = f"is no const of {mod.name}" if text.isidentifier() else _not_a_size(text)
                raise BindingError(f"const {name} of entry {entry}: '{text}' {why}", code="E3005")
    for name, value in consts.items():
        if name in values and values[name] != value:
            raise BindingError(
                f"{spelling.binding('const', name, value)} conflicts with entry {entry}, "
                f"which gives {name}={values[name]}",
                code="E3007",
            )
    for name in mod.consts:
        if name not in values:
            if name not in consts:
                raise BindingError(
                    f"entry {entry} needs const {name} (give {spelling.wanted('const', name)})",
                    code="E3006",
                )
            values[name] = consts[name]
    return values


def _unknown_entry(program: ast.SourceTree, entry: Entry) -> BindingError:
    near = _nearest_entry(program, entry)
    guess = f"; did you mean '{near}'?" if near else ""
    return BindingError(
        f"no entry '{entry}'{guess} (entries: {_entry_list(program)})", code="E3001"
    )


def _nearest_entry(program: ast.SourceTree, entry: Entry) -> Entry | None:
    """`entry` with its one unknown name replaced by the program's nearest: the module's
    if the program has no such module, else the function's among the module's (among
    every function, for a bare name); None if no name is near."""
    modules = program.modules
    if entry.module is not None and entry.module not in modules:
        near = closest(entry.module, modules)
        return replace(entry, module=near) if near else None
    owners = [modules[entry.module]] if entry.module is not None else list(modules.values())
    functions = [*program.functions] if entry.module is None else []
    functions += [
        f.name for m in owners for f in m.members if isinstance(f, ast.FnDef | ast.FnAlias)
    ]
    near = closest(entry.function, functions)
    return replace(entry, function=near) if near else None


def missing_entry(program: ast.SourceTree, spelling: Spelling = FLAGS) -> BindingError:
    shows = "" if spelling.api else "; `presk entries FILE` shows their arguments"
    return BindingError(
        f"give the function to run {spelling.entry} (entries: {_entry_list(program)}{shows})",
        code="E3001",
    )


def default_entry(program: ast.SourceTree, name: str, consts: dict[str, int]) -> str:
    """The entry a command takes when `--entry` is left out: `name` (train's `loss`, run's
    `apply`) if it names one entry, as `--entry name` would, whose module's consts
    `consts` binds all; else E3001 with the program's entries."""
    try:
        entry = resolve_entry(program, Entry(None, None, name), consts)
    except BindingError:
        raise missing_entry(program) from None
    module = program.modules.get(entry.module)
    if module is not None and not set(module.consts) <= set(consts):
        raise missing_entry(program)
    return name


def _entry_list(program: ast.SourceTree) -> str:
    listed = [
        s.entry + (f" (dims {s.dims_text})" if s.dims else "") for s in entry_signatures(program)
    ]
    return ", ".join(listed) or "none"


def available_entries(program: ast.SourceTree) -> list[str]:
    return [s.entry for s in entry_signatures(program)]


@dataclass(frozen=True)
class Signature:
    """An entry as `presk entries` shows it: its text for `--entry`, its arguments and
    result as the program declares them (or the function it is made from), and the dims
    they use (with a default, `N=32`)."""

    entry: str  # `fn`, or `Module{c1, c2}.fn` with the module's consts
    module: str | None
    consts: tuple[str, ...]
    function: str
    arguments: tuple[tuple[str, str | None], ...]  # (name, type), None for an untyped one
    result: str | None  # the declared result type, None where it is left to inference
    alias: str | None  # `grad(loss)` for `fn loss_grad = grad(loss)`, else None
    dims: tuple[tuple[str, int | None], ...]  # each dim used, with its default or None
    prelude: bool  # an entry of presk's prelude (adamw), not of the program

    @property
    def dims_text(self) -> str:
        return ", ".join(d if n is None else f"{d}={n}" for d, n in self.dims)

    def text(self) -> str:
        if self.alias is not None:
            head = f"{self.entry} = {self.alias}"
        else:
            args = ", ".join(f"{n} : {t}" if t else n for n, t in self.arguments)
            head = f"{self.entry}({args})" + (f" -> {self.result}" if self.result else "")
        return head + (f"   dims {self.dims_text}" if self.dims else "")


def entry_signatures(program: ast.SourceTree) -> list[Signature]:
    """Every entry of a program: its top-level functions, then each module's functions."""
    owners: list[tuple[ast.ModuleDef | None, list]] = [(None, list(program.functions.values()))]
    owners += [(m, m.members) for m in program.modules.values()]
    out = []
    for module, members in owners:
        fns = {f.name: f for f in members if isinstance(f, (ast.FnDef, ast.FnAlias))}
        for f in fns.values():
            out.append(_signature(program, module, f, fns))
    return out


# A name in a type or an alias's expression: sizes are small expressions of dims, consts
# and numbers, so the names in their text are the ones they use.
_NAME = re.compile(r"[^\W\d]\w*")


def _signature(program: ast.SourceTree, module, f, siblings: dict) -> Signature:
    consts = tuple(module.consts) if module is not None else ()
    braces = "{" + ", ".join(consts) + "}" if consts else ""
    entry = f"{module.name}{braces}.{f.name}" if module is not None else f.name
    if isinstance(f, ast.FnAlias):
        alias = unparse.expr(f.value)
        made_from = [siblings[n] for n in _NAME.findall(alias) if n in siblings and n != f.name]
        texts = [
            unparse.type_(p.type)
            for g in made_from
            if isinstance(g, ast.FnDef)
            for p in g.params
            if p.type
        ]
        arguments, result = (), None
    else:
        alias = None
        arguments = tuple((p.name, unparse.type_(p.type) if p.type else None) for p in f.params)
        result = unparse.type_(f.ret) if f.ret else None
        texts = [t for _, t in arguments if t] + ([result] if result else [])
    used = {n for t in texts for n in _NAME.findall(t)}
    dims = tuple((d, program.dim_defaults.get(d)) for d, _ in program.dims if d in used)
    return Signature(
        entry,
        module.name if module is not None else None,
        consts,
        f.name,
        arguments,
        result,
        alias,
        dims,
        f.span.file == PRELUDE,
    )


# The host's buffer of one element of each kind: float64, int64, bool.
_ELEMENT_BYTES = {"real": 8, "index": 8, "bool": 1}


def _value_bytes(t: PskType) -> int:
    return sum(leaf.size * _ELEMENT_BYTES[leaf.kind] for _, leaf in leaves(t))


def buffer_bytes(module) -> int:
    """A lower bound on the memory a run of the elaborated entry takes: its arguments (the
    parameters among them) and the largest value any function makes, as the host's
    buffers. Python's integers cannot overflow, so sizes past int64 count exactly."""
    program = read_host_program(module)
    values = [op.type for fn in program.functions.values() for op in fn.ops]
    largest = max(map(_value_bytes, values), default=0)
    return sum(map(_value_bytes, program.entry_function.arg_types)) + largest


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(module, entry: Entry, sizes: dict[str, int]) -> None:
    """Refuse bindings whose buffers would not fit in this machine's memory, before a
    backend allocates them (or a pass multiplies their sizes past int64)."""
    need, have = buffer_bytes(module), physical_memory()
    if need > have:
        bound = ", ".join(f"{n}={v}" for n, v in sizes.items()) or "its sizes"
        raise BindingError(
            f"entry {entry} at {bound} needs at least {need} bytes ({need / 2**30:.3g} GiB) "
            f"for its buffers, more than this machine's {have} bytes ({have / 2**30:.3g} GiB)",
            code="E3012",
        )


def argument_dim(tree: ast.SourceTree, entry_text: str, consts: dict[str, int], axis: int):
    """The dim that sizes axis `axis` of the entry's first argument, as written (`x :
    ℝ[N, In]` or `x : ℝ[batch: N, In]` give N at axis 0); None if that size is no dim. An
    entry that is not there is refused (E3001)."""
    entry = resolve_entry(tree, parse_entry(entry_text), consts)
    entry_consts(tree, entry, consts)  # the entry exists
    module = tree.modules[entry.module] if entry.module else None
    fn = module.member(entry.function) if module else tree.functions[entry.function]
    if not isinstance(fn, ast.FnDef) or not fn.params:
        return None
    first = fn.params[0].type
    if not isinstance(first, ast.TensorTypeExpr) or len(first.axes) <= axis:
        return None
    size = first.axes[axis].size
    local = module.consts if module else []
    dims = {name for name, _ in tree.dims}
    return (
        size.id if isinstance(size, ast.Name) and size.id in dims and size.id not in local else None
    )
