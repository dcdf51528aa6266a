"""psk-kblock: the sum of contraction kernels in blocks of k.

The tiled form's sum runs in blocks of `size` k (0: one block), the block loop placed
by `order` among the tile loops (default: innermost, IJK); each tile's accumulators are
stored to the output after a block and loaded back before the next, the first block
starting from 0. In f64 and f32 the stores keep the accumulators' bits; in bf16 they
would round them, and the row-wise form has no accumulators: both refused (E7002).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.passes import LayoutPass


@dataclass(frozen=True)
class PskKblock(LayoutPass):
    name = "psk-kblock"
    description = "run a tiled contraction's sum in blocks of k, accumulators stored between"
    size: int = 128
    order: str = ""

    def change(self, layout):
        order = self.order or layout.order.replace("K", "") + ("K" if self.size else "")
        return replace(layout, kblock=self.size, order=order)


PASS = PskKblock
