"""`presk.passes.apply`, the rewrite-pattern driver of the passes that rewrite one op at a
time: the order it visits ops in (inner loops before outer ones, a block in order), which
psk-hoist-loads, psk-promote-registers and psk-vectorize rely on, and what it reports."""

from __future__ import annotations

from mlir import ir
from presk.passes import apply

from presk.ir.context import new_context

NEST = """
func.func @k(%a: memref<4x4xf64>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      %x = affine.load %a[%i, %j] {tag = "inner"} : memref<4x4xf64>
    } {tag = "j"}
    %y = affine.load %a[%i, 0] {tag = "after"} : memref<4x4xf64>
  } {tag = "i"}
  %z = affine.load %a[0, 0] {tag = "last"} : memref<4x4xf64>
  return
}
"""


def _tag(op) -> str:
    return ir.StringAttr(op.attributes["tag"]).value


def test_apply_visits_inner_ops_first_and_each_block_in_order():
    seen: list[str] = []

    def record(op, rewriter) -> bool:
        seen.append(_tag(op))
        return False

    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(NEST)
        rewrote = apply([module.operation], {"affine.for": record, "affine.load": record})
    assert seen == ["inner", "j", "after", "i", "last"]
    assert rewrote is False


def test_apply_says_whether_a_pattern_rewrote():
    def erase_last(op, rewriter) -> bool:
        if _tag(op) != "last":
            return False
        rewriter.erase_op(op)
        return True

    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(NEST)
        assert apply([module.operation], {"affine.load": erase_last}) is True
        assert '"last"' not in str(module)
        assert apply([module.operation], {"affine.load": erase_last}) is False
