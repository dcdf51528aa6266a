"""psk-kernel-to-affine: kernels over buffers become affine loop nests over memrefs.

Each kernel `func.func` gets memref arguments of its buffers' shapes and element types,
and two `index` arguments `lo, hi` after them. `scf.for` loops become `affine.for` (their
`psk_kernel.parallel` and `psk_kernel.any_order` marks kept); `psk_kernel.load`/`store`
become `affine.load`/`store` where every index is an affine function of the loop indices,
and `memref.load`/`store` otherwise (a gather by token); a bf16 element widens with
`arith.extf` and rounds to nearest even with `arith.truncf`; `psk_kernel.call` becomes the
`math` op of the same C library function. Nothing is reordered, so every value is
computed as before.

A kernel whose only top-level work is one parallel loop runs that loop from `lo` to `hi`,
so the host may split it over threads; it is marked `psk_kernel.split` with the loop's
trip count (0 on other kernels, which ignore `lo, hi`). A contraction whose layout names
a split runs the loop at that depth from `lo` to `hi` instead, marked with the layout's
`psk_kernel.workers`; where that loop is the one over J's blocks, the loop packing b's
panels (`psk_kernel.panels`) runs over the same range, so a worker packs only the panels
it reads. `psk_kernel.work` estimates the
scalar operations a launch runs, which the host weighs against the cost of splitting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine, arith, memref, vector

from presk.ir.ops import python_value, walk_ops
from presk.kernel.builder import buffer_parts
from presk.kernel.functions import IMPL, expand
from presk.kernel.loops import (
    ANY_ORDER,
    PANELS,
    PARALLEL,
    constant_bounds,
    constant_index,
    kernel_funcs,
    move_body,
    rebuild_for,
)
from presk.passes import Pass

MATH = {
    "exp": "math.exp",
    "log": "math.log",
    "tanh": "math.tanh",
    "sin": "math.sin",
    "cos": "math.cos",
    "erf": "math.erf",
    "pow": "math.powf",
}
_INDEX_ARITH = ("arith.constant", "arith.addi", "arith.muli", "arith.index_cast")


@dataclass(frozen=True)
class PskKernelToAffine(Pass):
    name = "psk-kernel-to-affine"
    description = "lower psk_kernel kernels to affine loop nests over memrefs"

    def run(self, module) -> None:
        for f in kernel_funcs(module):
            block = f.regions[0].blocks[0]
            if any(isinstance(a.type, ir.MemRefType) for a in block.arguments):
                continue  # lowered already
            with f.context, f.location:
                _lower(f, block)


def _lower(f: ir.Operation, block: ir.Block) -> None:
    for a in block.arguments:
        element, shape = buffer_parts(a.type)
        a.set_type(ir.MemRefType.get(shape, ir.Type.parse(element)))
    lo = block.add_argument(ir.IndexType.get(), f.location)
    hi = block.add_argument(ir.IndexType.get(), f.location)
    types = [a.type for a in block.arguments]
    f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(types, []))
    for loop in walk_ops(f, "scf.for"):
        _affine_for(loop)
    f.attributes["psk_kernel.work"] = _i64(_work(block, 1))
    for op in walk_ops(f, "psk_kernel."):
        with op.location, ir.InsertionPoint(op):
            if op.name == "psk_kernel.load":
                _load(op)
            elif op.name == "psk_kernel.store":
                _store(op)
            elif op.name == "psk_kernel.scratch":
                _scratch(op, block)
            else:
                fn = ir.StringAttr(op.attributes["fn"]).value
                if IMPL in op.attributes:  # presk's own function, in arith ops
                    result = expand(fn, op.operands[0])
                else:
                    operands = list(op.operands)
                    result = ir.Operation.create(
                        MATH[fn], results=[op.result.type], operands=operands
                    ).result
                op.result.replace_all_uses_with(result)
        op.erase()
    _erase_unused_index_arith(f)
    f.attributes["psk_kernel.split"] = _i64(_split(f, block, lo, hi))


def _i64(n: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)


def _affine_for(loop: ir.Operation) -> None:
    lo, hi, step = (constant_index(v) for v in list(loop.operands)[:3])
    with loop.location, ir.InsertionPoint(loop):
        new = affine.AffineForOp(lo, hi, step, list(loop.operands)[3:]).operation
    for mark in (PARALLEL, PANELS, ANY_ORDER):
        if mark in loop.attributes:
            new.attributes[mark] = ir.UnitAttr.get()
    move_body(loop, new)
    for a, b in zip(loop.results, new.results, strict=True):
        a.replace_all_uses_with(b)
    loop.erase()


def _work(block: ir.Block, trips: int) -> int:
    """The ops a block runs, its loops' bodies counted once an iteration."""
    total = 0
    for op in block.operations:
        op = op.operation
        if op.name == "affine.for":
            lo, hi = constant_bounds(op)
            total += _work(op.regions[0].blocks[0], trips * (hi - lo))
        elif op.name not in ("arith.constant", "affine.yield", "func.return"):
            total += trips
    return total


def _affine_expr(v: ir.Value, dims: list[ir.Value]) -> ir.AffineExpr | None:
    """`v` as an affine expression of loop indices (appended to `dims`), if it is one."""
    c = constant_index(v)
    if c is not None:
        return ir.AffineConstantExpr.get(c)
    owner = v.owner
    if isinstance(owner, ir.Block):
        if owner.owner.name != "affine.for" or v.arg_number != 0:
            return None
        if v not in dims:
            dims.append(v)
        return ir.AffineDimExpr.get(dims.index(v))
    op = owner.operation
    if op.name not in ("arith.addi", "arith.muli", "arith.divui", "arith.remui"):
        return None
    a, b = (_affine_expr(x, dims) for x in op.operands)
    if a is None or b is None:
        return None
    if op.name == "arith.addi":
        return a + b
    if op.name == "arith.muli":
        if isinstance(a, ir.AffineConstantExpr) or isinstance(b, ir.AffineConstantExpr):
            return a * b
        return None
    if not isinstance(b, ir.AffineConstantExpr):
        return None
    return (ir.AffineFloorDivExpr if op.name == "arith.divui" else ir.AffineModExpr).get(a, b)


def _indices(indices: list[ir.Value]) -> tuple[ir.AffineMap, list[ir.Value]] | None:
    dims: list[ir.Value] = []
    exprs = [_affine_expr(v, dims) for v in indices]
    if any(e is None for e in exprs):
        return None
    return ir.AffineMap.get(len(dims), 0, exprs), dims


def _stored_type(t: ir.Type, element: ir.Type) -> ir.Type:
    """The type a value of type `t` (scalar or vector) has in a buffer of `element`s."""
    if isinstance(t, ir.VectorType):
        return ir.VectorType.get(t.shape, element)
    return element


def _load(op: ir.Operation) -> None:
    buf, *indices = op.operands
    t = _stored_type(op.result.type, ir.MemRefType(buf.type).element_type)
    found = _indices(indices)
    vec = isinstance(t, ir.VectorType)
    if found is None:
        value = vector.load(t, buf, indices) if vec else memref.load(buf, indices)
    elif vec:
        value = affine.AffineVectorLoadOp(t, buf, found[1], found[0]).result
    else:
        value = affine.AffineLoadOp(t, buf, found[1], found[0]).result
    if op.result.type != t:  # bf16 widened exactly to the arithmetic type
        value = arith.extf(op.result.type, value)
    op.result.replace_all_uses_with(value)


def _store(op: ir.Operation) -> None:
    value, buf, *indices = op.operands
    t = _stored_type(value.type, ir.MemRefType(buf.type).element_type)
    if value.type != t:  # rounded to nearest even
        value = arith.truncf(t, value)
    found = _indices(indices)
    vec = isinstance(t, ir.VectorType)
    if found is None:
        (vector.store if vec else memref.store)(value, buf, indices)
    elif vec:
        affine.AffineVectorStoreOp(value, buf, found[1], found[0])
    else:
        affine.AffineStoreOp(value, buf, found[1], found[0])


# A scratch buffer up to this size lives on the stack; a larger one (a packed panel) on
# the heap. Workers run kernels on threads with the system's default stack (8 MiB).
STACK_SCRATCH = 64 << 10


def _scratch(op: ir.Operation, entry: ir.Block) -> None:
    """The scratch buffer made once, at the kernel's entry, rather than where it is made
    (inside a row's loop, a softmax's two-pass row): every use writes it before reading,
    and a kernel's iterations run in turn. On the stack when small, else allocated at the
    entry and freed before the return."""
    element, shape = buffer_parts(op.result.type)
    mtype = ir.MemRefType.get(shape, ir.Type.parse(element))
    first = list(entry.operations)[0]
    with ir.InsertionPoint(first.operation):
        if mtype.element_type.width // 8 * math.prod(shape) <= STACK_SCRATCH:
            buffer = memref.alloca(mtype, [], [], alignment=64)
        else:
            buffer = memref.alloc(mtype, [], [], alignment=64)
            with ir.InsertionPoint(list(entry.operations)[-1].operation):
                memref.dealloc(buffer)
    op.result.replace_all_uses_with(buffer)


def _erase_unused_index_arith(f: ir.Operation) -> None:
    for op in reversed(list(walk_ops(f, "arith."))):
        if op.name in _INDEX_ARITH and not any(list(r.uses) for r in op.results):
            op.erase()


def _split(f: ir.Operation, block: ir.Block, lo: ir.Value, hi: ir.Value) -> int:
    """Bound the loop the host may split by `lo, hi`; its trip count, or 0. A layout's
    split names the loop's depth down the nest (the last loop of each body, the one after
    any packing); by default it is the outermost loop, where that is the kernel's only
    top-level work and parallel."""
    layout = (
        python_value(f.attributes["psk_kernel.layout"])
        if "psk_kernel.layout" in f.attributes
        else {}
    )
    panels = []  # b's panel loop, where the split loop is the one over J's blocks
    if layout.get("split"):
        depth, workers = layout["split"]
        f.attributes["psk_kernel.workers"] = _i64(workers)
        loop = None
        for _ in range(depth + 1):
            loops = [o.operation for o in block.operations if o.operation.name == "affine.for"]
            loop = loops[-1]
            block = loop.regions[0].blocks[0]
        # beside the block loops only when the split is at the first, J's in that order
        if layout["order"][0] == "J":
            panels = [o for o in loops[:-1] if PANELS in o.attributes]
    else:
        top = [o.operation for o in block.operations]
        loops = [o for o in top if o.name == "affine.for"]
        if len(loops) != 1 or any(o.name.endswith("store") for o in top):
            return 0
        loop = loops[0]
    if PARALLEL not in loop.attributes or loop.results:
        return 0
    lower, upper = constant_bounds(loop)
    symbol = ir.AffineMap.get(0, 1, [ir.AffineSymbolExpr.get(0)])
    for x in [*panels, loop]:  # a worker packs the panels of its own blocks alone
        assert constant_bounds(x) == (lower, upper), "b's panels are J's blocks"
        rebuild_for(x, lower=(symbol, [lo]), upper=(symbol, [hi]))
    return upper - lower


PASS = PskKernelToAffine
