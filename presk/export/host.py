"""The host of an exported entry, as MLIR for the EmitC route: its index checks and its
schedule of launches.

Two functions, in the EmitC dialect, over the region table (`uint8_t **regions`: the
arena, the arguments' leaves, the constants, as in presk/backends/schedule.py):

- `presk_check(regions) -> int32_t`: 0, or k when the k-th index check finds an index
  out of range (every check reads only arguments, so all run before any launch, as the
  MLIR backend runs them first). Each check is a `func.func` of scf/arith/memref ops over
  the indices, lowered to EmitC with the kernels.
- `presk_launch(regions)`: each launch a call of its kernel on region base + offset (the
  trace's offsets) and `[0, split)`, each layer of a fold's stacked output a `memcpy`.

A kernel's C parameters are arrays of its buffers' shapes; a `void *` converts to them
implicitly, so the calls are `emitc.call_opaque` on `void *` arguments.
"""

from __future__ import annotations

import math

from presk.backends.schedule import ARENA, GatherCheck, Launch, StackLayers
from presk.errors import UsageError
from presk.export.kernels_c import c_name

_BYTES = "!emitc.ptr<ui8>"
_VOID = '!emitc.ptr<!emitc.opaque<"void">>'
_REGIONS = "!emitc.ptr<!emitc.ptr<ui8>>"


def host_mlir(steps: list[Launch | StackLayers | GatherCheck]) -> str:
    """The check functions, `presk_check` and `presk_launch` for `steps` (trace.host_steps),
    as the ops of a module body."""
    checks = [s for s in steps if isinstance(s, GatherCheck)]
    work = [s for s in steps if not isinstance(s, GatherCheck)]
    if steps[: len(checks)] != checks:
        late = next(s for s in steps[len(checks) :] if isinstance(s, GatherCheck))
        raise UsageError(
            f"the C export checks indices before any launch; the {late.what}s at "
            f"{late.site} are computed by the entry"
        )
    parts = [_check_function(i, c) for i, c in enumerate(checks)]
    parts.append(_check_all(checks))
    parts.append(_launch_all(work))
    return "\n".join(parts)


def _check_function(i: int, c: GatherCheck) -> str:
    """`presk_check_<i>(indices) -> bool`: whether any index is outside [0, size)."""
    if c.indices.region == ARENA:
        raise UsageError(f"the C export cannot check the computed {c.what}s at {c.site}")
    n = math.prod(c.indices.shape)
    return f"""func.func private @presk_check_{i}(%idx: memref<{n}xi64>) -> i1 {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {n} : index
  %zero = arith.constant 0 : i64
  %size = arith.constant {c.size} : i64
  %false = arith.constant false
  %bad = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %false) -> (i1) {{
    %v = memref.load %idx[%i] : memref<{n}xi64>
    %below = arith.cmpi slt, %v, %zero : i64
    %above = arith.cmpi sge, %v, %size : i64
    %out = arith.ori %below, %above : i1
    %any = arith.ori %acc, %out : i1
    scf.yield %any : i1
  }}
  return %bad : i1
}}"""


class _Body:
    """The ops of an EmitC function over the region table, each region's base loaded once."""

    def __init__(self):
        self.lines: list[str] = []
        self.bases: dict[int, str] = {}
        self.n = 0

    def value(self, op: str, type_: str | None = None) -> str:
        self.n += 1
        name = f"%v{self.n}"
        self.lines.append(f"    {name} = {op}")
        return name

    def constant(self, value: int, type_: str) -> str:
        return self.value(f'"emitc.constant"() <{{value = {value} : {type_}}}> : () -> {type_}')

    def pointer(self, region: int, offset: int) -> str:
        """`(void *)(regions[region] + offset)`."""
        base = self.bases.get(region)
        if base is None:
            i = self.constant(region, "index")
            slot = self.value(
                f"emitc.subscript %regions[{i}] : ({_REGIONS}, index) -> !emitc.lvalue<{_BYTES}>"
            )
            base = self.bases[region] = self.value(f"emitc.load {slot} : !emitc.lvalue<{_BYTES}>")
        at = base
        if offset:
            o = self.constant(offset, "i64")
            at = self.value(f"emitc.add {base}, {o} : ({_BYTES}, i64) -> {_BYTES}")
        return self.value(f"emitc.cast {at} : {_BYTES} to {_VOID}")

    def call(self, callee: str, args: list[str], types: list[str], result: str = "") -> str:
        op = f'emitc.call_opaque "{callee}"({", ".join(args)}) : ({", ".join(types)}) -> ({result})'
        if result:
            return self.value(op)
        self.lines.append(f"    {op}")
        return ""


def _check_all(checks: list[GatherCheck]) -> str:
    body = _Body()
    flags = [
        body.call(
            f"presk_check_{i}", [body.pointer(c.indices.region, c.indices.offset)], [_VOID], "i1"
        )
        for i, c in enumerate(checks)
    ]
    code = body.constant(0, "i32")
    for i in reversed(range(len(checks))):  # the first failing check's number
        k = body.constant(i + 1, "i32")
        code = body.value(f"emitc.conditional {flags[i]}, {k}, {code} : i32")
    return _function("presk_check", body, "i32", code)


def _launch_all(work: list[Launch | StackLayers]) -> str:
    body = _Body()
    for step in work:
        if isinstance(step, StackLayers):
            n = body.constant(step.nbytes, "index")
            for region, offset, at in step.pieces:
                dst, src = body.pointer(ARENA, at), body.pointer(region, offset)
                body.call("memcpy", [dst, src, n], [_VOID, _VOID, "index"])
            continue
        args = [body.pointer(r, o) for r, o in step.buffers]
        lo, hi = body.constant(0, "index"), body.constant(step.kernel.split, "index")
        body.call(c_name(step.kernel.name), [*args, lo, hi], [_VOID] * len(args) + ["index"] * 2)
    return _function("presk_launch", body)


def _function(name: str, body: _Body, result: str = "", value: str = "") -> str:
    ret = f"    emitc.return {value} : {result}" if result else "    emitc.return"
    signature = f"(%regions: {_REGIONS})" + (f" -> {result}" if result else "")
    signature += ' attributes {specifiers = ["static"]}'
    lines = "\n".join([*body.lines, ret])
    return f"emitc.func @{name}{signature} {{\n{lines}\n}}"
