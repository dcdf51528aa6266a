"""Fusion groups: chains of elementwise primitives that run as one loop nest.

An elementwise op (one with a `scalar` kernel rule that draws nothing: dropout's mask is
an input of its own kernel) whose every use is by one elementwise op of the same
iteration space (the same axes) joins that op's group; a group is named by its last op,
the root. `psk-fuse` marks the groups; `psk-vjp` (presk/core/autodiff.py) reads them to
keep a function's forward fused as the function is.
"""

from __future__ import annotations

from mlir import ir

from presk.ir.ops import psk_type, site_of
from presk.prims import by_op


def fusible(op: ir.Operation) -> bool:
    prim = by_op(op.name)
    return prim is not None and prim.scalar is not None and prim.draws is None


def group_roots(func) -> dict[str, str]:
    """Each fusible op of a host `func.func` by site -> the site of its group's root (a
    lone op is its own root). Sites, not ops, are the keys: an op's hash in the bindings
    changes with its attributes."""
    root: dict[str, str] = {}
    for op in reversed([op.operation for op in func.regions[0].blocks[0].operations]):
        if not fusible(op):
            continue
        users = [use.owner.operation for use in op.results[0].uses]
        user = site_of(users[0]) if len({site_of(u) for u in users}) == 1 else None
        joins = user in root and psk_type(users[0].results[0]).axes == psk_type(op.results[0]).axes
        root[site_of(op)] = root[user] if joins else site_of(op)
    return root


def interior_sites(func) -> set[str]:
    """The sites of a function's ops whose values stay inside their group (in registers,
    never stored): every member but the root. psk-vjp recomputes these for the backward
    rather than keep them, so a function's `fwd` is fused as the function is."""
    return {site for site, root in group_roots(func).items() if site != root}
