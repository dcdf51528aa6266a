"""Plans: a layout for each contraction nest, read from `--plan @P.json`.

A plan (`--plan @P.json`) is a realization and a layout for each nest it names:

    {"realize": "f32",
     "layout": {"Linear.apply/%0": {"form": "tiled", "tile": [4, 16], "kblock": 128,
                                     "order": "IJK", "lanes": 8, "pack": "b",
                                     "split": [0, 2]}}}

Fields a nest's entry leaves out keep the kernel's default; a split is `[depth, workers]`
or `{"depth": d, "workers": p}`, and `"split": "none"` keeps the nest on one worker;
`"epilogue": true` folds the bias add after the nest into its kernel
(presk/kernel/epilogue.py). presk/schemas.py holds the plan's schema.

psk-plan (presk/passes/psk_plan.py) applies a plan; the cost model writes one
(presk/kernel/planner.py).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import replace

from presk.errors import UsageError
from presk.kernel.contraction import Layout
from presk.realize import read_json
from presk.schemas import plan


def read_plan(path: str) -> dict:
    """A plan file, checked against its schema (presk/schemas.py; E7001 names the field)."""

    return read_json(path, plan())


def plan_realization(path: str) -> str | None:
    """The machine type a plan (`plan_path`'s value) names in its `realize`, if any:
    the plans that are not files name none."""
    return None if is_named(path) else read_plan(path).get("realize")


def layout_change(entry: dict) -> Callable[[Layout], Layout]:
    """The change a plan's entry for a nest (checked by its schema) makes to a layout."""
    values = {k: v for k, v in entry.items() if k != "epilogue"}  # apply_plan folds it
    if "tile" in values:
        values["tile"] = tuple(values["tile"])
    if "split" in values:
        values["split"] = split_of(values["split"])
    return lambda layout: replace(layout, **values)


def split_of(split) -> tuple[int, int] | None:
    """A plan's split: "none", [depth, workers] or {"depth": d, "workers": p}."""
    if split == "none":
        return None
    if isinstance(split, dict):
        return (split["depth"], split["workers"])
    return tuple(split)


# The plans that are not files: the cost model's layouts for this machine, each nest's
# default layout, and the fastest of the cost model's best points as measured here
# (presk/backends/tuning.py), with a bound in seconds on the measuring (`tuned:S`).
AUTO = "auto"
DEFAULT = "default"
TUNED = "tuned"
NAMED = (AUTO, DEFAULT, TUNED)


def is_tuned(plan: str | None) -> bool:
    """Whether a plan (`plan_path`'s value) is `tuned` or `tuned:S`."""
    return plan is not None and (plan == TUNED or plan.startswith(TUNED + ":"))


def is_named(plan: str) -> bool:
    """Whether a plan (`plan_path`'s value) is one of the plans that are not files."""
    return plan in NAMED or is_tuned(plan)


def tuning_budget(plan: str) -> float | None:
    """The seconds a `tuned:S` plan may spend measuring; None for `tuned` (the default
    bound) and for every other plan."""
    return float(plan.partition(":")[2]) if plan.startswith(TUNED + ":") else None


def plan_path(arg: str) -> str:
    """`auto`, `default`, `tuned`, `tuned:S` (S seconds, a number from 0, bounding the
    measuring), or a plan file: `@P.json` (the seed's spelling) or a bare path (a file
    named `auto` is `@auto`)."""
    if arg in NAMED:
        return arg
    if arg.startswith(TUNED + ":"):
        seconds = arg.partition(":")[2]
        try:
            bound = float(seconds)
        except ValueError:
            bound = math.nan
        if not (math.isfinite(bound) and bound >= 0):
            raise UsageError(
                f"plan {arg}: tuned:S bounds the measuring to S seconds, a number from 0"
            )
        return arg
    path = arg[1:] if arg.startswith("@") else arg
    if not os.path.exists(path):
        raise UsageError(f"cannot read plan {path}: no such file", code="E0002")
    return path
