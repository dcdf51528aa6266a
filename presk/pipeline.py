"""Pass pipelines that mix presk's Python passes with upstream MLIR passes.

`builtin.module(psk-verify,canonicalize,func.func(cse),psk-dce)` becomes one
PassManager: each presk pass is added as a Python pass under its own name, each run of
upstream passes as their textual pipeline. Presk passes walk from the module, so they
may appear only at the top level of the pipeline.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from mlir import ir
from mlir.passmanager import PassManager

from presk.errors import OpError, UsageError
from presk.passes import Pass, registry


@dataclass(frozen=True)
class PreskStep:
    pass_: Pass


@dataclass(frozen=True)
class UpstreamStep:
    text: str


def split_top_level(text: str) -> list[str]:
    """Split `a,b{x=1},c(d,e)` at the commas outside braces, parentheses and quotes (a
    quoted option value, `{file='my plans/p (1).json'}`, may hold any of them)."""
    parts, depth, start, quote = [], 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
            if depth < 0:
                raise UsageError(f"unbalanced '{ch}' in pass pipeline '{text}'")
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if depth != 0:
        raise UsageError(f"unbalanced parentheses in pass pipeline '{text}'")
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return [p for p in parts if p]


def _options(name: str, text: str) -> dict[str, str]:
    """`key=value key2='a value'`: values may be quoted as a shell quotes them."""
    try:
        items = shlex.split(text)
    except ValueError as e:  # an unterminated quote
        raise UsageError(f"pass {name}: options '{text}': {e}") from None
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"pass {name}: option '{item}' is not key=value")
        out[key] = value
    return out


def _nested_presk_pass(item: str, passes) -> str | None:
    if "(" not in item:
        return None
    for sub in split_top_level(item[item.index("(") + 1 : item.rindex(")")]):
        name = sub.split("{", 1)[0].split("(", 1)[0].strip()
        found = name if name in passes else _nested_presk_pass(sub, passes)
        if found:
            return found
    return None


def parse_pipeline(text: str) -> list[PreskStep | UpstreamStep]:
    """The steps of `builtin.module(...)` (or of a bare comma-separated list)."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    passes = registry()
    steps: list[PreskStep | UpstreamStep] = []
    for item in split_top_level(text):
        name = item.split("{", 1)[0].split("(", 1)[0].strip()
        if name in passes:
            opts = ""
            if "{" in item:
                if not item.endswith("}"):
                    raise UsageError(
                        f"pass {name}: options must be written {name}{{key=value ...}}"
                    )
                opts = item[item.index("{") + 1 : -1]
            steps.append(PreskStep(passes[name].from_options(_options(name, opts))))
        else:
            nested = _nested_presk_pass(item, passes)
            if nested:
                raise UsageError(
                    f"presk pass {nested} must run at the top level of the pipeline, "
                    f"not nested in '{name}(...)'"
                )
            if steps and isinstance(steps[-1], UpstreamStep):
                steps[-1] = UpstreamStep(f"{steps[-1].text},{item}")
            else:
                steps.append(UpstreamStep(item))
    return steps


def _as_mlir_pass(p: Pass):
    def run(op, mlir_pass):
        try:
            p.run(op)
        except OpError as e:
            if e.op is None:
                raise
            # Reported as an MLIR diagnostic, so it is located in the input like upstream's.
            e.op.location.emit_error(f"{type(p).name}: {e.message}")
            mlir_pass.signal_pass_failure()

    return run


def _mlir_pipeline_error(text: str) -> str:
    """The message of MLIR's pipeline parser, without its own location prefix."""
    for line in text.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def build_pass_manager(text: str, ctx: ir.Context) -> PassManager:
    """One PassManager on `builtin.module` running the pipeline `text`."""
    pm = PassManager("builtin.module", context=ctx)
    for step in parse_pipeline(text):
        if isinstance(step, PreskStep):
            cls = type(step.pass_)
            pm.add(
                _as_mlir_pass(step.pass_),
                name=cls.__name__,
                argument=cls.name,
                description=cls.description,
            )
        else:
            try:
                pm.add(step.text)
            except ValueError as e:
                raise UsageError(f"bad pass pipeline: {_mlir_pipeline_error(str(e))}") from None
    return pm
