"""psk-sum-order: the order in which a contraction sums its k, as a realization names it.

`order` is a realization's order for the nest `nest` names (every contraction if
empty): `sequential` (the lowered kernel's, unchanged), `blocked(W)` (the tiled form's
sum in k-blocks of W, the block loop innermost: the same bits) or `interleaved(P)` (P
partial sums, element k going to partial k mod P: other bits, another realization).
`presk.stages.kernel` runs one for each site of a realization's `order`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.errors import UsageError
from presk.passes import LayoutPass

KINDS = ("blocked", "interleaved")


@dataclass(frozen=True)
class PskSumOrder(LayoutPass):
    name = "psk-sum-order"
    description = "sum a contraction's k in a realization's order: blocked(W) or interleaved(P)"
    order: str = "sequential"

    def run(self, module) -> None:
        if self.order != "sequential":
            self._parsed()  # a malformed order is refused even where no kernel has a layout
            super().run(module)

    def change(self, layout):
        kind, width = self._parsed()
        tiled = layout if layout.form == "tiled" else replace(layout, form="tiled", tile=(1, 1))
        ij = tiled.order.replace("K", "")
        if kind == "blocked":
            return replace(tiled, kblock=width, order=ij + "K")
        return replace(tiled, partials=width, kblock=0, order=ij)

    def _parsed(self) -> tuple[str, int]:
        kind, _, rest = self.order.partition("(")
        digits = rest[:-1] if rest.endswith(")") else ""
        if kind not in KINDS or not digits.isdigit() or int(digits) < 1:
            raise UsageError(
                f"psk-sum-order: order={self.order} is sequential, blocked(W) or "
                "interleaved(P), W and P whole numbers from 1"
            )
        return kind, int(digits)


PASS = PskSumOrder
