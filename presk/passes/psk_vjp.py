"""psk-vjp: reverse-mode derivatives, as PSK-Core functions.

Expects PSK-Core with `psk.grad` and `psk.vjp` ops (from `grad(f)` and `f.vjp`); leaves
each replaced by a call of `F.grad`/`F.vjp`, and writes `F.fwd` and `F.bwd` for every
function F they reach, with `remat=store` (keep the forward's values) or `recompute`
(replay the forward in the backward): the same bits either way. The transformation is
presk/core/autodiff.py; this pass checks its option and runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.core.autodiff import expand
from presk.errors import UsageError
from presk.passes import Pass


@dataclass(frozen=True)
class PskVjp(Pass):
    name = "psk-vjp"
    description = "expand psk.grad and psk.vjp into forward and backward PSK-Core functions"
    remat: str = "store"

    def run(self, module) -> None:
        if self.remat not in ("store", "recompute"):
            raise UsageError(f"psk-vjp: remat is store or recompute, not {self.remat!r}")
        expand(module, self.remat)


PASS = PskVjp
