"""psk-contract: whether a contraction fuses its multiply and add, as a realization says.

`contract=fma` builds the nest `nest` names (every contraction if empty) again with each
acc + a·b one `math.fma`, rounded once (other bits: another realization, not a layout);
`contract=none` with the product and the sum each rounded, as lowered. A softmax has no
multiply-add to fuse (E7002). `presk.stages.kernel` runs one for a realization's
`contract` default and one for each site it names, before its orders.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk.errors import UsageError
from presk.passes import LayoutPass

CONTRACTIONS = ("fma", "none")


@dataclass(frozen=True)
class PskContract(LayoutPass):
    name = "psk-contract"
    description = "fuse a contraction's multiply and add into one fma (contract=fma) or not"
    contract: str = "fma"

    def run(self, module) -> None:
        if self.contract not in CONTRACTIONS:
            raise UsageError(f"psk-contract: contract={self.contract} is fma or none")
        super().run(module)

    def change(self, layout):
        return replace(layout, fma=self.contract == "fma")


PASS = PskContract
