"""psk-pack: a contraction's operands copied to panels before the sum.

`operands=b` copies operand b, for each index of the leading axes, to a scratch panel
[J/n][K][n] (n the tile's columns), so the tile reads consecutive elements at every k
whatever b's layout: an NT contraction (attention's q·kᵀ) reads as NN, and can take
lanes. `ab` also copies a to [I/m][K][m]. `none` reads the operands where they are. A
copy changes no value: the bits stay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.passes import LayoutPass


@dataclass(frozen=True)
class PskPack(LayoutPass):
    name = "psk-pack"
    description = "copy a contraction's operands to panels before the sum (b, ab or none)"
    operands: str = "b"

    def change(self, layout):
        return replace(layout, pack=self.operands)


PASS = PskPack
