"""Pass pipelines: lists of presk's pass objects and upstream MLIR passes, run by one
PassManager.

A `Pipeline` is built from `Pass` instances (their options typed fields) and upstream
passes by their textual names (`Upstream("func.func(cse)")`); it prints itself only for
display and for `presk-opt` (`builtin.module(psk-verify,canonicalize,func.func(cse))`),
and `parse_pipeline` reads such text back into one. Presk passes walk from the module,
so they may appear only at the top level of a pipeline.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from mlir import ir
from mlir.passmanager import PassManager

from presk.errors import OpError, UsageError
from presk.ir.diagnostics import compile_error
from presk.passes import Pass, registry


@dataclass(frozen=True)
class Upstream:
    """Upstream MLIR passes, as their textual pipeline spells them (`func.func(cse)`)."""

    text: str


Step = Pass | Upstream


@dataclass(frozen=True)
class Pipeline:
    """Passes run in order over a `builtin.module`."""

    steps: tuple[Step, ...] = ()

    def __add__(self, other: Pipeline) -> Pipeline:
        return Pipeline(self.steps + other.steps)

    def text(self) -> str:
        """`builtin.module(...)`, as `presk-opt --pass-pipeline` takes it."""
        return "builtin.module(" + ",".join(_step_text(s) for s in self.steps) + ")"

    def pass_manager(self, ctx: ir.Context) -> PassManager:
        """One PassManager on `builtin.module` running the steps: each presk pass as a
        Python pass under its own name, each run of upstream passes as their text."""
        pm = PassManager("builtin.module", context=ctx)
        upstream: list[str] = []
        for step in (*self.steps, None):
            if isinstance(step, Upstream):
                upstream.append(step.text)
                continue
            if upstream:
                try:
                    pm.add(",".join(upstream))
                except ValueError as e:
                    raise UsageError(f"bad pass pipeline: {_mlir_pipeline_error(str(e))}") from None
                upstream = []
            if step is not None:
                cls = type(step)
                pm.add(
                    _as_mlir_pass(step),
                    name=cls.__name__,
                    argument=cls.name,
                    description=cls.description,
                )
        return pm

    def run(self, module: ir.Module) -> ir.Module:
        """Run the steps over `module` in place and return it; a pass's refusal (a second
        derivative, say) becomes a located presk error (E2020), not an MLIR exception."""
        with module.context:
            try:
                self.pass_manager(module.context).run(module.operation)
            except ir.MLIRError as e:
                raise compile_error(e) from None
        return module


def _step_text(step: Step) -> str:
    return step.text if isinstance(step, Upstream) else step.text()


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


def parse_pipeline(text: str) -> Pipeline:
    """The pipeline `builtin.module(...)` (or a bare comma-separated list) spells."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    passes = registry()
    steps: list[Step] = []
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
            steps.append(passes[name].from_options(_options(name, opts)))
        else:
            nested = _nested_presk_pass(item, passes)
            if nested:
                raise UsageError(
                    f"presk pass {nested} must run at the top level of the pipeline, "
                    f"not nested in '{name}(...)'"
                )
            steps.append(Upstream(item))
    return Pipeline(tuple(steps))


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
