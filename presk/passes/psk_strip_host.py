"""psk-strip-host: erase the host program, leaving a module of kernels for LLVM.

After `psk-lower-to-kernel` a module holds the host program (functions over PSK values
that launch kernels) beside the kernels. The host runs in Python; only the kernels (and
any plain function over builtin types, such as an entry wrapper) go on to the LLVM
dialect. A function is the host's when its signature has a PSK type or its body a PSK
op; a pattern on `func.func` erases each.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.ir.ops import walk_ops
from presk.passes import Pass, apply


def _is_host(f) -> bool:
    if "psk_kernel.kernel" in f.attributes:
        return False
    if "!psk." in str(f.attributes["function_type"]):
        return True
    return any(
        op.name.startswith("psk.") or op.name == "psk_kernel.launch" for op in walk_ops(f, "psk")
    )


def erase_host(f, rewriter) -> bool:
    if not _is_host(f):
        return False
    rewriter.erase_op(f)
    return True


@dataclass(frozen=True)
class PskStripHost(Pass):
    name = "psk-strip-host"
    description = "erase the host program (functions over PSK values), keeping the kernels"

    def run(self, module) -> None:
        apply([module], {"func.func": erase_host})


PASS = PskStripHost
