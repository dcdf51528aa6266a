"""psk-vectorize: contiguous elementwise loops run in vector lanes of the machine's width.

An innermost parallel loop (no carried values, step 1) whose index appears only as the
last index of its loads and stores, with coefficient 1 (so consecutive iterations touch
consecutive elements; the other indices may come from data, as a gather's row does),
becomes a loop over vectors of `lanes` iterations: each load an
`affine.vector_load`, each store an `affine.vector_store`, each `arith`/`math` op the
same op on vectors, and every value the loop does not change computed before it and
broadcast. The iterations a whole vector does not cover run in the scalar loop after
it. Lanes compute what the iterations computed, op for op: no bit changes. A pattern on
`affine.for` rewrites each such loop; the loops it makes go before the one it visits,
so the walk never visits them.

`bytes` is the width of a vector register (0: this machine's; lit tests fix it); a
kernel's lanes are that width over its arithmetic type's size (f64: 8 bytes; f32 and
bf16, computed in f32: 4). A loop whose body has a chain of at least `DEEP` dependent
operations (presk's exp, erf and tanh: polynomials of degree 11, 22 and 11) but fewer than
`CHAINS` such chains side by side takes up to four times as many lanes, where its extent
is a multiple of them: each op waits on the one before it for several cycles, and one
vector (two registers of f64) an iteration left the core's arithmetic units mostly
idle; four give LLVM independent chains to interleave (the corpus GPT's gelu 15 %
faster a call; its softmax, four rows at a time already, no faster). Still op for op:
no bit changes.

A loop marked `psk_kernel.any_order` (the running maxima of softmax's and cross-entropy's
rows, presk/kernel/rows.py) carries values, each `select(x > m, x, m)` (the comparison
perhaps and-ed with a mask's), and its body is otherwise one the rule above takes. It
runs in lanes the same way, each carried value a vector whose every lane starts from the
loop's initial value and takes the maximum of its own iterations, op for op; after the
loop the lanes are combined by the same rule, halves against halves, and the scalar loop
takes the rest from there. A maximum does not depend on the order its elements are taken
in but for the sign of a zero maximum, which the mark promises nothing stored shows; a
NaN is never taken, so a NaN maximum is the initial value in every lane, and the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from mlir import ir
from mlir.dialects import affine, arith, vector

from presk.kernel.loops import (
    ANY_ORDER,
    PARALLEL,
    access,
    body_ops,
    bounds,
    constant_bounds,
    dim_coefficient,
    is_inside,
    kernel_funcs,
    rebuild_for,
    step_of,
)
from presk.kernel.machine import MACHINES
from presk.passes import Pass, apply
from presk.toolchain import vector_bytes

_LOADS = ("affine.load",)
_STORES = ("affine.store",)
DEEP = 24  # a chain of dependent operations this long leaves the core waiting on latency
CHAINS = 4  # the independent chains a deep body is given, by more lanes
_OGT = 2  # arith.cmpf's predicate "ogt"


@dataclass(frozen=True)
class PskVectorize(Pass):
    name = "psk-vectorize"
    description = "run contiguous elementwise loops in vector lanes (bytes=0: this machine's width)"
    bytes: int = 0

    def run(self, module) -> None:
        width = self.bytes or vector_bytes()
        for f in kernel_funcs(module):
            lanes = width // MACHINES[f.attributes["psk_kernel.type"].value].arith.itemsize
            if lanes >= 2:
                apply([f], {"affine.for": partial(_in_lanes, lanes)})


def _in_lanes(lanes: int, loop, rewriter) -> bool:
    if _vectorizable(loop, lanes):
        _vectorize(loop, _chained(loop, lanes))
    elif _any_order_maxima(loop, lanes):
        _vectorize(loop, lanes)
    else:
        return False
    return True


def _chained(loop, lanes: int) -> int:
    """The lanes of `loop`: where its body is `DEEP` and holds fewer than `CHAINS`
    independent chains of its own (about its ops over its depth: the softmax's four rows
    are four), `lanes` times the most of 4 and 2 that makes up for them and divides its
    constant extent; else `lanes`."""
    found = constant_bounds(loop)
    ops = body_ops(loop)[:-1]
    depth = _depth(ops)
    if found is None or depth < DEEP:
        return lanes
    wanted = CHAINS // max(1, len(ops) // depth)
    extent = found[1] - found[0]
    return next((lanes * n for n in (4, 2) if n <= wanted and extent % (lanes * n) == 0), lanes)


def _depth(ops) -> int:
    """The longest chain of dependent operations among `ops`."""
    depth: dict = {}
    for op in ops:
        d = 1 + max((depth.get(v, 0) for v in op.operands), default=0)
        for r in op.results:
            depth[r] = d
    return max(depth.values(), default=0)


def _iv_position(op, iv) -> int | None:
    """The map dimension `iv` is in an affine access, if it is an operand."""
    operands = list(access(op)[2])
    return operands.index(iv) if iv in operands else None


def _contiguous(op, iv) -> bool:
    """The access moves one element along its last axis an iteration, and no other."""
    pos = _iv_position(op, iv)
    results = list(access(op)[1].results)
    if pos is None or not results:
        return False
    coefficients = [dim_coefficient(e, pos) for e in results]
    return coefficients[-1] == 1 and all(c == 0 for c in coefficients[:-1])


def _gathers_contiguous(op, iv, varying: set) -> bool:
    """A load or store at indices found from data whose last index is the loop's index
    itself (a row gathered by a token, read or written along the row)."""
    indices = list(op.operands)[1:] if op.name == "memref.load" else list(op.operands)[2:]
    if not indices or indices[-1] != iv or any(v in varying for v in indices[:-1]):
        return False
    return op.name == "memref.load" or op.operands[0] != iv


def _vectorizable(loop, lanes: int) -> bool:
    """An elementwise loop: parallel, carrying nothing, each store moving with it."""
    if PARALLEL not in loop.attributes or loop.results or step_of(loop) != 1:
        return False
    if not _bounds_kind(loop, lanes):
        return False
    iv = loop.regions[0].blocks[0].arguments[0]
    varying = {iv}
    if not _lanes_take(loop, varying):
        return False
    stores = [o for o in body_ops(loop)[:-1] if o.name in _STORES + ("memref.store",)]
    return bool(stores) and all(any(v in varying for v in o.operands) for o in stores)


def _any_order_maxima(loop, lanes: int) -> bool:
    """A loop marked `ANY_ORDER` that stores nothing, whose carried values are each
    updated by the maximum's rule (`_max_update`) and whose body lanes take."""
    if ANY_ORDER not in loop.attributes or not loop.results or step_of(loop) != 1:
        return False
    if not _bounds_kind(loop, lanes):
        return False
    iv, *carried = loop.regions[0].blocks[0].arguments
    ops = body_ops(loop)
    if any(o.name in _STORES + ("memref.store",) for o in ops):
        return False
    new = list(ops[-1].operands)
    updates = zip(carried, new, strict=True)
    if not all(_max_update(m, n, set(carried), loop) for m, n in updates):
        return False
    return _lanes_take(loop, {iv, *carried})


def _max_update(m, new, carried: set, loop) -> bool:
    """Whether `new` is `select(x > m, x, m)`, the comparison perhaps and-ed with a
    condition of its own, x and that condition read from no carried value, and m read by
    nothing else."""
    if not _made_by(new, "arith.select") or list(new.owner.operands)[2] != m:
        return False
    select = new.owner
    condition, x = list(select.operands)[:2]
    parts = [condition]
    if _made_by(condition, "arith.andi"):
        parts = list(condition.owner.operands)
    compared = [c for c in parts if _greater(c, x, m)]
    if len(compared) != 1:
        return False
    others = [c for c in parts if c is not compared[0]] + [x]
    readers = {u.owner for u in m.uses}
    return readers == {select, compared[0].owner} and not _reads_any(others, carried, loop)


def _made_by(v, name: str) -> bool:
    return not isinstance(v.owner, ir.Block) and v.owner.name == name


def _greater(c, x, m) -> bool:
    """Whether `c` is `arith.cmpf ogt, x, m`."""
    return (
        _made_by(c, "arith.cmpf")
        and list(c.owner.operands) == [x, m]
        and ir.IntegerAttr(c.owner.attributes["predicate"]).value == _OGT
    )


def _reads_any(values, carried: set, loop) -> bool:
    """Whether any of `values` is computed, in `loop`'s body, from a carried value."""
    seen = set()
    todo = list(values)
    while todo:
        v = todo.pop()
        if v in carried:
            return True
        if v in seen or not is_inside(v, loop) or isinstance(v.owner, ir.Block):
            continue
        seen.add(v)
        todo.extend(v.owner.operands)
    return False


def _lanes_take(loop, varying: set) -> bool:
    """Whether every op of `loop`'s body that reads a value of `varying` (its index, its
    carried values; the set grows by what they compute) has lanes: contiguous loads and
    stores (gathered rows included), `arith` and `math` ops, no loop, no index computed
    from the loop's."""
    iv = loop.regions[0].blocks[0].arguments[0]
    body = body_ops(loop)[:-1]
    stored = {o.operands[1] for o in body if o.name in _STORES + ("memref.store",)}
    for op in body:
        if op.regions:
            return False
        moves = any(v in varying for v in op.operands)
        if not moves:
            if op.name in _LOADS + ("memref.load",) and op.operands[0] in stored:
                return False  # an element the loop writes: it may not move before the loop
            continue
        if op.name in _LOADS + _STORES:
            if not _contiguous(op, iv) or (op.name in _STORES and op.operands[0] == iv):
                return False
        elif op.name in ("memref.load", "memref.store"):
            if not _gathers_contiguous(op, iv, varying):
                return False
        elif not op.name.startswith(("arith.", "math.")) or iv in list(op.operands):
            return False  # an index computed from the loop index, a gather by it
        varying.update(op.results)
    return True


def _bounds_kind(loop, lanes: int) -> str | None:
    """ "constant" (at least `lanes` iterations), "symbolic" (lo to hi), or None."""
    found = constant_bounds(loop)
    if found is not None:
        return "constant" if found[1] - found[0] >= lanes else None
    (lb, lb_ops), (ub, ub_ops) = bounds(loop)
    identity = ir.AffineMap.get(0, 1, [ir.AffineSymbolExpr.get(0)])
    if lb == identity and ub == identity:
        return "symbolic"
    return None


def _split_point(loop, lanes: int) -> tuple[ir.AffineMap, list]:
    """(map, operands) of where the whole vectors end."""
    found = constant_bounds(loop)
    if found is not None:
        lo, hi = found
        return ir.AffineMap.get_constant(lo + (hi - lo) // lanes * lanes), []
    (_, lb_ops), (_, ub_ops) = bounds(loop)
    s0, s1 = ir.AffineSymbolExpr.get(0), ir.AffineSymbolExpr.get(1)
    n = ir.AffineConstantExpr.get(lanes)
    end = s0 + ir.AffineFloorDivExpr.get(s1 - s0, n) * n
    return ir.AffineMap.get(0, 2, [end]), [lb_ops[0], ub_ops[0]]


def _vectorize(loop, lanes: int) -> None:
    """`loop` in lanes: its whole vectors in a new loop before it, the rest left to it
    (erased where there is none). Its carried values, if any, are maxima: a vector each,
    every lane from the initial value, combined after the new loop into the rest's."""
    block = loop.regions[0].blocks[0]
    iv, *carried = block.arguments
    end = _split_point(loop, lanes)
    (lb, lb_ops), (_, ub_ops) = bounds(loop)
    inits = list(loop.operands)[len(lb_ops) + len(ub_ops) :]
    mark = ANY_ORDER if carried else PARALLEL
    with loop.location, ir.InsertionPoint(loop):
        starts = [vector.broadcast(ir.VectorType.get([lanes], v.type), v) for v in inits]
        main = _new_loop(lb, lb_ops, *end, lanes, starts, mark)
    new_iv, *new_carried = main.regions[0].blocks[0].arguments
    # scalar value -> its vector (or, for the index, the new index)
    values = {iv: new_iv, **dict(zip(carried, new_carried, strict=True))}
    broadcasts: dict = {}

    def vector_of(v):
        if v in values:
            return values[v]
        if v not in broadcasts:  # the same in every lane: broadcast before the loop
            with loop.location, ir.InsertionPoint(main):
                broadcasts[v] = vector.broadcast(ir.VectorType.get([lanes], v.type), v)
        return broadcasts[v]

    main_body = main.regions[0].blocks[0]
    *ops, terminator = body_ops(loop)
    for op in ops:
        if not any(v in values for v in op.operands):
            op.move_before(main)  # computed once, before both loops
            continue
        attrs = {name: op.attributes[name] for name in op.attributes}
        with op.location, ir.InsertionPoint(main_body):
            if op.name in _LOADS:
                buf, _, operands = access(op)
                t = ir.VectorType.get([lanes], op.result.type)
                idx = [values.get(v, v) for v in operands]
                new = ir.Operation.create(
                    "affine.vector_load", results=[t], operands=[buf, *idx], attributes=attrs
                )
            elif op.name in _STORES:
                buf, _, operands = access(op)
                idx = [values.get(v, v) for v in operands]
                ir.Operation.create(
                    "affine.vector_store",
                    operands=[vector_of(op.operands[0]), buf, *idx],
                    attributes=attrs,
                )
                continue
            elif op.name == "memref.load":
                t = ir.VectorType.get([lanes], op.result.type)
                buf, *idx = op.operands
                new = vector.load(t, buf, [values.get(v, v) for v in idx]).owner
            elif op.name == "memref.store":
                value, buf, *idx = op.operands
                vector.store(vector_of(value), buf, [values.get(v, v) for v in idx])
                continue
            else:
                types = [ir.VectorType.get([lanes], r.type) for r in op.results]
                new = ir.Operation.create(
                    op.name,
                    results=types,
                    operands=[vector_of(v) for v in op.operands],
                    attributes=attrs,
                )
        for r, nr in zip(op.results, new.results, strict=True):
            values[r] = nr
    with terminator.location, ir.InsertionPoint(main_body):
        affine.AffineYieldOp([values[v] for v in terminator.operands])
    with loop.location, ir.InsertionPoint(loop):
        maxima = [_lanes_combined(v, lanes) for v in main.results]
    found = constant_bounds(loop)
    if found is not None and (found[1] - found[0]) % lanes == 0:
        for r, m in zip(loop.results, maxima, strict=True):
            r.replace_all_uses_with(m)
        loop.erase()  # the vectors cover every iteration
    else:
        for k, m in enumerate(maxima):  # the rest goes on from the lanes' maxima
            loop.operands[len(lb_ops) + len(ub_ops) + k] = m
        rebuild_for(loop, lower=end)


def _lanes_combined(v, lanes: int):
    """The maximum of a vector's lanes by the loop's rule, `select(x > m, x, m)`: its upper
    half against its lower while the count is even, then the lanes left one by one."""
    while lanes % 2 == 0:
        lanes //= 2
        half = ir.VectorType.get([lanes], v.type.element_type)
        low, high = (vector.extract_strided_slice(half, v, [at], [lanes], [1]) for at in (0, lanes))
        v = arith.select(_ogt(high, low), high, low)
    m = vector.extract(v, [], [0])
    for lane in range(1, lanes):
        x = vector.extract(v, [], [lane])
        m = arith.select(_ogt(x, m), x, m)
    return m


def _ogt(a, b):
    return arith.cmpf(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _OGT), a, b)


def _new_loop(lb, lb_ops, ub, ub_ops, lanes: int, inits: list, mark: str):
    """An empty loop (its body to fill, its yield included) stepping by `lanes`."""
    loop = affine.AffineForOp(
        lb, ub, lanes, inits, lower_bound_operands=lb_ops, upper_bound_operands=ub_ops
    )
    loop.attributes[mark] = ir.UnitAttr.get()
    return loop.operation


PASS = PskVectorize
