"""What the code-generation passes share over kernels in the affine dialect: finding
kernels, asking where a value is defined, reading affine expressions, and rebuilding an
`affine.for` with other bounds or more carried values.

After `psk-kernel-to-affine` a kernel is a `func.func` marked `psk_kernel.kernel` over
memrefs (its inputs, its output) and two `index` arguments `lo, hi`: the range of its
outermost loop when the host may split that loop over threads (`psk_kernel.split` gives
the loop's trip count; 0 when the kernel has no such loop and ignores `lo, hi`).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import affine

from presk.ir.ops import module_functions

PARALLEL = "psk_kernel.parallel"
# a loop carrying only running maxima that its kernel reads through x − m alone, so no
# stored bit depends on the order of its iterations (docs/kernels.md, section 2)
ANY_ORDER = "psk_kernel.any_order"
# the loop over the panels a contraction packs its b into (one a block of J)
PANELS = "psk_kernel.panels"


def kernel_funcs(module: ir.Operation) -> list[ir.Operation]:
    """The kernel `func.func`s of a module, in order."""
    return [f for f in module_functions(module) if "psk_kernel.kernel" in f.attributes]


def body_ops(loop: ir.Operation) -> list[ir.Operation]:
    """The ops directly in a loop's body, its terminator included."""
    return [o.operation for o in loop.regions[0].blocks[0].operations]


def constant_index(v: ir.Value) -> int | None:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    if not isinstance(v.type, ir.IndexType):
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def encloses(op: ir.Operation, inner: ir.Operation) -> bool:
    """Whether `inner` is nested in `op`'s regions."""
    x = inner.parent
    while x is not None and x.name != "func.func":
        if x == op:
            return True
        x = x.parent
    return False


def is_inside(v: ir.Value, op: ir.Operation) -> bool:
    """Whether `v` is defined in `op`'s regions (a block argument of its own body included)."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return owner.owner == op or encloses(op, owner.owner)
    return encloses(op, owner.operation)


def dim_coefficient(e: ir.AffineExpr, pos: int) -> int | None:
    """The coefficient of dimension `pos` in an affine expression, None where the
    dimension appears other than linearly (in a floordiv, mod or ceildiv)."""
    if isinstance(e, ir.AffineDimExpr):
        return 1 if e.position == pos else 0
    if isinstance(e, (ir.AffineConstantExpr, ir.AffineSymbolExpr)):
        return 0
    if isinstance(e, ir.AffineAddExpr):
        a, b = dim_coefficient(e.lhs, pos), dim_coefficient(e.rhs, pos)
        return None if a is None or b is None else a + b
    if isinstance(e, ir.AffineMulExpr):
        for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(y, ir.AffineConstantExpr):
                c = dim_coefficient(x, pos)
                return None if c is None else c * y.value
        return None
    if isinstance(e, ir.AffineBinaryExpr):
        lhs, rhs = dim_coefficient(e.lhs, pos), dim_coefficient(e.rhs, pos)
        return 0 if lhs == 0 and rhs == 0 else None
    return None


def access(op: ir.Operation) -> tuple[ir.Value, ir.AffineMap, list[ir.Value]]:
    """(memref, map, map operands) of an affine load or store (vector ones included)."""
    ops = list(op.operands)
    m = ir.AffineMapAttr(op.attributes["map"]).value
    if op.name in ("affine.load", "affine.vector_load"):
        return ops[0], m, ops[1:]
    return ops[1], m, ops[2:]


def bounds(loop: ir.Operation) -> tuple[tuple, tuple]:
    """((lower map, operands), (upper map, operands)) of an `affine.for`."""
    lb = ir.AffineMapAttr(loop.attributes["lowerBoundMap"]).value
    ub = ir.AffineMapAttr(loop.attributes["upperBoundMap"]).value
    operands = list(loop.operands)
    n_lb = lb.n_inputs
    return (lb, operands[:n_lb]), (ub, operands[n_lb : n_lb + ub.n_inputs])


def constant_bounds(loop: ir.Operation) -> tuple[int, int] | None:
    (lb, _), (ub, _) = bounds(loop)
    exprs = [*lb.results, *ub.results]
    if len(exprs) != 2 or not all(isinstance(e, ir.AffineConstantExpr) for e in exprs):
        return None
    return exprs[0].value, exprs[1].value


def step_of(loop: ir.Operation) -> int:
    return ir.IntegerAttr(loop.attributes["step"]).value


def rebuild_for(
    old: ir.Operation,
    lower: tuple | None = None,
    upper: tuple | None = None,
    step: int | None = None,
    inits: list[ir.Value] | None = None,
) -> ir.Operation:
    """A new `affine.for` in place of `old`, with its body, its attributes and its carried
    values (and `inits` more, whose block arguments the caller wires up), and optionally
    other bounds `(map, operands)` or step. `old` is erased; its results' uses move to the
    new loop's first results."""
    old_lower, old_upper = bounds(old)
    carried = list(old.operands)[len(old_lower[1]) + len(old_upper[1]) :]
    lb, lb_ops = lower or old_lower
    ub, ub_ops = upper or old_upper
    with old.location, ir.InsertionPoint(old):
        new = affine.AffineForOp(
            lb,
            ub,
            step or step_of(old),
            [*carried, *(inits or [])],
            lower_bound_operands=lb_ops,
            upper_bound_operands=ub_ops,
        )
    for name in old.attributes:
        if name.startswith("psk_kernel."):
            new.attributes[name] = old.attributes[name]
    move_body(old, new.operation)
    for a, b in zip(old.results, new.results, strict=False):
        a.replace_all_uses_with(b)
    old.erase()
    return new.operation


def move_body(old: ir.Operation, new: ir.Operation) -> None:
    """Move the body of loop `old` into loop `new` (whose block has at least as many
    arguments), its terminator rebuilt as an `affine.yield`."""
    src = old.regions[0].blocks[0]
    dst = new.regions[0].blocks[0]
    for a, b in zip(src.arguments, dst.arguments, strict=False):
        a.replace_all_uses_with(b)
    ops = [o.operation for o in src.operations]
    terminator = ops[-1]
    with terminator.location, ir.InsertionPoint(dst):
        anchor = affine.AffineYieldOp(list(terminator.operands)).operation
    for o in ops[:-1]:
        o.move_before(anchor)
