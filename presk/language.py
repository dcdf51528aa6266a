"""The language's vocabulary, without MLIR: each primitive's signature, the special forms,
the named constants, the spellings that choose a primitive, and the initializers.

A primitive's signature is what a program's text can say of it: its name, its PSK-Core
op, how many operands it takes, what its brackets take, and how a program reaches it.
Each primitive's record (presk/prims) is built on its signature, so the two cannot
disagree; the program check (presk/front/check.py) reads the signatures alone, so a parse
and a check (`presk dump --stage ast`) load no MLIR.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a derivative keeps its forward's values for the backward: stored, or recomputed.
REMATS = ("store", "recompute")
# How a program reaches a primitive: the language names it; a form of the language makes
# it without naming it (a literal, a nat read as ℝ, max[…]); or only a derivative's
# expansion emits it (docs/language.md, section 8.1).
REACHED = ("name", "form", "adjoint")
# What a primitive's brackets take: axes (names, positions, `name: size`, `a → b`), or
# numbers; None: it takes no brackets.
STATICS = ("axes", "numbers")


@dataclass(frozen=True)
class Signature:
    name: str  # the language's name
    op: str  # the PSK-Core op
    arity: tuple[int, int]  # fewest and most value operands
    statics: str | None = None  # one of STATICS, or None
    reached: str = "name"  # one of REACHED

    @property
    def named(self) -> bool:
        """Whether a program may call it by its name."""
        return self.reached == "name"


def _of(name: str, arity: tuple[int, int], **facts) -> Signature:
    return Signature(name, f"psk.{name}", arity, **facts)


UNARY = ("neg", "exp", "log", "sqrt", "tanh", "sin", "cos", "erf", "abs", "gelu", "relu", "sign")
BINARY = ("add", "sub", "mul", "div", "max", "min", "pow")
_ONE, _TWO = (1, 1), (2, 2)

SIGNATURES: dict[str, Signature] = {
    s.name: s
    for s in [
        # values
        _of("const", (0, 0), reached="form"),
        _of("to_real", _ONE, reached="form"),
        # elementwise
        *(_of(n, _ONE) for n in UNARY),
        *(_of(n, _TWO) for n in BINARY),
        _of("gt", _TWO, reached="adjoint"),
        Signature("where", "psk.select", (3, 3)),
        _of("dropout", _ONE, statics="numbers"),
        # contractions
        _of("dot", _TWO),
        _of("matmul", _TWO),
        _of("dot_vjp_l", _TWO, reached="adjoint"),
        _of("dot_vjp_r", _TWO, reached="adjoint"),
        _of("ein", _TWO, statics="axes"),
        # reductions
        _of("sum", _ONE, statics="axes"),
        _of("mean", _ONE, statics="axes"),
        _of("reduce_max", _ONE, statics="axes", reached="form"),
        _of("reduce_max_vjp", _TWO, reached="adjoint"),
        _of("argmax", _ONE, statics="axes"),
        # rows
        _of("cross_entropy_vjp", (3, 3), reached="adjoint"),
        _of("embed_vjp", _TWO, reached="adjoint"),
        _of("softmax", (1, 2), statics="axes"),
        _of("cross_entropy", _TWO, statics="axes"),
        _of("sample", _ONE, statics="axes"),
        _of("embed", _TWO),
        # axes
        _of("split_heads", _ONE, statics="numbers"),
        _of("merge_heads", _ONE),
        _of("rename", _ONE, statics="axes"),
        _of("broadcast_like", _TWO),
        _of("sum_to", _TWO),
        _of("expand", _TWO, reached="adjoint"),
        _of("causal_mask", (0, 0), statics="axes"),
    ]
}


def named(name: str) -> Signature | None:
    """The primitive a program calls `name`, or None (no primitive, or one the language
    has no name for)."""
    s = SIGNATURES.get(name)
    return s if s is not None and s.named else None


# Names the language gives meaning to beyond the primitives' table.
SPECIAL_FORMS = ("fold", "grad")
CONSTANTS = ("pi", "π")
# Language spellings that pick a primitive by what they are given.
REDUCING = {"max": "reduce_max"}
INIT_KINDS = {"zeros": (), "ones": (), "normal": ("scale",), "uniform": ("scale",)}


def counted(n: int, noun: str, most: int | None = None) -> str:
    """`1 operand`, `2 operands`, or with `most`, `1 or 2 operands`."""
    if most is None or most == n:
        return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
    return f"{n} {'or' if most == n + 1 else 'to'} {most} {noun}s"
