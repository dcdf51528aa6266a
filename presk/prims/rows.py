"""Row-wise primitives over one axis: `softmax`, `cross_entropy`, `sample`, and `embed`.

- `softmax[ax](x)` is exp(x − m) / Σ exp(x − m) along the axis, m the row's maximum;
  with a mask `softmax[ax](x, mask)` only the allowed positions take part (refused ones
  give 0), a mask that empties a row is an error at run time.
- `cross_entropy[ax](logits, targets)` is −log softmax(logits)[target] per row: the
  targets are an index tensor with the logits' axes but `ax`, and so is the result.
- `sample[ax](logits)` draws an index per row from softmax(logits), on the host, from the
  key of its site.
- `embed(table, tokens)` gathers rows of `table` ([V, …]) by the index tensor `tokens`:
  the result has the tokens' axes, then the table's axes after the first.
"""

from __future__ import annotations

from presk.ir.types import TensorType
from presk.prims.base import Prim, TypingError, broadcast_axes, check_unique_names, one_axis, without


def _softmax(types, attrs) -> TensorType:
    x = types[0]
    if not 0 <= attrs["axis"] < x.rank:
        raise TypingError(f"{x.text()} has no axis {attrs['axis']}")
    if len(types) == 2 and broadcast_axes(x, types[1]) != x.axes:
        raise TypingError(f"the mask {types[1].text()} does not fit {x.text()}")
    return x


def _cross_entropy(types, attrs) -> TensorType:
    logits, targets = types
    rows = without(logits, [attrs["axis"]])
    if targets.axes != rows.axes:
        raise TypingError(
            f"cross_entropy's targets must have the axes {rows.with_kind('index').text()}, "
            f"not {targets.text()}"
        )
    return rows


def _sample(types, attrs) -> TensorType:
    return without(types[0], [attrs["axis"]], kind="index")


def _embed(types, attrs) -> TensorType:
    table, tokens = types
    if table.rank == 0:
        raise TypingError(f"embed's table needs a first axis to gather along, not {table.text()}")
    return TensorType("real", check_unique_names(tokens.axes + table.axes[1:], "embed's result"))


PRIMS = [
    Prim("softmax", "psk.softmax", (1, 2), _softmax, bind=one_axis, attr_kinds={"axis": "i64"},
         kinds=("real", "bool")),
    Prim("cross_entropy", "psk.cross_entropy", (2, 2), _cross_entropy, bind=one_axis,
         attr_kinds={"axis": "i64"}, kinds=("real", "index")),
    Prim("sample", "psk.sample", (1, 1), _sample, bind=one_axis, attr_kinds={"axis": "i64"}),
    Prim("embed", "psk.embed", (2, 2), _embed, kinds=("real", "index")),
]
