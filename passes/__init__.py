"""presk's rewrite passes: one module per pass, each registered under its own name.

A pass is a frozen dataclass subclassing `Pass`, with a kebab-case `name`, a one-line
`description`, options as fields (`psk-tile{m=4 n=16}`), and `run(module)` that rewrites
a `builtin.module` in place and leaves it verifying. Each module `passes/<snake_name>.py`
defines one pass and exports it as `PASS`; `registry()` finds them lazily.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

from presk.errors import UsageError


@dataclass(frozen=True)
class Pass:
    name: ClassVar[str]
    description: ClassVar[str]

    def run(self, module) -> None:  # module: mlir.ir.Operation (builtin.module)
        raise NotImplementedError(f"pass {self.name} has no run()")

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


def _convert(pass_name: str, key: str, raw: str, typ) -> object:
    typ = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
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


@cache
def registry() -> dict[str, type[Pass]]:
    """Every presk pass by name, found by importing each module of this package."""
    found: dict[str, type[Pass]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cls = module.PASS
        found[cls.name] = cls
    return dict(sorted(found.items()))
