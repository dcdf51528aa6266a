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
