"""psk-keep-libm-calls: the C library functions kernels call stay calls, unfolded.

LLVM knows the C library: at opt level 2 or 3 it rewrites pow(x, 2) as x·x, pow(x, 0.5) as a
square root, pow(2, x) as exp2(x), and folds a call on constants with its own
arithmetic. glibc's pow is not correctly rounded, so each rewrite may change a result's
last bit against the kernel evaluator, which calls the C library. This pass marks every
function the module declares without a body (the C library functions that
`convert-math-to-libm` calls) `nobuiltin`, which tells LLVM to call it as it is: a
pattern on `llvm.func`. Runs on the LLVM dialect.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.passes import Pass, apply


def mark_nobuiltin(f, rewriter) -> bool:
    if f.regions[0].blocks:  # a definition: the kernel itself
        return False
    with f.context:
        f.attributes["passthrough"] = ir.ArrayAttr.get([ir.StringAttr.get("nobuiltin")])
    return True


@dataclass(frozen=True)
class PskKeepLibmCalls(Pass):
    name = "psk-keep-libm-calls"
    description = "mark the C library functions kernels call nobuiltin, so LLVM keeps the calls"

    def run(self, module) -> None:
        apply([module], {"llvm.func": mark_nobuiltin})


PASS = PskKeepLibmCalls
