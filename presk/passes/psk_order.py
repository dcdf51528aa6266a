"""psk-order: the order of a contraction's block loops.

IJ runs the tiles row block by row block, JI column block by column block; with a
k-block, a permutation of IJK places the block loop over k among them (outside a tile
loop, the tile's accumulators go through the output between blocks). Each tile sums
its k in increasing order whatever the order: the bits stay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.passes import LayoutPass


@dataclass(frozen=True)
class PskOrder(LayoutPass):
    name = "psk-order"
    description = "order a tiled contraction's block loops (IJ, JI, or a permutation of IJK)"
    order: str = "IJ"

    def change(self, layout):
        return replace(layout, order=self.order)


PASS = PskOrder
