"""psk-fma-to-llvm: a realization's fused multiply-adds as LLVM's fma intrinsic.

`convert-math-to-libm` would make each `math.fma` a call of the C library's fma (and a
vector's, a call per lane); `llvm.intr.fma` is the same correctly rounded operation, which
LLVM issues as the machine's FMA instruction on scalars and vectors alike. Runs before
`convert-math-to-libm` in `stages.LLVM_PIPELINE`; a pattern on `math.fma`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.passes import Pass, apply


def fma_intrinsic(op, rewriter) -> bool:
    with op.context, op.location, ir.InsertionPoint(op):
        fused = ir.Operation.create(
            "llvm.intr.fma", results=[op.result.type], operands=list(op.operands)
        )
    op.result.replace_all_uses_with(fused.result)
    rewriter.erase_op(op)
    return True


@dataclass(frozen=True)
class PskFmaToLlvm(Pass):
    name = "psk-fma-to-llvm"
    description = "lower math.fma to llvm.intr.fma, not to a C library call"

    def run(self, module) -> None:
        apply([module], {"math.fma": fma_intrinsic})


PASS = PskFmaToLlvm
