"""Checkpoints: a parameter tree (and optimiser state) in a `.psk.d` container.

The arrays are the parameter leaves by dotted path, in the program's order and in the
type they were held in (float64 from the initializers or a float64 run; exact MPFR
numbers from a run of the reference, so resuming it loses no digit);
`meta` records the program, entry, dims and consts they were written for. A checkpoint
is read only into exactly the layout the program has: the same paths with the same
shapes, each array of a dtype its leaf holds (E9005 otherwise, naming the first
difference). Integer weights are never stored: a realization makes them from the reals.
"""

from __future__ import annotations

import numpy as np

from presk.errors import FileFormatError
from presk.ir.types import PskType
from presk.ir.types import leaves as leaf_types
from presk.runtime import pskd
from presk.runtime.values import Tensor, Value, build, leaves


def save(path: str, params: Value, meta: dict, extra: dict[str, Value] | None = None) -> None:
    """Write `params` (and named extra trees such as optimiser moments) to `path`."""
    arrays = {f"params/{p}": t.data for p, t in leaves(params)}
    for name, tree in (extra or {}).items():
        for p, t in leaves(tree):
            arrays[f"{name}/{p}"] = np.asarray(t.data)
    pskd.write(path, pskd.Container("checkpoint", meta, arrays))


def load(path: str, param_type: PskType, prefix: str = "params") -> tuple[Value, pskd.Container]:
    """The parameter tree stored at `path`, refused unless it is the program's layout."""
    c = pskd.read(path)
    if c.kind != "checkpoint":
        raise FileFormatError(f"{path}: a {c.kind} file, not a checkpoint", code="E9005")
    return tree_from(c, param_type, prefix, path), c


# The dtypes a leaf of each kind is held in: reals in a machine type or exact, as written
LEAF_DTYPES = {
    "real": ("float64", "float32", "bfloat16", "mpfr"),
    "index": ("int64",),
    "bool": ("bool",),
}


def _mismatch(p: str, leaf, stored: dict[str, np.ndarray]) -> str | None:
    """Why the stored array at `p` cannot be the program's leaf, or None."""
    if p not in stored:
        return f"has no parameter {p} ({leaf.text()}) of this program"
    a = stored[p]
    if tuple(a.shape) != leaf.shape:
        return f"parameter {p} has shape {list(a.shape)}, the program's is {list(leaf.shape)}"
    if pskd.dtype_name(a) not in LEAF_DTYPES[leaf.kind]:
        held = " or ".join(LEAF_DTYPES[leaf.kind])
        return f"parameter {p} is stored as {pskd.dtype_name(a)}, {leaf.text()} is held as {held}"
    return None


def tree_from(c: pskd.Container, t: PskType, prefix: str, path: str) -> Value:
    stored = {k[len(prefix) + 1 :]: v for k, v in c.arrays.items() if k.startswith(prefix + "/")}
    want = dict(leaf_types(t))
    for p, leaf in want.items():
        why = _mismatch(p, leaf, stored)
        if why:
            raise FileFormatError(f"{path}: {why}", code="E9005")
    extra = sorted(set(stored) - set(want))
    if extra:
        raise FileFormatError(
            f"{path}: has parameter {extra[0]}, which this program lacks", code="E9005"
        )
    return build(t, lambda p, leaf: Tensor(leaf, stored[p]))
