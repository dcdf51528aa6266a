"""psk-functions: whose exp and erf the f32 kernels compute, as a realization says.

`impl=presk` marks each `psk_kernel.call` of exp or erf in a kernel computing in f32
(an f32 or bf16 kernel) with `psk_kernel.impl = "presk"`, unless a loop carrying a value
encloses a call of that function in the kernel (a sum's, which stays scalar, where presk's
function, a long chain of f64 operations, is slower than the C library's; and a softmax's
exp of its output then stays the C library's too, as its sum's is): the kernel evaluator
then computes presk's own function (presk/kernel/functions.py) and `psk-kernel-to-affine`
writes the same operations in its place, which vector lanes can run (other bits than the
C library's: another realization, not a layout). `impl=libm` removes the marks. f64
kernels keep the C library's: presk has no f64 exp or erf of its own. `presk.stages`
runs it for a realization's `"functions": "presk"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from presk.passes import Pass

from presk.errors import UsageError
from presk.ir.ops import walk_ops
from presk.kernel.functions import FUNCTIONS, IMPL
from presk.kernel.loops import kernel_funcs
from presk.schemas import FUNCTION_IMPLS


@dataclass(frozen=True)
class PskFunctions(Pass):
    name = "psk-functions"
    description = "compute an f32 kernel's exp and erf as presk's own (impl=presk) or libm's"
    impl: str = "presk"

    def run(self, module) -> None:
        if self.impl not in FUNCTION_IMPLS:
            raise UsageError(f"psk-functions: impl={self.impl} is libm or presk")
        for f in kernel_funcs(module):
            if ir.StringAttr(f.attributes["psk_kernel.type"]).value == "f64":
                continue
            calls = {fn: [] for fn in FUNCTIONS}
            for call in walk_ops(f, "psk_kernel.call"):
                fn = ir.StringAttr(call.attributes["fn"]).value
                if fn in calls:
                    calls[fn].append(call)
            for found in calls.values():
                # one function, one implementation in a kernel: a softmax's exp of its sum
                # and of its output agree
                ours = self.impl == "presk" and not any(_in_a_sum(c) for c in found)
                for call in found:
                    if ours:
                        call.attributes[IMPL] = ir.StringAttr.get("presk", f.context)
                    elif IMPL in call.attributes:
                        del call.attributes[IMPL]


def _in_a_sum(op: ir.Operation) -> bool:
    """Whether a loop carrying a value (a sum, a maximum) encloses `op`."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "scf.for" and len(parent.results):
            return True
        parent = parent.parent
    return False


PASS = PskFunctions
