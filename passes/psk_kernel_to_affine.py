"""psk-kernel-to-affine: kernels over buffers become affine loop nests over memrefs.

Each kernel `func.func` gets memref arguments of its buffers' shapes and element types,
and two `index` arguments `lo, hi` after them. `scf.for` loops become `affine.for` (their
`psk_kernel.parallel` mark kept); `psk_kernel.load`/`store` become `affine.load`/`store`
where every index is an affine function of the loop indices, and `memref.load`/`store`
otherwise (a gather by token); a bf16 element widens with `arith.extf` and rounds to
nearest even with `arith.truncf`; `psk_kernel.call` becomes the `math` op of the same C
library function. Nothing is reordered, so every value is computed as before.

A kernel whose only top-level work is one parallel loop runs that loop from `lo` to `hi`,
so the host may split it over threads; it is marked `psk_kernel.split` with the loop's
trip count (0 on other kernels, which ignore `lo, hi`). `psk_kernel.work` estimates the
scalar operations a launch runs, which the host weighs against the cost of splitting.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine, arith, memref
from presk.passes import Pass

from presk.ir.core import walk_ops
from presk.kernel.builder import buffer_parts
from presk.kernel.loops import (
    PARALLEL,
    constant_bounds,
    constant_index,
    kernel_funcs,
    move_body,
    rebuild_for,
)

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
            else:
                fn = ir.StringAttr(op.attributes["fn"]).value
                new = ir.Operation.create(
                    MATH[fn], results=[op.result.type], operands=list(op.operands)
                )
                op.result.replace_all_uses_with(new.result)
        op.erase()
    _erase_unused_index_arith(f)
    f.attributes["psk_kernel.split"] = _i64(_split(block, lo, hi))


def _i64(n: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)


def _affine_for(loop: ir.Operation) -> None:
    lo, hi, step = (constant_index(v) for v in list(loop.operands)[:3])
    with loop.location, ir.InsertionPoint(loop):
        new = affine.AffineForOp(lo, hi, step, list(loop.operands)[3:]).operation
    if PARALLEL in loop.attributes:
        new.attributes[PARALLEL] = ir.UnitAttr.get()
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
    if op.name not in ("arith.addi", "arith.muli"):
        return None
    a, b = (_affine_expr(x, dims) for x in op.operands)
    if a is None or b is None:
        return None
    if op.name == "arith.addi":
        return a + b
    if not isinstance(a, ir.AffineConstantExpr) and not isinstance(b, ir.AffineConstantExpr):
        return None
    return a * b


def _indices(indices: list[ir.Value]) -> tuple[ir.AffineMap, list[ir.Value]] | None:
    dims: list[ir.Value] = []
    exprs = [_affine_expr(v, dims) for v in indices]
    if any(e is None for e in exprs):
        return None
    return ir.AffineMap.get(len(dims), 0, exprs), dims


def _load(op: ir.Operation) -> None:
    buf, *indices = op.operands
    element = ir.MemRefType(buf.type).element_type
    found = _indices(indices)
    if found is None:
        value = memref.load(buf, indices)
    else:
        value = affine.AffineLoadOp(element, buf, found[1], found[0]).result
    if op.result.type != element:  # bf16 widened exactly to the arithmetic type
        value = arith.extf(op.result.type, value)
    op.result.replace_all_uses_with(value)


def _store(op: ir.Operation) -> None:
    value, buf, *indices = op.operands
    element = ir.MemRefType(buf.type).element_type
    if value.type != element:  # rounded to nearest even
        value = arith.truncf(element, value)
    found = _indices(indices)
    if found is None:
        memref.store(value, buf, indices)
    else:
        affine.AffineStoreOp(value, buf, found[1], found[0])


def _erase_unused_index_arith(f: ir.Operation) -> None:
    for op in reversed(list(walk_ops(f, "arith."))):
        if op.name in _INDEX_ARITH and not any(list(r.uses) for r in op.results):
            op.erase()


def _split(block: ir.Block, lo: ir.Value, hi: ir.Value) -> int:
    """Bound the kernel's outermost loop by `lo, hi` if it is the kernel's only top-level
    work and parallel; its trip count, or 0."""
    top = [o.operation for o in block.operations]
    loops = [o for o in top if o.name == "affine.for"]
    stores = [o for o in top if o.name.endswith("store")]
    if len(loops) != 1 or stores or PARALLEL not in loops[0].attributes or loops[0].results:
        return 0
    lower, upper = constant_bounds(loops[0])
    symbol = ir.AffineMap.get(0, 1, [ir.AffineSymbolExpr.get(0)])
    rebuild_for(loops[0], lower=(symbol, [lo]), upper=(symbol, [hi]))
    return upper - lower


PASS = PskKernelToAffine
