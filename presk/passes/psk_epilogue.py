"""psk-epilogue: a bias add folded into the contraction kernel before it.

Where a contraction's output (the nest `nest`, or every one) is read only by a kernel
adding a bias of the same type, the two launches become one: the contraction kernel
adds the bias to each element before its store (presk/kernel/epilogue.py). In bf16 the
product is stored and read back first, as the add's kernel read it: the bits stay. A
nest named with no such add is refused (E7002).
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.kernel.epilogue import fold_epilogues
from presk.passes import Pass


@dataclass(frozen=True)
class PskEpilogue(Pass):
    name = "psk-epilogue"
    description = "fold the bias add after a contraction into the contraction's kernel"
    nest: str = ""

    def run(self, module) -> None:
        fold_epilogues(module, self.nest)


PASS = PskEpilogue
