"""Reverse-mode derivatives of PSK-Core functions, as PSK-Core functions.

For every function F a `psk.grad` or `psk.vjp` reaches (callees and fold layers
included), `Derivatives` writes two functions:

- `F.fwd(args) -> (y, res)`: F's forward ops replayed, its sites kept (so a realization
  sees the forward's ops wherever they run), and the residuals the backward reads: with
  `remat=store` every forward value but those inside a fusion group (presk/core/fusion.py)
  and its callees' residuals, with `remat=recompute` only the arguments. So `F.fwd` fuses
  as F does, and gives F's bits in bf16 too;
- `F.bwd(res, ct) -> (ct of each argument)`: with `recompute`, the forward replayed from
  the arguments first; then each op's adjoint (its primitive's `vjp` rule, presk/prims)
  from the last op to the first, cotangents of values used twice added. A value inside a
  group that an adjoint reads is recomputed from the group's inputs. A call's cotangents
  come from its callee's `bwd`, a fold's from `psk.fold_bwd` (the layers in reverse, their
  cotangents stacked).

Both modes run the same operations on the same values, so they give the same bits. Calls
keep their `psk.callsite`, so a dropout replayed in `bwd` draws the forward's mask, and its
adjoint is a dropout of the cotangent under the forward op's key. The op of `F.bwd` that
yields a forward site's complete cotangent is marked `psk.cotangent_of` (presk dump
--stage sensitivity reads it). `expand` is the whole transformation; presk/passes/psk_vjp.py
runs it as a pass, and train.step (presk/train/step.py) builds on `Derivatives`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.core.build import FuncBuilder, V
from presk.core.fusion import interior_sites
from presk.core.program import Function, HostProgram, Op, read_host_program
from presk.errors import PassError, Span
from presk.ir.ops import module_functions, walk_ops
from presk.ir.types import PskType, RecordType, TensorType, TupleType


def has_reals(t: PskType) -> bool:
    if isinstance(t, TensorType):
        return t.kind == "real"
    items = t.items if isinstance(t, TupleType) else [f for _, f in t.fields]
    return any(has_reals(i) for i in items)


def _location(ctx: ir.Context, span: Span | None) -> ir.Location:
    """The MLIR location of an op's source position (unknown if it has none)."""
    if span is None:
        return ir.Location.unknown(ctx)
    return ir.Location.file(span.file, span.line, span.col, context=ctx)


@dataclass
class Pair:
    fwd: str
    bwd: str
    res: PskType  # the residuals' type
    result: PskType  # F's result


class Emitter:
    """What an adjoint rule builds with: ops in the backward function, located at the
    forward op they differentiate."""

    def __init__(self, b: FuncBuilder, op: Op):
        self.b = b
        self.op = op
        self.attrs = op.attrs
        self.loc = _location(b.ctx, op.loc)

    def prim(self, name: str, operands: list[V], attrs=None, extra=None) -> V:
        return self.b.prim(name, operands, attrs, site=True, extra=extra, loc=self.loc)

    def const(self, text: str) -> V:
        return self.b.const(text, self.loc)

    def unbroadcast(self, ct: V, like: V) -> V:
        """ct summed back to the shape of an operand the forward broadcast."""
        return ct if ct.type == like.type else self.prim("sum_to", [ct, like])

    def conform(self, v: V, like: V) -> V:
        """v under like's axis names (the same shape)."""
        if v.type == like.type:
            return v
        names = [a.name or "" for a in like.type.axes]
        return self.prim("rename", [v], {"names": names})

    def key_of_forward(self) -> dict:
        with self.b.ctx:
            return {"psk.key": ir.StringAttr.get(self.op.key or self.op.site)}


class Derivatives:
    def __init__(self, module, program: HostProgram, remat: str):
        self.module = module
        self.program = program
        self.remat = remat
        self.pairs: dict[str, Pair] = {}
        self.entries: dict[tuple[str, str], str] = {}
        self.funcs: dict | None = None  # the module's func.func ops by name, once read

    # ---- the forward replay ----
    def replay(self, b: FuncBuilder, fn: Function, args: list[V], keep: bool):
        """F's ops replayed in `b`; with `keep`, each call's and fold's residuals too."""
        slots: list = list(args) + [None] * (fn.slots - len(args))
        nested: dict[int, V] = {}
        for i, op in enumerate(fn.ops):
            ins = [slots[j] for j in op.ins]
            loc = _location(b.ctx, op.loc)
            if op.prim is not None:
                extra = {}
                if op.key:
                    with b.ctx:
                        extra["psk.key"] = ir.StringAttr.get(op.key)
                slots[op.out] = b.prim(
                    op.prim.name, ins, op.attrs, site=op.site or True, extra=extra, loc=loc
                )
            elif op.name == "func.call":
                if keep and self.remat == "store":
                    g = self.pair(op.callee)
                    r = b.call(g.fwd, ins, TupleType((g.result, g.res)), op.callsite, loc=loc)
                    slots[op.out], nested[i] = b.get(r, 0, loc), b.get(r, 1, loc)
                else:
                    slots[op.out] = b.call(op.callee, ins, op.type, op.callsite, loc=loc)
                    if keep:
                        nested[i] = b.tuple(ins, loc)
            elif op.name == "psk.fold":
                if keep:
                    g = self.pair(op.callee)
                    layers = TupleType((g.res,) * _layers(ins[0].type))
                    r = b.call(
                        g.fwd, ins, TupleType((op.type, layers)), op.callsite, "psk.fold_fwd", loc
                    )
                    slots[op.out], nested[i] = b.get(r, 0, loc), b.get(r, 1, loc)
                else:
                    slots[op.out] = b.call(op.callee, ins, op.type, op.callsite, "psk.fold", loc)
            elif op.name in ("psk.grad", "psk.vjp"):
                raise PassError(
                    f"{op.name} inside a function being differentiated: no second derivatives"
                )
            else:
                slots[op.out] = self.structural(b, op, ins, loc)
        return slots, nested

    def interior(self, fn: Function) -> set[int]:
        """F's slots whose values stay inside a fusion group (psk-fuse's groups of F).
        Neither `fwd` keeps them nor `bwd` reads the forward's: keeping one would give it a
        second reader and cut its group, and in bf16 a cut group rounds where F does not."""
        if self.funcs is None:
            self.funcs = {
                ir.StringAttr(f.attributes["sym_name"]).value: f
                for f in module_functions(self.module.operation)
            }
        sites = interior_sites(self.funcs[fn.name])
        return {op.out for op in fn.ops if op.site in sites}

    @staticmethod
    def structural(b: FuncBuilder, op: Op, ins: list[V], loc) -> V:
        if op.name == "psk.field":
            return b.field(ins[0], op.attrs["name"], loc)
        if op.name == "psk.get":
            return b.get(ins[0], op.attrs["index"], loc)
        if op.name in ("psk.record_empty", "psk.tuple_empty"):
            return b.op(op.name, [], op.type, loc=loc)
        if op.name == "psk.set_field":
            with b.ctx:
                return b.op(
                    op.name, ins, op.type, {"name": ir.StringAttr.get(op.attrs["name"])}, loc=loc
                )
        if op.name == "psk.tuple_append":
            return b.op(op.name, ins, op.type, loc=loc)
        raise PassError(f"psk-vjp cannot differentiate through {op.name}")

    # ---- a function's forward and backward ----
    def pair(self, name: str) -> Pair:
        if name in self.pairs:
            return self.pairs[name]
        fn = self.program.functions[name]
        inputs = list(zip(fn.arg_names, fn.arg_types, strict=True))
        fb = FuncBuilder(self.module, f"{name}.fwd", inputs, fn.site_prefix)
        store = self.remat == "store"
        slots, nested = self.replay(fb, fn, fb.args, keep=store)
        interior = self.interior(fn)
        kept = [j for j in range(len(slots)) if j not in interior]
        if store:
            saved = [slots[j] for j in kept] + [nested[i] for i in sorted(nested)]
        else:
            saved = list(fb.args)
        res = fb.tuple(saved)
        fb.ret(fb.tuple([slots[fn.result], res]))
        pair = Pair(f"{name}.fwd", f"{name}.bwd", res.type, fn.result_type)
        self.pairs[name] = pair
        self.backward(fn, pair, kept, sorted(nested), interior)
        return pair

    def backward(
        self, fn: Function, pair: Pair, kept: list[int], nested_order: list[int], interior: set
    ) -> None:
        b = FuncBuilder(
            self.module,
            pair.bwd,
            [("res", pair.res), ("ct", fn.result_type)],
            f"{fn.site_prefix}.bwd",
        )
        res, ct0 = b.args
        n_args = len(fn.arg_types)
        if self.remat == "store":
            position = {j: k for k, j in enumerate(kept)}

            def saved(j: int) -> V:
                return b.get(res, position[j])

            def nested(i: int) -> V:
                return b.get(res, len(kept) + nested_order.index(i))

        else:
            args = [b.get(res, j) for j in range(n_args)]
            slots, replayed = self.replay(b, fn, args, keep=True)

            def saved(j: int) -> V:
                return slots[j]

            def nested(i: int) -> V:
                return replayed[i]

        producer = {op.out: op for op in fn.ops}
        cache: dict[int, V] = {}

        def fwd(j: int) -> V:
            """A forward value: kept (or replayed), or, inside a group, recomputed from the
            group's inputs apart from the group, which it would otherwise cut (with a site
            of the backward's: a replay in `bwd` has the forward's)."""
            if j not in cache:
                if j in interior:
                    op = producer[j]
                    ins = [fwd(k) for k in op.ins]
                    cache[j] = Emitter(b, op).prim(op.prim.name, ins, op.attrs)
                else:
                    cache[j] = saved(j)
            return cache[j]

        need = _need(fn)
        acc = Accumulator(b, fwd)
        acc.add(fn.result, ct0)
        for i in reversed(range(len(fn.ops))):
            op = fn.ops[i]
            if not need[op.out] or op.out not in acc.ct:
                continue
            ct = acc.full(op.out, op.type)
            if op.site:
                mark_cotangent(b, ct, op.site)
            want = [need[j] for j in op.ins]
            loc = _location(b.ctx, op.loc)
            if op.prim is not None:
                ins = [fwd(j) for j in op.ins]
                cts = op.prim.vjp(Emitter(b, op), ins, fwd(op.out), ct, want)
                for j, c in zip(op.ins, cts, strict=True):
                    if c is not None and need[j]:
                        acc.add(j, c)
            elif op.name == "func.call":
                g = self.pair(op.callee)
                arg_types = TupleType(tuple(fwd(j).type for j in op.ins))
                d = b.call(g.bwd, [nested(i), ct], arg_types, op.callsite, loc=loc)
                for k, j in enumerate(op.ins):
                    if need[j]:
                        acc.add(j, b.get(d, k, loc))
            elif op.name == "psk.fold":
                g = self.pair(op.callee)
                stack, carry = (fwd(j) for j in op.ins)
                d = b.call(
                    g.bwd,
                    [nested(i), ct],
                    TupleType((stack.type, carry.type)),
                    op.callsite,
                    "psk.fold_bwd",
                    loc,
                )
                for k, j in enumerate(op.ins):
                    if need[j]:
                        acc.add(j, b.get(d, k, loc))
            else:
                acc.through(op, ct)
        b.ret(b.tuple([acc.full(j, fn.arg_types[j]) for j in range(n_args)]))

    # ---- what replaces psk.grad and psk.vjp ----
    def entry(self, kind: str, callee: str, callsite: str) -> str:
        """`F.grad(packed args) -> d params` or `F.vjp(packed args, ct) -> (d args…)`."""
        key = (kind, callee)
        if key in self.entries:
            return self.entries[key]
        fn = self.program.functions[callee]
        pair = self.pair(callee)
        packed = TupleType(fn.arg_types)
        inputs = [("args", packed)] + ([("ct", fn.result_type)] if kind == "vjp" else [])
        symbol = f"{callee}.{kind}"
        b = FuncBuilder(self.module, symbol, inputs, f"{fn.site_prefix}.{kind}")
        args = [b.get(b.args[0], i) for i in range(len(fn.arg_types))]
        key_site = f"{fn.site_prefix}.{kind}/%c0"
        r = b.call(pair.fwd, args, TupleType((pair.result, pair.res)), key_site)
        ct = b.args[1] if kind == "vjp" else b.const("1")
        d = b.call(pair.bwd, [b.get(r, 1), ct], TupleType(fn.arg_types), key_site)
        b.ret(d if kind == "vjp" else b.get(d, 0))
        self.entries[key] = symbol
        return symbol


COTANGENT_OF = "psk.cotangent_of"


def mark_cotangent(b: FuncBuilder, ct: V, site: str) -> None:
    """Mark what yields `ct` in `F.bwd`, the complete cotangent of the forward value at
    `site`: the op, or `F.bwd`'s argument `ct`, gets `site` in its list `psk.cotangent_of`
    (one value can be the cotangent of several sites). Nothing reads it but a run that
    records cotangents (presk dump --stage sensitivity): no bit of any run changes."""
    with b.ctx:
        if isinstance(ct.value, ir.BlockArgument):
            index = ct.value.arg_number
            args = list(ir.ArrayAttr(b.func.attributes["arg_attrs"]))
            attrs = {a.name: a.attr for a in ir.DictAttr(args[index])}
            attrs[COTANGENT_OF] = _with_site(attrs.get(COTANGENT_OF), site)
            args[index] = ir.DictAttr.get(attrs)
            b.func.attributes["arg_attrs"] = ir.ArrayAttr.get(args)
        else:
            attrs = ct.value.owner.attributes
            old = attrs[COTANGENT_OF] if COTANGENT_OF in attrs else None
            attrs[COTANGENT_OF] = _with_site(old, site)


def _with_site(sites: ir.Attribute | None, site: str) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([*(ir.ArrayAttr(sites) if sites else []), ir.StringAttr.get(site)])


def _layers(stack: PskType) -> int:
    while not isinstance(stack, TensorType):
        stack = stack.fields[0][1]
    return stack.axes[0].size


def _need(fn: Function) -> list[bool]:
    """Which slots hold values that depend on a real argument (and hold reals)."""
    need = [has_reals(t) for t in fn.arg_types] + [False] * (fn.slots - len(fn.arg_types))
    for op in fn.ops:
        need[op.out] = has_reals(op.type) and any(need[j] for j in op.ins)
    return need


class Accumulator:
    """Cotangents by slot, sparse for records and tuples until they are needed whole."""

    def __init__(self, b: FuncBuilder, fwd):
        self.b = b
        self.fwd = fwd
        self.ct: dict[int, object] = {}

    def add(self, slot: int, c) -> None:
        if slot not in self.ct:
            self.ct[slot] = c
            return
        # tensors' cotangents just add: their forward value (perhaps a recomputation) unread
        like = None if isinstance(c, V) and isinstance(c.type, TensorType) else self.fwd(slot)
        self.ct[slot] = self.combine(self.ct[slot], c, like)

    def combine(self, a, c, like: V):
        if isinstance(a, V) and isinstance(c, V) and isinstance(a.type, TensorType):
            return self.b.prim("add", [a, c])
        a, c = self.sparse(a, like), self.sparse(c, like)
        keys = set(a) | set(c)
        out = {}
        for k in keys:
            if k in a and k in c:
                out[k] = self.combine(a[k], c[k], self.part(like, k))
            else:
                out[k] = a.get(k, c.get(k))
        return out

    def sparse(self, c, like: V) -> dict:
        if isinstance(c, dict):
            return c
        names = (
            like.type.names if isinstance(like.type, RecordType) else range(len(like.type.items))
        )
        return {k: self.part(c, k) for k in names}

    def part(self, v: V, k) -> V:
        return self.b.field(v, k) if isinstance(k, str) else self.b.get(v, k)

    def full(self, slot: int, t: PskType) -> V:
        return self.materialize(self.ct.get(slot), t, self.fwd(slot))

    def materialize(self, c, t: PskType, like: V) -> V:
        if isinstance(c, V):
            return c
        if isinstance(t, TensorType):
            if t.kind != "real":
                return like  # an index or mask has no cotangent: the value stands in
            return self.b.prim("broadcast_like", [self.b.const("0"), like])
        c = c or {}
        if isinstance(t, RecordType):
            parts = [self.materialize(c.get(n), f, self.b.field(like, n)) for n, f in t.fields]
            return self.b.record(list(t.names), parts)
        parts = [self.materialize(c.get(i), f, self.b.get(like, i)) for i, f in enumerate(t.items)]
        return self.b.tuple(parts)

    def through(self, op: Op, ct) -> None:
        """A structural op's adjoint: cotangents routed to the parts they came from."""
        name, ins = op.name, op.ins
        if name == "psk.field":
            self.add(ins[0], {op.attrs["name"]: ct})
        elif name == "psk.get":
            self.add(ins[0], {op.attrs["index"]: ct})
        elif name == "psk.set_field":
            whole = self.sparse(ct, self.fwd(op.out))
            field = op.attrs["name"]
            if field in whole:
                self.add(ins[1], whole.pop(field))
            if whole:
                self.add(ins[0], whole)
        elif name == "psk.tuple_append":
            whole = self.sparse(ct, self.fwd(op.out))
            last = len(op.type.items) - 1
            if last in whole:
                self.add(ins[1], whole.pop(last))
            if whole:
                self.add(ins[0], whole)


def expand(module, remat: str = "store") -> None:
    """Replace every `psk.grad` and `psk.vjp` of `module` by a call of `F.grad`/`F.vjp`,
    writing `F.fwd` and `F.bwd` for each function they reach (PassError for a program it
    cannot differentiate: a second derivative)."""
    targets = [op for op in walk_ops(module, "psk.") if op.name in ("psk.grad", "psk.vjp")]
    if not targets:
        return
    derivs = Derivatives(module, read_host_program(module), remat)
    for op in targets:
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        kind = op.name.split(".")[1]
        try:
            symbol = derivs.entry(kind, callee, "")
        except PassError as e:
            e.op = e.op or op
            raise
        with ir.InsertionPoint(op), op.location:
            call = ir.Operation.create(
                "func.call",
                results=[r.type for r in op.results],
                operands=list(op.operands),
                attributes={
                    "callee": ir.FlatSymbolRefAttr.get(symbol),
                    "psk.callsite": op.attributes["psk.callsite"],
                },
            )
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()
