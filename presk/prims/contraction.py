"""Contractions: `dot` (also `·`), `matmul` and `ein`.

- `a · b` sums a's last axis against b's first: axes a[:-1] + b[1:].
- `matmul(a, b)` is [..., I, K] × [..., K, J] → [..., I, J], the leading axes equal.
- `ein[out…](a, b)` matches axes by name: a name in both operands and in `out` is a
  batch axis, a name in both and not in `out` is summed, a name in one operand must be
  in `out`. The result has the axes `out` lists, in that order.
Every sum runs over the contracted index in increasing order.
"""

from __future__ import annotations

import math

import numpy as np

from presk.ir.types import Axis, TensorType
from presk.kernel.contraction import Nest, build, default_layout, describe
from presk.kernel.nests import Contraction
from presk.language import SIGNATURES
from presk.prims import balls, exact
from presk.prims.base import Apply, Prim, TypingError, check_unique_names


def _dot(types, attrs) -> TensorType:
    a, b = types
    if a.rank == 0 or b.rank == 0:
        raise TypingError(f"dot needs an axis on each side, not {a.text()} · {b.text()}")
    if a.axes[-1].size != b.axes[0].size:
        raise TypingError(
            f"dot sums {a.text()}'s last axis ({a.axes[-1].size}) against "
            f"{b.text()}'s first ({b.axes[0].size})"
        )
    return TensorType("real", check_unique_names(a.axes[:-1] + b.axes[1:], "the dot's result"))


def _matmul(types, attrs) -> TensorType:
    a, b = types
    if a.rank < 2 or b.rank < 2:
        raise TypingError(f"matmul needs two axes on each side, not {a.text()} and {b.text()}")
    if a.axes[:-2] != b.axes[:-2]:
        raise TypingError(f"matmul's leading axes differ: {a.text()} and {b.text()}")
    if a.axes[-1].size != b.axes[-2].size:
        raise TypingError(f"matmul's inner sizes differ: {a.text()} and {b.text()}")
    axes = a.axes[:-2] + (a.axes[-2], b.axes[-1])
    return TensorType("real", check_unique_names(axes, "the matmul's result"))


def _ein_bind(prim, statics, types) -> dict:
    if not statics or not all(isinstance(s, str) for s in statics):
        raise TypingError("ein[...] lists the output's axes by name")
    return {"axes": list(statics)}


def _ein(types, attrs) -> TensorType:
    a, b = types
    out = list(attrs["axes"])
    for t in (a, b):
        if any(x.name is None for x in t.axes):
            raise TypingError(f"ein matches axes by name, and {t.text()} has a positional axis")
    sizes: dict[str, int] = {}
    for t in (a, b):
        for x in t.axes:
            if sizes.setdefault(x.name, x.size) != x.size:
                raise TypingError(f"axis {x.name} has two sizes in ein: {a.text()} and {b.text()}")
    if len(set(out)) != len(out):
        raise TypingError(f"ein[{', '.join(out)}] names an axis twice")
    for n in out:
        if n not in sizes:
            raise TypingError(f"ein's output axis {n} is in neither {a.text()} nor {b.text()}")
    in_a, in_b = set(a.names), set(b.names)
    for n in sizes:
        if n not in out and not (n in in_a and n in in_b):
            raise TypingError(f"axis {n} is in one operand only, so ein must keep it in its output")
    return TensorType("real", tuple(Axis(n, sizes[n]) for n in out))


# ---- the exact reference -------------------------------------------------------------


def _dot_ref(ap: Apply, xs: list):
    a, b = xs
    k = a.shape[-1]
    a2 = a.reshape(-1, k)
    b2 = b.reshape(k, -1)
    return exact.contract(a2[:, None, :], b2.T[None, :, :]).reshape(ap.out_type.shape)


def _matmul_ref(ap: Apply, xs: list):
    a, b = xs
    return exact.contract(a[..., :, None, :], np.swapaxes(b, -1, -2)[..., None, :, :])


def ein_layout(ap: Apply) -> tuple[list[str], list[list[int | None]]]:
    """The contracted axes (in operand 0's order) and, per operand, the position of each
    axis of (output axes, contracted axes) in it, or None where it is absent."""
    out = [a.name for a in ap.out_type.axes]
    a, b = ap.in_types
    summed = [n for n in a.names if n not in out]
    order = out + summed
    maps = [[t.names.index(n) if n in t.names else None for n in order] for t in (a, b)]
    return summed, maps


def _ein_ref(ap: Apply, xs: list):
    summed, maps = ein_layout(ap)
    views = []
    for x, m in zip(xs, maps, strict=True):
        v = x.transpose([i for i in m if i is not None])
        views.append(v.reshape([x.shape[i] if i is not None else 1 for i in m]))
    n_out = ap.out_type.rank
    if not summed:
        return np.broadcast_to(views[0] * views[1], ap.out_type.shape).copy()
    # flatten the contracted axes into one, row-major in operand 0's order
    flat = [v.reshape(v.shape[:n_out] + (-1,)) for v in views]
    return np.broadcast_to(exact.contract(flat[0], flat[1]), ap.out_type.shape).copy()


# ---- the two derivatives of dot -------------------------------------------------------
# For y = a · b with a: A + [K] and b: [K] + J (A and J runs of axes):
#   dot_vjp_l(ct, b) = Σ_J ct[A, J] · b[K, J]   : A + [K]   (J summed in row-major order)
#   dot_vjp_r(a, ct) = Σ_A a[A, K] · ct[A, J]   : [K] + J   (A summed as one K, row-major)


def _vjp_l(types, attrs) -> TensorType:
    ct, b = types
    j = b.rank - 1
    if b.rank == 0 or ct.rank < j or ct.axes[ct.rank - j :] != b.axes[1:]:
        raise TypingError(
            f"dot_vjp_l: {ct.text()} does not end in the axes of {b.text()} after its first"
        )
    return TensorType(
        "real", check_unique_names(ct.axes[: ct.rank - j] + b.axes[:1], "dot_vjp_l's result")
    )


def _vjp_r(types, attrs) -> TensorType:
    a, ct = types
    i = a.rank - 1
    if a.rank == 0 or ct.rank < i or ct.axes[:i] != a.axes[:-1]:
        raise TypingError(
            f"dot_vjp_r: {ct.text()} does not start with the axes of {a.text()} before its last"
        )
    return TensorType("real", check_unique_names(a.axes[-1:] + ct.axes[i:], "dot_vjp_r's result"))


def _vjp_l_ref(ap: Apply, xs: list):
    ct, b = xs
    k = b.shape[0]
    ct2 = ct.reshape(-1, int(np.prod(b.shape[1:], dtype=np.int64)))
    return exact.contract(ct2[:, None, :], b.reshape(k, -1)[None, :, :]).reshape(ap.out_type.shape)


def _vjp_r_ref(ap: Apply, xs: list):
    a, ct = xs
    k = a.shape[-1]
    a2 = a.reshape(-1, k)
    ct2 = ct.reshape(a2.shape[0], -1)
    return exact.contract(a2.T[:, None, :], ct2.T[None, :, :]).reshape(ap.out_type.shape)


def _dot_vjp(e, ins, out, ct, need):
    a, b = ins
    return [
        e.conform(e.prim("dot_vjp_l", [ct, b]), a) if need[0] else None,
        e.conform(e.prim("dot_vjp_r", [a, ct]), b) if need[1] else None,
    ]


def _renamed(e, v, names):
    return e.prim("rename", [v], {"names": names})


def _matmul_vjp(e, ins, out, ct, need):
    # through ein, with every axis given a name of its own
    a, b = ins
    batch = [f"_b{i}" for i in range(a.type.rank - 2)]
    an, bn, cn = batch + ["_i", "_k"], batch + ["_k", "_j"], batch + ["_i", "_j"]
    ra, rb, rc = _renamed(e, a, an), _renamed(e, b, bn), _renamed(e, ct, cn)
    return [
        e.conform(e.prim("ein", [rc, rb], {"axes": an}), a) if need[0] else None,
        e.conform(e.prim("ein", [ra, rc], {"axes": bn}), b) if need[1] else None,
    ]


def _ein_vjp(e, ins, out, ct, need):
    a, b = ins
    return [
        e.prim("ein", [ct, b], {"axes": list(a.type.names)}) if need[0] else None,
        e.prim("ein", [a, ct], {"axes": list(b.type.names)}) if need[1] else None,
    ]


# ---- kernels: every contraction is one nest of presk/kernel/contraction.py -------------


def _spec(name: str, ap: Apply) -> Contraction:
    ta, tb = ap.in_types
    out = ap.out_type
    if name == "dot":  # A + [K] · [K] + J
        ra = ta.rank
        return Contraction(
            tuple(("o", i) for i in range(ra - 1)) + (("k", 0),),
            (("k", 0),) + tuple(("o", ra - 1 + j) for j in range(tb.rank - 1)),
            (ta.axes[-1].size,),
        )
    if name == "matmul":  # [..., I, K] × [..., K, J]
        nb = ta.rank - 2
        batch = tuple(("o", i) for i in range(nb))
        return Contraction(
            batch + (("o", nb), ("k", 0)), batch + (("k", 0), ("o", nb + 1)), (ta.axes[-1].size,)
        )
    if name == "ein":
        names = [a.name for a in out.axes]
        summed = [n for n in ta.names if n not in names]

        def m(t):
            return tuple(
                ("o", names.index(n)) if n in names else ("k", summed.index(n)) for n in t.names
            )

        return Contraction(m(ta), m(tb), tuple(ta.axes[ta.names.index(n)].size for n in summed))
    if name == "dot_vjp_l":  # ct: A + J, b: [K] + J  ->  A + [K], J summed
        na, nj = out.rank - 1, tb.rank - 1
        return Contraction(
            tuple(("o", i) for i in range(na)) + tuple(("k", j) for j in range(nj)),
            (("o", na),) + tuple(("k", j) for j in range(nj)),
            tuple(a.size for a in tb.axes[1:]),
        )
    # dot_vjp_r: a: A + [K], ct: A + J  ->  [K] + J, A summed as one
    na = ta.rank - 1
    return Contraction(
        tuple(("k", i) for i in range(na)) + (("o", 0),),
        tuple(("k", i) for i in range(na)) + tuple(("o", 1 + j) for j in range(tb.rank - na)),
        tuple(a.size for a in ta.axes[:-1]),
    )


def _ball(name: str):
    """The contraction on balls: FLINT's matrix products, one a batch index (the sum's
    order is Arb's; the ball contains the exact sum)."""

    def rule(ap: Apply, xs: list):
        spec = _spec(name, ap)
        out = [("o", i) for i in range(ap.out_type.rank)]
        return balls.contract(xs[0], list(spec.a), xs[1], list(spec.b), out)

    return rule


def _terms(name: str):
    def terms(ap: Apply) -> int:
        return math.prod(_spec(name, ap).ksizes)

    return terms


def _kernel(name: str):
    def lower(kb, ap: Apply) -> None:
        nest = Nest(_spec(name, ap), ap.out_type)
        layout = default_layout(nest, kb.machine.name, name)
        with kb.ctx:  # what the layout passes need to build the nest again
            kb.func.attributes["psk_kernel.contraction"] = describe(nest, name)
            kb.func.attributes["psk_kernel.layout"] = layout.attr()
        build(kb, nest, layout)

    return lower


# Each costs its k per output element, and sums products of its two operands.
PRIMS = [
    Prim(
        SIGNATURES["dot"],
        _dot,
        reference=_dot_ref,
        ball=_ball("dot"),
        terms=_terms("dot"),
        vjp=_dot_vjp,
        kernel=_kernel("dot"),
        work="terms",
        sums=2,
    ),
    Prim(
        SIGNATURES["matmul"],
        _matmul,
        reference=_matmul_ref,
        ball=_ball("matmul"),
        terms=_terms("matmul"),
        vjp=_matmul_vjp,
        kernel=_kernel("matmul"),
        work="terms",
        sums=2,
    ),
    Prim(
        SIGNATURES["dot_vjp_l"],
        _vjp_l,
        reference=_vjp_l_ref,
        ball=_ball("dot_vjp_l"),
        terms=_terms("dot_vjp_l"),
        kernel=_kernel("dot_vjp_l"),
        work="terms",
        sums=2,
    ),
    Prim(
        SIGNATURES["dot_vjp_r"],
        _vjp_r,
        reference=_vjp_r_ref,
        ball=_ball("dot_vjp_r"),
        terms=_terms("dot_vjp_r"),
        kernel=_kernel("dot_vjp_r"),
        work="terms",
        sums=2,
    ),
    Prim(
        SIGNATURES["ein"],
        _ein,
        bind=_ein_bind,
        attr_kinds={"axes": "strs"},
        reference=_ein_ref,
        ball=_ball("ein"),
        terms=_terms("ein"),
        vjp=_ein_vjp,
        kernel=_kernel("ein"),
        work="terms",
        sums=2,
    ),
]
