"""psk-fuse: group chains of elementwise primitives into one loop nest each.

An elementwise op (one with a `scalar` kernel rule, dropout excepted) whose every use is
by one elementwise op of the same iteration space (the same axes) joins that op's
group; a group is named by its last op, the root. Members get `psk.group = <root site>`;
`psk-lower-to-kernel` then builds one nest a group, computing every member in the root's
type in registers and storing only the root. Fusion never changes which operations run,
only where their results live. The groups are found by presk/core/fusion.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.core.fusion import group_roots
from presk.ir.ops import module_functions, site_of
from presk.passes import Pass


@dataclass(frozen=True)
class PskFuse(Pass):
    name = "psk-fuse"
    description = "group chains of elementwise ops (same axes, single consumer) into fusion groups"

    def run(self, module) -> None:
        for func in module_functions(module):
            if "psk_kernel.kernel" in func.attributes:
                continue
            root = group_roots(func)
            for op in func.regions[0].blocks[0].operations:
                group = root.get(site_of(op.operation))
                if group is not None and group != site_of(op.operation):
                    op.operation.attributes["psk.group"] = ir.StringAttr.get(group)


PASS = PskFuse
