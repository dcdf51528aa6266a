"""presk's rewrite passes: one module per pass, each registered under its own name.

A pass is a frozen dataclass subclassing `Pass`, with a kebab-case `name`, a one-line
`description`, options as fields (`psk-tile{m=4 n=16}`), and `run(module)` that rewrites
a `builtin.module` in place and leaves it verifying. Each module `presk/passes/<snake_name>.py`
defines one pass and exports it as `PASS`; `registry()` finds them lazily.

A pass whose rewrite is local to one op (erase it, mark it, carry a loop's value in a
register) states it as rewrite patterns, one function an op name, applied by `apply`.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

from mlir import ir
from mlir.rewrite import PatternRewriter, RewritePatternSet, walk_and_apply_patterns

from presk.errors import UsageError
from presk.kernel.contraction import Layout
from presk.kernel.relayout import relayout

# A rewrite pattern's body: rewrite `op` and say whether it did. It may erase `op` and ops
# nested in it, and add or move ops just before or in place of it, but must not change an
# op the walk has yet to visit (one after `op`, or an ancestor).
Rewrite = Callable[[ir.Operation, PatternRewriter], bool]


@dataclass(frozen=True)
class Pass:
    name: ClassVar[str]
    description: ClassVar[str]

    def run(self, module) -> None:  # module: mlir.ir.Operation (builtin.module)
        raise NotImplementedError(f"pass {self.name} has no run()")

    def text(self) -> str:
        """The pass as a pipeline spells it, `psk-tile{m=4 n=16}`: its options in
        declaration order, but for those left empty ("" or 0: every nest, this machine's),
        each value quoted where `from_options` must read it back whole."""
        given = [
            f"{f.name}={_option_text(getattr(self, f.name))}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) not in ("", 0)
        ]
        return self.name + (f"{{{' '.join(given)}}}" if given else "")

    @classmethod
    def options(cls) -> list[tuple[str, str, object]]:
        """Each option as (name, type, default), in declaration order: its fields."""
        return [(f.name, _type_name(f.type), f.default) for f in dataclasses.fields(cls)]

    @classmethod
    def from_options(cls, options: dict[str, str]) -> Pass:
        """Build the pass from `{key=value ...}` text options, converting to field types."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, raw in options.items():
            f = fields.get(key.replace("-", "_"))
            if f is None:
                known = ", ".join(sorted(fields)) or "none"
                raise UsageError(f"pass {cls.name} has no option '{key}' (options: {known})")
            kwargs[f.name] = _convert(cls.name, key, raw, f.type)
        return cls(**kwargs)


_PLAIN = re.compile(r"[\w@%+=:./()-]+")  # what an option value may hold unquoted


def _option_text(value: object) -> str:
    """An option's value as text (`interleaved(2)`), quoted as a shell would when it holds
    anything else (a space, a comma, a quote, a brace, an unbalanced parenthesis):
    presk/pipeline.py reads it back."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if _PLAIN.fullmatch(text) and _balanced(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _type_name(typ) -> str:
    """A field's type by name (`int`), whether its annotation is text or the type."""
    return typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))


def _convert(pass_name: str, key: str, raw: str, typ) -> object:
    typ = _type_name(typ)
    try:
        if typ == "int":
            return int(raw)
        if typ == "bool":
            if raw not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw in ("true", "1")
        if typ == "float":
            return float(raw)
    except ValueError:
        raise UsageError(f"pass {pass_name}: option '{key}' takes a {typ}, not '{raw}'") from None
    return raw


def apply(roots: Iterable[ir.Operation], patterns: dict[str, Rewrite]) -> bool:
    """Apply `patterns` (by root op name) to every op nested in each of `roots`, in one
    post-order walk (an op's regions before the op: inner loops before outer ones, a
    block's ops in order); whether any pattern rewrote.

    This is upstream's walk driver, not `apply_patterns_and_fold_greedily`: the greedy
    driver also folds, erases every trivially dead op and simplifies regions, which would
    change kernels and other dialects' ops these passes leave alone (the lit tests check
    they stay). The walk driver needs no notice of an op a pattern moves, marks or builds
    with the bindings' own builders, which the Python rewriter has no calls for.
    """
    rewrote = False

    def as_pattern(rewrite: Rewrite):
        def pattern(op, rewriter) -> bool:
            nonlocal rewrote
            done = rewrite(op.operation, rewriter)
            rewrote = rewrote or done
            return not done  # upstream's convention: a falsy result is a match

        return pattern

    roots = list(roots)
    if not roots:
        return False
    found = RewritePatternSet(roots[0].context)
    for name, rewrite in patterns.items():
        found.add(name, as_pattern(rewrite))
    frozen = found.freeze()
    for root in roots:
        walk_and_apply_patterns(root, frozen)
    return rewrote


@dataclass(frozen=True)
class LayoutPass(Pass):
    """A pass moving nests to `change(layout)`: every contraction, or the nest `nest` names."""

    nest: str = ""

    def change(self, layout: Layout) -> Layout:
        raise NotImplementedError

    def run(self, module) -> None:
        relayout(module, self.nest, self.change)


@cache
def registry() -> dict[str, type[Pass]]:
    """Every presk pass by name, found by importing each module of this package."""
    found: dict[str, type[Pass]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cls = module.PASS
        found[cls.name] = cls
    return dict(sorted(found.items()))
