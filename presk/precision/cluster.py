"""Samples on a Dask distributed cluster: calibration's (`presk calibrate --scheduler`),
and the exact outputs a solve measures its candidates against (`presk solve
--scheduler`).

Dask is optional (`pip install presk[cluster]`): it is imported here, when a scheduler
is named, and nowhere else, so presk installs and runs without it. One sample is one
task; each worker loads the program from its source text once a thread.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

from presk.errors import UsageError
from presk.precision.calibrate import Job, Spread, sample_sites


def _distributed():
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise UsageError(
            "--scheduler needs dask.distributed, which is not installed: "
            "pip install 'presk[cluster]'",
            code="E0004",
        ) from None


def on_cluster(address: str, task=sample_sites) -> Spread:
    """Samples sent as tasks to the Dask scheduler at `address`, `task(job, index)` run
    for each (a sample's sites, or its exact output); E0001 if it is not an address Dask
    takes, E0004 if nothing answers there."""
    distributed = _distributed()
    scheme, _ = distributed.comm.parse_address(address)
    try:  # before a Client: one given an unknown scheme hangs a minute on its way out
        distributed.comm.registry.get_backend(scheme)
    except ValueError as e:
        raise UsageError(f"--scheduler {address}: {e}") from None

    def spread(job: Job, indices: list[int]) -> Iterator[tuple[int, dict]]:
        try:
            client = distributed.Client(address, set_as_default=False)
        except OSError as e:  # a refused or timed-out connection
            raise UsageError(
                f"cannot reach the scheduler at {address}: {e}", code="E0004"
            ) from None
        with client:
            futures = client.map(task, [job] * len(indices), indices, pure=False)
            for i, future in zip(indices, futures, strict=True):
                yield i, future.result()

    return spread
