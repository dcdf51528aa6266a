"""psk-fuse: group chains of elementwise primitives into one loop nest each.

An elementwise op (one with a `scalar` kernel rule, dropout excepted) whose every use is
by one elementwise op of the same iteration space (the same axes) joins that op's
group; a group is named by its last op, the root. Members get `psk.group = <root site>`;
`psk-lower-to-kernel` then builds one nest a group, computing every member in the root's
type in registers and storing only the root. Fusion never changes which operations run,
only where their results live.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from presk.passes import Pass

from presk.ir.core import psk_type, site_of, walk_ops
from presk.prims import by_op


def fusible(op: ir.Operation) -> bool:
    prim = by_op(op.name)
    return prim is not None and prim.scalar is not None and prim.name != "dropout"


@dataclass(frozen=True)
class PskFuse(Pass):
    name = "psk-fuse"
    description = "group chains of elementwise ops (same axes, single consumer) into fusion groups"

    def run(self, module) -> None:
        for func in walk_ops(module, "func.func"):
            if "psk_kernel.kernel" in func.attributes:
                continue
            ops = [op.operation for op in func.regions[0].blocks[0].operations]
            # site -> the site of its group's root (sites, not ops, are the keys: an op's
            # hash in the bindings changes with its attributes)
            root: dict[str, str] = {}
            for op in reversed(ops):
                if not fusible(op):
                    continue
                users = {site_of(use.owner.operation) for use in op.results[0].uses}
                user = next(iter(users)) if len(users) == 1 else None
                if user in root:
                    user_op = next(u.owner.operation for u in op.results[0].uses)
                    same = psk_type(user_op.results[0]).axes == psk_type(op.results[0]).axes
                else:
                    same = False
                if same:
                    root[site_of(op)] = root[user]
                    op.attributes["psk.group"] = ir.StringAttr.get(root[user])
                else:
                    root[site_of(op)] = site_of(op)


PASS = PskFuse
