"""The arguments of an envelope's samples, so a calibration and a later measurement on
the same envelope (`presk check --measure`) run the entry on exactly the same numbers.

Sample `index` takes the parameters from `--weights`, else the initializers at the seed;
its inputs are the index-th batch of B consecutive training windows of `--data` (B the
batch axis of the entry's tokens), else drawn from the seed plus the index. Its random
draws (a `sample` in the entry) are keyed by the same seed plus the index.
"""

from __future__ import annotations

import numpy as np

from presk.api import Core, to_numpy
from presk.errors import BindingError
from presk.precision.envelope import Meta
from presk.runtime.inputs import arguments
from presk.train.data import Windows, next_token_pair
from presk.train.loop import check_token_entry


def sample_seed(meta: Meta, index: int) -> int:
    """The seed of sample `index`'s drawn inputs and random draws."""
    return meta.seed + index


def sample_arguments(core: Core, meta: Meta, index: int) -> list:
    """The arguments of sample `index` as the API's `Compiled` takes them (numpy arrays,
    the parameters first, as a dict by path, for a module's function)."""
    params = core.params(meta.seed, meta.weights)
    if meta.data is None:
        inputs = [to_numpy(v) for v in arguments(core.view, sample_seed(meta, index), None)]
    else:
        inputs = list(_windows(core, meta.data, index))
    return ([params] if params is not None else []) + inputs


def _windows(core: Core, path: str, index: int):
    """(tokens, targets) of the index-th batch of consecutive training windows (E3011
    past the last full batch)."""
    data = Windows.load(path)
    t, vocab = check_token_entry(core.view, data)
    batch = t.shape[0]
    if (index + 1) * batch > len(data.train):
        raise BindingError(
            f"sample {index} reads training windows {index * batch} to {(index + 1) * batch - 1}"
            f" of {path}, which has {len(data.train)}",
            code="E3011",
        )
    windows = data.train[index * batch : (index + 1) * batch].astype(np.int64)
    return next_token_pair(windows, vocab)
