"""The certified reference (`--backend ball`): PSK-Core evaluated on Arb balls.

Each primitive runs its `ball` semantics (presk/prims): every value a ball, a midpoint
and a radius, that provably contains the exact real value of the program on its inputs.
Inputs and parameters arrive as float64 (or int, bool) buffers and are balls of radius
0. The host, its calls, folds and draws, and the progress of a long call are the MPFR
interpreter's (presk/backends/interp.py), which stays beside it as the independent
cross-check.

`--bits` is what a call certifies: every real output's radius at most 2^-bits of its
largest |value|. A radius grows through a program, so the midpoints carry more: the bits
the call's cost expects a radius to lose on its longest chain (`Cost.lost`) and a guard.
A call that still certifies fewer runs again with as many more as it lacked; one where a
ball lost its answer (a comparison it cannot decide, a divisor or a logarithm's ball
reaching 0: E8005, with the site) runs again at twice the bits, up to a bound, each time
saying so on stderr.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from presk.backends import REGISTRY
from presk.backends.host import CallContext
from presk.backends.interp import Interpreter, check_finite, cost
from presk.constants import MAX_BITS
from presk.core.program import Op
from presk.errors import RuntimeDataError, UsageError
from presk.prims import balls
from presk.prims.base import Apply, aligned
from presk.progress import shown
from presk.quantize import realized_args
from presk.runtime.values import Tensor, Value, leaves, map_leaves

GUARD_BITS = 24  # the midpoints' bits beyond those asked and those expected to be lost
RAISES = 2  # the most a call's working precision doubles: the bound of its reruns


def checked_bits(bits: int) -> int:
    """`bits` if balls can be computed at it (E0001 otherwise)."""
    lo, hi = balls.BITS
    if not lo <= bits <= hi:
        raise UsageError(
            f"--bits {bits} is outside the ball reference's {lo} to {hi}: below {lo} a "
            "ball's midpoint is coarser than its radius (use --backend interp for fewer bits)"
        )
    return bits


class BallReference(Interpreter):
    spec = REGISTRY["ball"]
    numbers = balls

    def __init__(self, program, bits: int = 256, realization=None):
        super().__init__(program, checked_bits(bits), realization)
        self.working: int | None = None  # the midpoints' precision of the last call's last run

    def working_bits(self, entry: str) -> int:
        """The midpoints' precision a call of `entry` starts at: the bits asked, those
        its longest chain is expected to lose, and a guard."""
        lost = math.ceil(cost(self.program, entry, self._costs).lost)
        return min(MAX_BITS, self.bits + lost + GUARD_BITS)

    def call(
        self, args: list[Value], ctx: CallContext | None = None, entry: str | None = None
    ) -> Value:
        """Run the entry (or function `entry`) on `args` until its outputs certify
        `bits`: again with the bits it lacked, or at twice the bits where a ball lost its
        answer, within `RAISES` doublings of the first working precision."""
        entry = entry or self.program.entry
        args = realized_args(args, self.program, self.realization, entry)
        ctx = ctx or CallContext()
        working = self.working_bits(entry)
        bound = min(MAX_BITS, working << RAISES)
        best = None  # the bits the last run certified, when it ran again for more
        while True:
            self.working = working
            try:
                out = self.run(args, ctx, entry, working)
            except RuntimeDataError as e:
                if e.code != balls.CODE:
                    raise
                if 2 * working > bound:
                    e.message += f"; raise --bits (this call ran at up to {working} bits)"
                    raise
                _note(f"{e.message}; running again at {2 * working} bits")
                working *= 2
                continue
            found = certified(out)
            if found is None or found[0] >= self.bits:
                return out
            got, leaf = found[0], found[1] or "the value"
            stuck = best is not None and got <= best
            if stuck or working >= bound:
                why = "more bits did not narrow it (it may be 0)" if stuck else "its bound"
                _note(
                    f"the ball reference certifies only {got} of the {self.bits} bits asked "
                    f"of {leaf}, at {working} bits of working precision: {why}"
                )
                return out
            ahead = min(bound, working + self.bits - got + GUARD_BITS)
            _note(
                f"the ball reference certified {got} of the {self.bits} bits asked of {leaf} "
                f"at {working} bits of working precision; running again at {ahead}"
            )
            best, working = got, ahead

    def rule(self, op: Op):
        return op.prim.ball

    def taken(self, name: str, value: Value) -> Value:
        """An argument checked finite and kept in its machine buffers: each op makes
        balls of the part it reads (a layer's weights) when it reads it, so a model's
        parameters never all stand as balls at once."""

        def check(path: str, t: Tensor) -> Tensor:
            if t.type.kind == "real":
                check_finite(path, t)
            return t

        return map_leaves(check, value, name)

    def argument_bytes(self, reals: int) -> int:
        return 8 * reals  # float64 buffers until an op reads them

    def operand(self, t: Tensor) -> Tensor:
        if t.type.kind != "real" or t.data.dtype == object:
            return t
        return Tensor(t.type, balls.exact(t.data))

    def result(self, value: Value) -> Value:
        """Every real of the entry's value a ball (a parameter returned as it came is
        one now), and finite."""

        def ball(path: str, t: Tensor) -> Tensor:
            t = self.operand(t)
            if t.type.kind == "real":
                balls.check_finite(f"the result {path or 'value'}", t.data, [t.data], True)
            return t

        return map_leaves(ball, value, "")

    def checked(self, op: Op, ap: Apply, ins: list[Tensor], data: np.ndarray) -> None:
        if not op.prim.partial:  # finite balls in, finite balls out
            return
        real = [t for t in ins if t.type.kind == "real"]
        if op.prim.elementwise:  # judged by the operands of the element at fault
            operands = [
                np.broadcast_to(aligned(t.data, t.type, ap.out_type), ap.out_type.shape)
                for t in real
            ]
        else:
            operands = [t.data for t in real]
        balls.check_finite(
            op.prim.name, data.reshape(ap.out_type.shape), operands, op.prim.elementwise
        )


def certified(value: Value) -> tuple[int, str] | None:
    """The fewest bits any real leaf of `value` certifies (`balls.certified_bits`) and
    that leaf's path; None when every one is exact."""
    found = None
    for path, t in leaves(value):
        if t.type.kind == "real" and t.data.dtype == object:
            bits = balls.certified_bits(t.data)
            if bits is not None and (found is None or bits < found[0]):
                found = (bits, path)
    return found


def _note(text: str) -> None:
    if shown(sys.stderr) is not None:
        sys.stderr.write(f"note: {text}\n")
