"""psk-functions: whose exp, erf and tanh the f32 kernels compute, as a realization says.

`impl=presk` marks every `psk_kernel.call` of exp, erf or tanh in a kernel computing in f32 (an
f32 or bf16 kernel) with `psk_kernel.impl = "presk"`: the kernel evaluator then computes
presk's own function (presk/kernel/functions.py) and `psk-kernel-to-affine` writes the
same operations in its place, which vector lanes run where the loop has them (a sum's
loop runs an element at a time; the softmax's and cross-entropy's nests compute a row's
exponentials in a loop of their own, presk/kernel/rows.py). Every call of a kernel, so the
bits do not depend on which loop holds one: a softmax's forms agree. `impl=libm` removes
the marks. f64 kernels keep the C library's: presk has no f64 functions of its own.
`presk.stages` runs it unless a realization says `"functions": "libm"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.errors import UsageError
from presk.kernel.functions import mark
from presk.kernel.loops import kernel_funcs
from presk.passes import Pass
from presk.schemas import FUNCTION_IMPLS


@dataclass(frozen=True)
class PskFunctions(Pass):
    name = "psk-functions"
    description = "compute an f32 kernel's exp, erf and tanh as presk's own (impl=presk) or libm's"
    impl: str = "presk"

    def run(self, module) -> None:
        if self.impl not in FUNCTION_IMPLS:
            raise UsageError(f"psk-functions: impl={self.impl} is libm or presk")
        for f in kernel_funcs(module):
            if ir.StringAttr(f.attributes["psk_kernel.type"]).value != "f64":
                mark(f, self.impl == "presk")


PASS = PskFunctions
