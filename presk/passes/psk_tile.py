"""psk-tile: the register tile of contraction kernels.

Moves a contraction (every one, or the nest `nest` names) to the tiled form with m rows
× n columns of accumulators held in registers across the sum (m in 1, 2, 4; n in 4, 8,
16, 32, 64), the operands' elements each tile shares loaded once a k. The tile must
divide the output's last two axes (E7002). No sum changes order: the bits stay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.passes import LayoutPass


@dataclass(frozen=True)
class PskTile(LayoutPass):
    name = "psk-tile"
    description = "hold an m x n tile of a contraction's accumulators in registers (tiled form)"
    m: int = 1
    n: int = 8

    def change(self, layout):
        return replace(layout, form="tiled", tile=(self.m, self.n))


PASS = PskTile
