"""Constants as exact text: a decimal literal, or an expression of literals with + − × ÷,
sqrt, exp, log, pi and inf, evaluated at the precision of the current gmpy2 context (or
in another arithmetic's functions: the ball reference's Arb balls)."""

from __future__ import annotations

import ast as pyast

import gmpy2

MPFR = {
    "number": gmpy2.mpfr,
    "sqrt": gmpy2.sqrt,
    "exp": gmpy2.exp,
    "log": gmpy2.log,
    "pi": gmpy2.const_pi,
    "inf": gmpy2.inf,
}
_FUNCS = ("sqrt", "exp", "log")
_BINOPS = {
    pyast.Add: "__add__",
    pyast.Sub: "__sub__",
    pyast.Mult: "__mul__",
    pyast.Div: "__truediv__",
}


def const_value(text: str, numbers: dict = MPFR):
    """The value of a constant's text as an MPFR number at the current precision, or in
    the arithmetic `numbers` gives: its `number` from a literal's digits, its functions,
    its `pi` and `inf`."""

    def ev(node):
        if isinstance(node, pyast.Constant) and isinstance(node.value, (int, float)):
            # from the digits as written, not through a Python float
            return numbers["number"](pyast.get_source_segment(text, node))
        if isinstance(node, pyast.UnaryOp) and isinstance(node.op, pyast.USub):
            return -ev(node.operand)
        if isinstance(node, pyast.BinOp) and type(node.op) in _BINOPS:
            return getattr(ev(node.left), _BINOPS[type(node.op)])(ev(node.right))
        if isinstance(node, pyast.Name) and node.id == "pi":
            return numbers["pi"]()
        if isinstance(node, pyast.Name) and node.id == "inf":
            return numbers["inf"]()
        if (
            isinstance(node, pyast.Call)
            and isinstance(node.func, pyast.Name)
            and node.func.id in _FUNCS
            and len(node.args) == 1
        ):
            return numbers[node.func.id](ev(node.args[0]))
        raise ValueError(text)

    try:
        tree = pyast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(text) from None
    return ev(tree.body)


# The most bits a reference computes at: MPFR takes far more, but a reference at millions
# of bits is no use (and GMP aborts the process near 2^31).
MAX_BITS = 65536
