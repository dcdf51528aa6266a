"""An ONNX graph's nodes as PSK lines: each value the graph computes from its inputs
becomes a `let`, in the language as it is.

ONNX tensors are positional and broadcast numpy's way; PSK tensors name their axes and
broadcast by name. A `Live` value carries both views: its PSK expression and type, and
for each ONNX axis the PSK axes it is made of (`Atom`s, major first: a reshape that
merges axes only regroups them) or the size it repeats (`Atom` with no axis: an
`Expand`, or a size-1 axis broadcast). So transposes, unsqueezes, expands and most
reshapes print nothing, and an op whose operands' axes do not line up in PSK gets them
renamed, split (`split_heads`), merged (`merge_heads`) or moved (`ein[…](x, 1)`) first.

Constants (what depends on no input and no real initializer) are folded beforehand
(`fold.py`); those an op reads are printed as PSK values when they have a form the
language can write: a number, a causal mask, a range 0, 1, …, n − 1, or a mask choosing
between two numbers. Slices, splits, concatenations and constant gathers are
contractions with one-hot vectors built from masks: every product is by 1 or 0, so they
are exact in every machine type.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import helper

from presk.importer.fold import FoldError, fold
from presk.importer.graph import Graph, identifier
from presk.ir.types import Axis, TensorType, alignment
from presk.prims import all_prims, by_name
from presk.prims.base import AxisSpec, Number, Rename, TypingError

# How tightly an expression binds, for parentheses: a name, literal or call; a negation;
# a product; a sum.
ATOM, PREFIX, PRODUCT, SUM = 4, 3, 2, 1

KEYWORDS = {"dim", "module", "param", "sub", "stack", "fn", "let", "precision", "R", "nat",
            "bool", "grad", "fold", "pi", "params", "adamw"}  # fmt: skip


class Unsupported(Exception):
    """A node presk cannot express; `code` says whether its op is unknown (E4002) or
    this use of a known op (E4006)."""

    def __init__(self, message: str, code: str = "E4006"):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Atom:
    """A factor of an ONNX axis: the PSK axis `id` of the value, or, with no id, a size
    the value repeats along."""

    id: int | None
    size: int


@dataclass(frozen=True)
class Live:
    """A value computed from the inputs: its PSK expression, its PSK type with an id per
    axis, and each ONNX axis as atoms of those ids."""

    expr: str
    level: int
    type: TensorType
    ids: tuple[int, ...]
    groups: tuple[tuple[Atom, ...], ...]
    # scores whose refused positions the graph pushes to −∞ (a bias of float's lowest),
    # which a softmax reads as its mask
    mask: Live | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(math.prod(a.size for a in g) for g in self.groups)

    def pos(self, i: int) -> int:
        return self.ids.index(i)

    def axis(self, i: int) -> Axis:
        return self.type.axes[self.pos(i)]


@dataclass(frozen=True)
class Param:
    name: str  # the PSK parameter
    onnx_name: str
    array: np.ndarray


Value = Live | np.ndarray


def infer(name: str, statics: list, types: list[TensorType]) -> TensorType:
    """A primitive's result type, by its own typing rule (`nat` read as ℝ where a real
    is expected, as the front end reads it)."""
    p = by_name(name)
    types = [
        t.with_kind("real") if t.kind == "index" and p.operand_kind(i) == "real" else t
        for i, t in enumerate(types)
    ]
    return p.type_of(statics, types)[1]


def wrap(x: Live, level: int) -> str:
    return x.expr if x.level >= level else f"({x.expr})"


def literal(value, dtype: np.dtype) -> tuple[str, int]:
    """A number as PSK writes it: a whole number as such, a float as the shortest decimal
    that rounds to it in its own type (`1e-05`, not f32's 9.99999974737875e-06)."""
    if dtype.kind in "iub":
        v = int(value)
    else:
        f = float(value)
        if not math.isfinite(f):
            raise Unsupported(f"the constant {f} has no PSK literal")
        v = f
    if isinstance(v, int):
        return (str(v), ATOM) if v >= 0 else (f"-{-v}", PREFIX)
    text = str(dtype.type(v))
    if "e" in text:
        mantissa, exp = text.split("e")
        text = f"{mantissa}e{int(exp)}"
    if text.startswith("-"):
        return text, PREFIX
    return text, ATOM


class Names:
    """Fresh PSK names: distinct, not a keyword or primitive, not a dim or parameter."""

    def __init__(self):
        self.taken = set(KEYWORDS) | {p.name for p in all_prims()}

    def fresh(self, hint: str) -> str:
        base = identifier(hint)
        if base in KEYWORDS or by_name(base) is not None:  # `softmax_`, not a second softmax
            base += "_"
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


class Translator:
    """The nodes of `graph` as the body of one PSK function, at the sizes bound."""

    def __init__(self, graph: Graph, dim_names: dict[str, str], names: Names):
        self.graph = graph
        self.dim_names = dim_names  # a dim_param -> its PSK dim
        self.names = names
        self.lines: list[str] = []
        self.values: dict[str, Value] = {}
        self.params: dict[str, Param] = {}  # by ONNX name, in first use's order
        self.helpers: dict[tuple, Live] = {}
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.nodes:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self._next_id = 0

    # ---- values ------------------------------------------------------------------------

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def input_value(self, name: str, kind: str, dims: tuple[int | str, ...], psk: str) -> Live:
        axes = tuple(
            Axis(self.dim_names[d], self.graph.sizes[d]) if isinstance(d, str) else Axis(None, d)
            for d in dims
        )
        live = self.fresh_live(psk, TensorType(kind, axes))
        self.values[name] = live
        return live

    def fresh_live(self, expr: str, t: TensorType, level: int = ATOM) -> Live:
        ids = tuple(self.new_id() for _ in t.axes)
        return Live(
            expr, level, t, ids, tuple((Atom(i, a.size),) for i, a in zip(ids, t.axes, strict=True))
        )

    def get(self, name: str) -> Value:
        if name in self.values:
            return self.values[name]
        if name in self.graph.initializers:
            array = self.graph.initializers[name]
            if array.dtype.kind == "f" and array.ndim > 0:
                return self.param(name, array)
            return array
        raise Unsupported(f"reads {name!r}, which no node makes", "E4001")

    def param(self, onnx_name: str, array: np.ndarray) -> Live:
        if onnx_name not in self.params:
            self.params[onnx_name] = Param(self.names.fresh(onnx_name), onnx_name, array)
        p = self.params[onnx_name]
        return self.fresh_live(
            p.name, TensorType("real", tuple(Axis(None, n) for n in array.shape))
        )

    def bind(self, x: Live, hint: str, comment: str) -> Live:
        """`let NAME = x` for an ONNX value; a name or a number is kept as it is."""
        if x.level == ATOM and (x.expr.isidentifier() or x.expr.replace(".", "").isdigit()):
            return x
        name = self.names.fresh(hint)
        line = f"let {name} = {x.expr}"
        self.lines.append(f"{line:<60}  # {comment}" if len(line) < 60 else f"{line}  # {comment}")
        return replace(x, expr=name, level=ATOM)

    def helper(self, key: tuple, hint: str, make: Callable[[], Live], comment: str) -> Live:
        """A value of constants alone (a range, a one-hot vector), let once and reused."""
        if key not in self.helpers:
            self.helpers[key] = self.bind(make(), hint, comment)
        return self.helpers[key]

    # ---- PSK expressions -----------------------------------------------------------------

    def apply(self, prim: str, xs: list[Live], statics: list, text: str) -> TensorType:
        """The type of `text`, applying `prim` to xs: a form PSK refuses is E4006."""
        try:
            return infer(prim, statics, [x.type for x in xs])
        except TypingError as e:
            raise Unsupported(f"its PSK form `{text}` does not type: {e}") from None

    def axis_ref(self, x: Live, i: int) -> str:
        """An axis in brackets: its name, else its position (the last as -1)."""
        return str(self.axis_static(x, i))

    def axis_static(self, x: Live, i: int) -> str | int:
        """The axis as a typing rule takes it: its name, else its position."""
        a, p = x.axis(i), x.pos(i)
        return a.name if a.name else (p - x.type.rank if p == x.type.rank - 1 else p)

    def renamed(self, x: Live, want: dict[int, str | None]) -> Live:
        """x with its axes (by id) named as `want` says; the others as they are."""
        changes = [(x.pos(i), n) for i, n in want.items() if x.axis(i).name != n]
        if not changes:
            return x
        statics = [Rename(p, n) for p, n in changes]
        spec = ", ".join(f"{x.type.axes[p].name or p} → {n or '_'}" for p, n in changes)
        expr = f"rename[{spec}]({x.expr})"
        t = self.apply("rename", [x], statics, expr)
        return replace(x, expr=expr, level=ATOM, type=t)

    def axis_name(self, size: int, avoid: set[str]) -> str:
        name, n = f"d{size}", 1
        while name in avoid:
            n += 1
            name = f"d{size}_{n}"
        avoid.add(name)
        return name

    def name_roles(
        self, xs: list[Live], roles: list[list[tuple[int, int]]], sizes: list[int], prefer: int = 0
    ) -> list[str]:
        """A distinct axis name for each role (a list of (operand, axis id) it identifies):
        a name one of its axes has (operand `prefer`'s first) when no other role took it,
        else a fresh one."""
        names: list[str | None] = [None] * len(roles)
        used: set[str] = set()
        for r, role in enumerate(roles):
            for k, i in sorted(role, key=lambda ki: ki[0] != prefer):
                n = xs[k].axis(i).name
                if n and n not in used:
                    names[r] = n
                    used.add(n)
                    break
        return [n or self.axis_name(sizes[r], used) for r, n in enumerate(names)]

    def ein(
        self, xs: list[Live], roles: list[list[tuple[int, int]]], out: list[int]
    ) -> tuple[Live, list[int]]:
        """`ein[…](a, b)` with each role's axes under one name; `out` lists the roles kept,
        in order. Returns the value and each kept role's new id."""
        sizes = [xs[role[0][0]].axis(role[0][1]).size for role in roles]
        names = self.name_roles(xs, roles, sizes)
        operands = []
        for k, x in enumerate(xs):
            want = {i: names[r] for r, role in enumerate(roles) for kk, i in role if kk == k}
            operands.append(self.renamed(x, want))
        order = [names[r] for r in out]
        expr = f"ein[{', '.join(order)}]({operands[0].expr}, {operands[1].expr})"
        t = self.apply("ein", operands, list(order), expr)
        ids = [self.new_id() for _ in out]
        return Live(expr, ATOM, t, tuple(ids), ()), ids

    def one(self) -> Live:
        return Live("1", ATOM, TensorType("real", ()), (), ())

    def moved(self, x: Live, order: list[int]) -> Live:
        """x with its axes in the order of the ids `order`, `ein[…](x, 1)`: the same axes,
        so the same ids."""
        if list(x.ids) == order:
            return x
        roles = [[(0, i)] for i in x.ids]
        y, _ = self.ein([x, self.one()], roles, [x.ids.index(i) for i in order])
        return replace(y, ids=tuple(order), groups=x.groups)

    @staticmethod
    def regroup(groups, new: dict[int, int]) -> tuple[tuple[Atom, ...], ...]:
        return tuple(
            tuple(Atom(new[a.id], a.size) if a.id is not None else a for a in g) for g in groups
        )

    # ---- merging and splitting axes ------------------------------------------------------

    def merge(self, x: Live, j: int) -> Live:
        """x with ONNX axis j one PSK axis (or none, for a size-1 axis)."""
        while True:
            atoms = [a for a in x.groups[j] if not (a.id is None and a.size == 1)]
            if len(atoms) <= 1 and all(a.id is not None for a in atoms):
                return replace(x, groups=x.groups[:j] + (tuple(atoms),) + x.groups[j + 1 :])
            if any(a.id is None for a in atoms):
                raise Unsupported(
                    "an axis that repeats a value along part of it is merged; PSK would copy it"
                )
            x = self.merge_pair(x, atoms[-2].id, atoms[-1].id)

    def merge_pair(self, x: Live, u: int, v: int) -> Live:
        """merge_heads of the adjacent atoms u (major) and v: x moved to [..., u, S, v]
        and named [..., heads, S, hd] first."""
        if x.type.rank < 3:
            raise Unsupported(
                "two axes of a value of fewer than three are merged; PSK's merge_heads needs "
                "one between them"
            )
        rest = [i for i in x.ids if i not in (u, v)]
        x = self.moved(x, rest[:-1] + [u, rest[-1], v])
        free = self.clear_names(x, {"heads", "hd"}, keep={u, v})
        x = self.renamed(x, {**free, u: "heads", v: "hd"})
        expr = f"merge_heads({x.expr})"
        t = self.apply("merge_heads", [x], [], expr)
        merged = self.new_id()
        size = x.axis(u).size * x.axis(v).size
        ids = tuple(i for i in x.ids if i not in (u, v)) + (merged,)
        groups = tuple(
            tuple(Atom(merged, size) if a.id == u else a for a in g if a.id != v) for g in x.groups
        )
        return Live(expr, ATOM, t, ids, groups)

    def clear_names(self, x: Live, names: set[str], keep: set[int]) -> dict[int, str]:
        """New names for x's axes (but those in `keep`) that are called one of `names`."""
        used = {a.name for a in x.type.axes if a.name} | names
        return {
            i: self.axis_name(x.axis(i).size, used)
            for i in x.ids
            if i not in keep and x.axis(i).name in names
        }

    def split(self, x: Live, u: int, major: int) -> Live:
        """split_heads of axis u into (major, size / major) in place of u in its group:
        u moved last first."""
        if x.type.rank < 2:
            raise Unsupported("a vector's axis is split; PSK's split_heads needs an axis before it")
        x = self.moved(x, [i for i in x.ids if i != u] + [u])
        x = self.renamed(x, self.clear_names(x, {"heads", "hd"}, keep=set()))
        expr = f"split_heads[{major}]({x.expr})"
        t = self.apply("split_heads", [x], [Number(str(major))], expr)
        hi, lo = self.new_id(), self.new_id()
        ids = x.ids[:-2] + (hi, x.ids[-2], lo)
        size = x.axis(u).size
        parts = (Atom(hi, major), Atom(lo, size // major))
        groups = tuple(
            tuple(b for a in g for b in (parts if a.id == u else (a,))) for g in x.groups
        )
        return Live(expr, ATOM, t, ids, groups)

    def carve(self, x: Live, j: int, dims: list[int]) -> Live:
        """ONNX axis j cut into len(dims) ONNX axes of sizes `dims` (their product its
        size), its atoms taken in order and split where one straddles two."""
        counts = []
        pos = 0
        for want in dims:
            have, n = 1, 0
            while have < want:
                g = x.groups[j]
                if pos >= len(g):
                    raise Unsupported("a reshape that does not factor its axes")
                a = g[pos]
                if want % (have * a.size) == 0:
                    have, pos, n = have * a.size, pos + 1, n + 1
                    continue
                need = want // have
                if a.size % need:
                    raise Unsupported("a reshape that does not factor its axes")
                if a.id is None:
                    parts = (Atom(None, need), Atom(None, a.size // need))
                    x = replace(
                        x,
                        groups=x.groups[:j] + (g[:pos] + parts + g[pos + 1 :],) + x.groups[j + 1 :],
                    )
                else:
                    x = self.split(x, a.id, need)
            g = x.groups[j]
            while pos < len(g) and g[pos].size == 1:  # a size-1 axis stays with the one before
                pos, n = pos + 1, n + 1
            counts.append(n)
        g = x.groups[j]
        if any(a.size != 1 for a in g[pos:]) or (g[pos:] and not counts):
            raise Unsupported("a reshape that does not factor its axes")
        if counts:
            counts[-1] += len(g) - pos
        pieces, start = [], 0
        for n in counts:
            pieces.append(
                tuple(a for a in g[start : start + n] if not (a.id is None and a.size == 1))
            )
            start += n
        return replace(x, groups=x.groups[:j] + tuple(pieces) + x.groups[j + 1 :])

    def factored(self, x: Live, j: int, sizes: list[int]) -> Live:
        """x with ONNX axis j's atoms of exactly `sizes`, each split or merged as needed;
        a named value's, let once for every node that reads it so."""
        if [a.size for a in x.groups[j]] == sizes:
            return x
        key = ("factored", x.expr, x.groups, j, tuple(sizes))
        if x.expr.isidentifier() and key in self.helpers:
            return self.helpers[key]
        y = self.refactored(x, j, sizes)
        if x.expr.isidentifier():
            y = self.bind(
                y, f"{x.expr}_parts", f"{x.expr}'s axis {j} as {' × '.join(map(str, sizes))}"
            )
            self.helpers[key] = y
        return y

    def refactored(self, x: Live, j: int, sizes: list[int]) -> Live:
        y = self.carve(x, j, sizes)
        for k in range(len(sizes)):
            y = self.merge(y, j + k)
        joined = tuple(a for g in y.groups[j : j + len(sizes)] for a in g)
        return replace(y, groups=y.groups[:j] + (joined,) + y.groups[j + len(sizes) :])

    # ---- elementwise ---------------------------------------------------------------------

    def elementwise(
        self,
        prim: str,
        xs: list[Live],
        render: Callable[[list[Live]], tuple[str, int]],
        prefer: int = 0,
    ) -> Live:
        """An elementwise op on operands broadcast numpy's way: each ONNX axis's atoms
        paired across operands, and the operands renamed where PSK would pair others."""
        r = max(len(x.groups) for x in xs)
        xs = [replace(x, groups=((),) * (r - len(x.groups)) + x.groups) for x in xs]
        for j in range(r):
            sizes = {x.shape[j] for x in xs} - {1}
            if len(sizes) > 1:
                shapes = ", ".join(str(list(x.shape)) for x in xs)
                raise Unsupported(f"operands of shapes {shapes} do not broadcast", "E4001")
            live = [x for x in xs if x.shape[j] != 1 or any(a.id is not None for a in x.groups[j])]
            structures = {tuple(a.size for a in x.groups[j]) for x in live}
            if len(structures) > 1:
                if any(x.shape[j] == 1 for x in live):
                    raise Unsupported("an axis of size 1 of one operand against a longer one")
                pattern = max(structures, key=len)
                try:
                    xs = [self.factored(x, j, list(pattern)) if x in live else x for x in xs]
                except Unsupported:
                    xs = [self.merge(x, j) if x in live else x for x in xs]
        roles: list[list[tuple[int, int]]] = []
        # per ONNX axis of the result, its atoms: (the role, or None for a repeat; size)
        out_groups: list[list[tuple[int | None, int]]] = []
        for j in range(r):
            width = max(len(x.groups[j]) for x in xs)
            g = []
            for k in range(width):
                role = [
                    (n, x.groups[j][k].id)
                    for n, x in enumerate(xs)
                    if len(x.groups[j]) == width and x.groups[j][k].id is not None
                ]
                size = max(
                    (x.groups[j][k].size for x in xs if len(x.groups[j]) == width), default=1
                )
                if role:
                    roles.append(role)
                    g.append((len(roles) - 1, size))
                elif size != 1:
                    g.append((None, size))
            out_groups.append(g)
        result = self.try_elementwise(prim, xs, roles, render)
        if result is None:  # name the roles whose axes' names differ, then every role
            sizes = [xs[role[0][0]].axis(role[0][1]).size for role in roles]
            names = self.name_roles(xs, roles, sizes, prefer)
            for every in (False, True):
                named = [
                    self.renamed(
                        x,
                        {
                            i: names[r]
                            for r, role in enumerate(roles)
                            for kk, i in role
                            if kk == n and (every or len({xs[k].axis(a).name for k, a in role}) > 1)
                        },
                    )
                    for n, x in enumerate(xs)
                ]
                result = self.try_elementwise(prim, named, roles, render)
                if result is not None:
                    break
        if result is None and len(xs) == 2:
            return self.union(prim, xs, roles, out_groups, render)
        if result is None:
            shapes = ", ".join(str(list(x.shape)) for x in xs)
            raise Unsupported(
                f"operands of shapes {shapes} repeat along each other's axes; PSK broadcasts "
                "one into the other only"
            )
        t, expr, level, role_pos = result
        ids = tuple(self.new_id() for _ in t.axes)
        groups = tuple(
            tuple(Atom(ids[role_pos[rr]], s) if rr is not None else Atom(None, s) for rr, s in g)
            for g in out_groups
        )
        return Live(expr, level, t, ids, groups)

    def union(self, prim, xs, roles, out_groups, render) -> Live:
        """Two operands each repeating along an axis of the other: a product is an outer
        product (`ein`); another operation reads the first operand repeated to the
        product's axes (`broadcast_like`)."""
        order = [r for g in out_groups for r, _ in g if r is not None]
        product, ids = self.ein(xs, roles, order)
        new = dict(zip(order, ids, strict=True))
        groups = tuple(
            tuple(Atom(new[r], s) if r is not None else Atom(None, s) for r, s in g)
            for g in out_groups
        )
        product = replace(product, groups=groups)
        if prim == "mul":
            return product
        like = self.bind(product, "outer", "the axes of both operands, for broadcast_like")
        a = xs[0]
        expr = f"broadcast_like({a.expr}, {like.expr})"
        t = self.apply("broadcast_like", [a, like], [], expr)
        # broadcast_like keeps like's axes: x's atoms are like's, role by role
        wide = replace(like, expr=expr, type=t)
        return self.elementwise(prim, [wide, xs[1]], render)

    def try_elementwise(self, prim, xs, roles, render):
        """(type, text, level, each role's position in the result), if PSK's broadcasting
        pairs exactly the atoms the roles pair; else None."""
        expr, level = render(xs)
        try:
            t = infer(prim, [], [x.type for x in xs])
        except TypingError:
            return None
        where = [alignment(x.type, t) for x in xs]
        role_pos = []
        for role in roles:
            spots = set()
            for k, i in role:
                p = xs[k].pos(i)
                spots.add(where[k].index(p) if p in where[k] else None)
            if len(spots) != 1 or None in spots:
                return None
            role_pos.append(spots.pop())
        if len(set(role_pos)) != len(role_pos) or len(role_pos) != t.rank:
            return None
        return t, expr, level, role_pos

    def binary(self, op: str, a: Live, b: Live) -> Live:
        prim = {"+": "add", "-": "sub", "*": "mul", "/": "div"}[op]
        level = SUM if op in "+-" else PRODUCT
        return self.elementwise(
            prim, [a, b], lambda xs: (f"{wrap(xs[0], level)} {op} {wrap(xs[1], level + 1)}", level)
        )

    def call(self, fn: str, xs: list[Live], prim: str | None = None) -> Live:
        if len(xs) == 1:
            x = xs[0]
            expr = f"{fn}({x.expr})"
            t = self.apply(prim or fn, [x], [], expr)
            return replace(x, expr=expr, level=ATOM, type=t)
        return self.elementwise(
            prim or fn, xs, lambda ys: (f"{fn}({', '.join(y.expr for y in ys)})", ATOM)
        )

    def negate(self, x: Live) -> Live:
        return replace(x, expr=f"-{wrap(x, PREFIX)}", level=PREFIX, type=x.type.with_kind("real"))

    def number(self, value: float | int, dtype=np.float32) -> Live:
        text, level = literal(value, np.dtype(dtype))
        return Live(text, level, TensorType("real", ()), (), ())

    # ---- constants -----------------------------------------------------------------------

    def constant(self, array: np.ndarray) -> Live:
        """A folded constant as a PSK value: a number, a causal mask, a range or a choice
        between two numbers by a causal mask, repeated along the axes it does not vary;
        one that is not a number is let once, however many nodes read its value."""
        key = ("constant", array.dtype.str, array.shape, hashlib.sha1(array.tobytes()).digest())
        if key in self.helpers:
            return self.helpers[key]
        live = self.constant_value(array)
        if live.type.rank:
            hint = "causal" if array.dtype.kind == "b" else "causal_bias"
            live = self.bind(live, hint, f"a constant of shape {list(array.shape)}")
            self.helpers[key] = live
        return live

    def constant_value(self, array: np.ndarray) -> Live:
        core, kept = compress(array)
        groups = []
        live = None
        if core.ndim == 0:
            if array.dtype.kind == "b":
                raise Unsupported("a constant mask that is all true or all false")
            live = self.number(core.item(), array.dtype)
        elif core.ndim == 1 and array.dtype.kind in "iuf" and is_range(core):
            live = self.positions(len(core))
        elif core.ndim == 2:
            live = self.masked(core, array.dtype)
        if live is None:
            raise Unsupported(
                f"a constant of shape {list(array.shape)} that is no number, range or causal mask"
            )
        core_groups = iter(live.groups)
        for axis, n in enumerate(array.shape):
            if axis in kept:
                groups.append(next(core_groups))
            else:
                groups.append((Atom(None, n),) if n != 1 else ())
        return replace(live, groups=tuple(groups))

    def causal(self, n: int, m: int, upper: bool) -> Live:
        """mask[i, j] = (j ≤ i) over [n, m]; or, `upper`, (i ≤ j)."""
        a, b = ("i", "j") if not upper else ("j", "i")
        sizes = {"i": n, "j": m}
        expr = f"causal_mask[{a}: {sizes[a]}, {b}: {sizes[b]}]"
        t = self.apply("causal_mask", [], [AxisSpec(a, sizes[a]), AxisSpec(b, sizes[b])], expr)
        live = self.fresh_live(expr, t)
        if upper:  # the ONNX axes are (i, j), the mask's (j, i)
            live = replace(live, groups=live.groups[::-1])
        return live

    def masked(self, core: np.ndarray, dtype: np.dtype) -> Live | None:
        n, m = core.shape
        lower = np.tril(np.ones((n, m), dtype=bool))
        upper = np.triu(np.ones((n, m), dtype=bool))
        for mask, is_upper in ((lower, False), (upper, True)):
            if core.dtype.kind == "b":
                if np.array_equal(core, mask):
                    return self.causal(n, m, is_upper)
                continue
            inside, outside = np.unique(core[mask]), np.unique(core[~mask])
            if len(inside) == 1 and len(outside) == 1:
                c = self.causal(n, m, is_upper)
                yes, no = self.number(inside[0], dtype), self.number(outside[0], dtype)
                expr = f"where({c.expr}, {yes.expr}, {no.expr})"
                t = self.apply("where", [c, yes, no], [], expr)
                return replace(c, expr=expr, type=t)
        return None

    def positions(self, n: int) -> Live:
        """0, 1, …, n − 1 as reals: a row of a causal mask counts the positions before."""

        def make() -> Live:
            expr = f"sum[j](where(causal_mask[i: {n}, j: {n}], 1, 0)) - 1"
            t = infer("sum", ["j"], [TensorType("real", (Axis("i", n), Axis("j", n)))])
            return self.fresh_live(expr, t, SUM)

        return self.helper(("positions", n), f"range{n}", make, counting(n))

    def indices(self, n: int) -> Live:
        """0, 1, …, n − 1 as indices: the last of a causal mask row's largest values."""

        def make() -> Live:
            expr = f"argmax[j](where(causal_mask[i: {n}, j: {n}], 1, 0))"
            t = TensorType("index", (Axis("i", n),))
            return self.fresh_live(expr, t)

        return self.helper(("indices", n), f"index{n}", make, f"{counting(n)} (indices)")

    def onehot(self, n: int, k: int) -> Live:
        """The vector over n positions that is 1 at position k and 0 elsewhere."""

        def make() -> Live:
            pos = self.positions(n)
            expr = f"relu(1 - abs({pos.expr} - {k}))"
            return replace(pos, expr=expr, level=ATOM)

        return self.helper(
            ("onehot", n, k), f"onehot{n}_{k}", make, f"1 at {k} of {counting(n)}, else 0"
        )

    # ---- selecting and stacking blocks ---------------------------------------------------

    def select(self, x: Live, j: int, start: int, length: int) -> Live:
        """ONNX axis j's elements start … start + length − 1 (a block of a whole number of
        blocks of that length), contracted with a one-hot vector over the blocks."""
        n = x.shape[j]
        if start == 0 and length == n:
            return x
        if n % length or start % length:
            raise Unsupported(
                f"a slice {start}:{start + length} of an axis of {n}, not one of its blocks "
                f"of {length}"
            )
        blocks, k = n // length, start // length
        x = self.factored(x, j, [blocks, length] if length > 1 else [blocks])
        head = x.groups[j][0]
        rest = x.groups[j][1:]
        if head.id is None:  # a repeat: every block is the same
            return replace(x, groups=x.groups[:j] + (rest,) + x.groups[j + 1 :])
        hot = self.onehot(blocks, k)
        roles = [[(0, i)] for i in x.ids if i != head.id] + [[(0, head.id), (1, hot.ids[0])]]
        y, ids = self.ein([x, hot], roles, list(range(len(roles) - 1)))
        new = dict(zip([i for i in x.ids if i != head.id], ids, strict=True))
        groups = x.groups[:j] + (rest,) + x.groups[j + 1 :]
        return replace(y, groups=self.regroup(groups, new))

    def stack(self, x: Live, j: int, blocks: int, k: int) -> Live:
        """x as block k of `blocks` along ONNX axis j (zeros in the others): an outer
        product with a one-hot vector, the block axis major in axis j."""
        hot = self.onehot(blocks, k)
        roles = [[(0, i)] for i in x.ids] + [[(1, hot.ids[0])]]
        y, ids = self.ein([x, hot], roles, list(range(len(roles))))
        new = dict(zip(x.ids, ids[:-1], strict=True))
        groups = list(self.regroup(x.groups, new))
        groups[j] = (Atom(ids[-1], blocks),) + groups[j]
        return replace(y, groups=tuple(groups))

    # ---- the output ----------------------------------------------------------------------

    def finish(self, x: Live, names: list[str | None]) -> Live:
        """x as the entry returns it: one PSK axis an ONNX axis, in ONNX's order, named
        `names` (None: positional)."""
        for j in range(len(x.groups)):
            x = self.merge(x, j)
            if not x.groups[j] or x.groups[j][0].id is None:
                raise Unsupported(
                    f"the output's axis {j} is a repeat or of size 1, which PSK would copy"
                )
        order = [g[0].id for g in x.groups]
        x = self.moved(x, order)
        return self.renamed(x, {g[0].id: n for g, n in zip(x.groups, names, strict=True)})


def counting(n: int) -> str:
    return ", ".join(str(i) for i in range(n)) if n <= 4 else f"0, 1, …, {n - 1}"


def compress(array: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """The array without the axes along which it does not vary, and the axes kept."""
    kept = []
    core = array
    offset = 0
    for axis in range(array.ndim):
        a = axis - offset
        first = np.take(core, [0], axis=a)
        if core.shape[a] == 1 or np.array_equal(core, np.broadcast_to(first, core.shape)):
            core = np.squeeze(first, axis=a)
            offset += 1
        else:
            kept.append(axis)
    return core, kept


def is_range(v: np.ndarray) -> bool:
    return bool(np.array_equal(v, np.arange(len(v))))


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def fold_node(t: Translator, node: onnx.NodeProto, ins: list[Value | None]) -> list[np.ndarray]:
    try:
        return fold(node, [v for v in ins], t.graph.opset)
    except FoldError as e:
        raise Unsupported(f"cannot be folded: {e}") from None


def is_live(v) -> bool:
    return isinstance(v, Live)


def as_live(t: Translator, v: Value) -> Live:
    return v if isinstance(v, Live) else t.constant(v)
