"""Say it once: the bindings a `presk train` checkpoint records, filled into the flags a
command was not given (`--entry`, `--const`, `--dim`, `--realize`, `--remat`; `--plan` for
a resumed run).

The rule: what the parameters are must agree, how they are run need not. The entry's
module (the parameters are its) and the values of its consts must be the recorded ones:
a flag that says otherwise is refused (E3015), naming both values. Any function of that
module may run (the checkpoint of `loss` runs `apply`). The recorded dims, realization,
remat and plan only stand in for flags left out: `--dim B=1` or `--realize f64` given
replaces them. FILE may be another program than the one trained: with `--entry` given,
a recorded entry it cannot bind is passed over (the parameters' paths and shapes are
checked when they are read, E9005).
"""

from __future__ import annotations

from presk.cli.flags import Defaulted, given
from presk.cli.programs import load_program
from presk.errors import BindingError, FileFormatError
from presk.front import ast
from presk.front.bindings import (
    Entry,
    entry_consts,
    parse_assignments,
    parse_entry,
    positive_size,
    resolve_entry,
)
from presk.jsontext import first_violation
from presk.runtime import params_file, pskd
from presk.runtime.inputs import checkpoint_refusal
from presk.train.loop import TRAINING_META

# The keys of a checkpoint's meta this module reads, as `presk train` writes them; a
# recorded plan (`@P.json`, `auto`, `default`: presk train --plan) is read for a resumed run.
RECORDED = {
    "type": "object",
    "properties": {
        **{
            k: TRAINING_META["properties"][k]
            for k in ("entry", "dims", "consts", "realize", "remat")
        },
        "plan": {"type": "string"},
    },
}


def apply_checkpoint(args, path: str, plan: bool = False, realize: bool = True) -> dict | None:
    """Fill the flags `args` lacks from the checkpoint at `path`, refusing a given one
    that disagrees with it (E3015); the checkpoint's meta, or None for a parameters file
    (.npz, .safetensors), which records nothing. `args` holds `add_program_args`'s flags
    (FILE among them); `--realize` is filled where it has it, unless `realize` is False
    (a command whose `--realize` names what it measures or reads, not how the entry
    runs), and with `plan` (a resumed run, the same step) `--plan`: the plan of a
    training step names the gradient's nests, which another entry lacks."""
    if params_file.is_params_file(path):
        return None
    try:
        container = pskd.read(path)
    except FileFormatError as e:
        raise checkpoint_refusal(path, e) from None
    if container.kind != "checkpoint":
        raise FileFormatError(f"{path}: a {container.kind} file, not a checkpoint", code="E9005")
    meta = container.meta
    error = first_violation(meta, RECORDED)
    if error is not None:
        where = "meta" + "".join(f"[{p!r}]" for p in error.absolute_path)
        raise FileFormatError(f"{path}: header.json: {where}: {error.message}", code="E9002")
    program = load_program(args.file).ast
    if "entry" in meta:
        _bind_entry(args, program, meta, path)
    declared = {name for name, _ in program.dims}  # another program may lack a recorded dim
    given_dims = parse_assignments(args.dim, "--dim", "E3004")
    recorded_dims = _recorded(meta, "dims", path)[1]
    args.dim = (args.dim or []) + [
        flag for name, flag in recorded_dims.items() if name in declared - set(given_dims)
    ]
    if realize and "realize" in meta and hasattr(args, "realize") and not given(args.realize):
        args.realize = Defaulted(_spelling(meta["realize"], path))
    if "remat" in meta and hasattr(args, "remat") and not given(args.remat):
        args.remat = Defaulted(meta["remat"])
    if plan and "plan" in meta and args.plan is None:
        args.plan = meta["plan"]
    return meta


def _bind_entry(args, program: ast.SourceTree, meta: dict, path: str) -> None:
    """`args.entry` and `args.const` checked against the recorded entry and consts, and
    filled from them."""
    recorded_consts, recorded_flags = _recorded(meta, "consts", path)
    try:
        recorded = resolve_entry(program, parse_entry(meta["entry"]), recorded_consts)
        values = entry_consts(program, recorded, recorded_consts)
    except BindingError as e:
        if given(args.entry):  # another program (a module renamed): the shapes still check
            return
        raise BindingError(
            f"{path} was trained as {meta['entry']}, which {args.file} cannot bind: {e.message}",
            code="E3015",
        ) from None
    flags = parse_assignments(args.const, "--const", "E3007")
    for name, value in flags.items():
        if name in values and value != values[name]:
            raise _disagree(f"--const {name}={value}", name, values[name], path)
    if given(args.entry):
        entry = resolve_entry(program, parse_entry(args.entry), {**values, **flags})
        if entry.module != recorded.module:
            raise BindingError(
                f"--entry {args.entry} is not a function of {recorded.module}, whose "
                f"parameters {path} holds (trained as {meta['entry']})",
                code="E3015",
            )
    else:
        args.entry, entry = meta["entry"], recorded
    module = program.modules.get(entry.module)
    if module is None:  # a top-level function: no parameters, no consts
        return
    fill = []
    for name, text in _const_texts(module, entry):
        size = positive_size(text)
        if size is not None and size != values[name]:
            raise _disagree(f"--entry '{args.entry}' ({name}={size})", name, values[name], path)
        if size is None and text not in flags:
            fill.append(recorded_flags.get(text) or f"{text}={values[name]}")
    args.const = (args.const or []) + fill


def _const_texts(module: ast.ModuleDef, entry: Entry) -> list[tuple[str, str]]:
    """Each const of the entry's module with what the entry says of it: a number, or the
    name of the `--const` that gives it (its own name when the entry writes no braces)."""
    texts = entry.const_args if entry.const_args is not None else module.consts
    return list(zip(module.consts, texts, strict=False))


def _disagree(flag: str, name: str, recorded: int, path: str) -> BindingError:
    return BindingError(
        f"{flag} disagrees with the checkpoint's {name}={recorded} ({path})", code="E3015"
    )


def _recorded(meta: dict, key: str, path: str) -> tuple[dict[str, int], dict[str, str]]:
    """The recorded `--dim` or `--const` flags: their values, and the flags as written,
    by name (E9002 if malformed)."""
    items = meta.get(key, [])
    flag = "--dim" if key == "dims" else "--const"
    try:
        values = parse_assignments(items, flag, "E9002")
    except BindingError as e:
        raise FileFormatError(
            f"{path}: header.json: meta[{key!r}]: {e.message}", code="E9002"
        ) from None
    return values, {item.partition("=")[0].strip(): item for item in items}


def _spelling(record: dict, path: str) -> str:
    """The `--realize` that reads back the recorded realization: its machine type when
    it is uniform (presk's own functions: a record without the field is older than
    them, and meant the C library's), else the checkpoint itself (`@CKPT.psk.d`,
    presk/realize.py)."""
    if set(record) <= {"default", "functions"} and record.get("functions") == "presk":
        return record.get("default", "f64")
    return "@" + path
