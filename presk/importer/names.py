"""The way back from an imported program to its graph: the ONNX initializer each
parameter holds, kept in the metadata (key `onnx_names`) of the weights `presk import`
writes beside the program, and read by `presk params --names onnx`, which writes the
parameters under those names so that they load back into the graph, or into the model
it was exported from.

Apart from `program` so that reading the names imports no ONNX.
"""

from __future__ import annotations

import json

from presk import jsontext

PROGRAM = "model.psk"
WEIGHTS = "params.safetensors"  # beside PROGRAM, with the names in its metadata
KEY = "onnx_names"
SCHEMA = {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}}


def metadata(names: dict[str, str]) -> dict[str, str]:
    """The weights file's metadata entry for `names` (parameter path -> initializer)."""
    return {KEY: json.dumps(names)}


def parse(text: str) -> dict[str, str]:
    """The names in a weights file's `onnx_names` entry; ValueError saying what is wrong."""
    value = jsontext.parse(text, 2)
    violation = jsontext.first_violation(value, SCHEMA)
    if violation is not None:
        where = "".join(f"[{p!r}]" for p in violation.absolute_path)
        raise ValueError(f"{KEY}{where}: {violation.message}")
    if len(set(value.values())) != len(value):
        raise ValueError(f"{KEY} names one initializer for two parameters")
    return value
