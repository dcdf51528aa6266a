"""JSON Schemas of the realization record and the plan, and checking a value against one.

A schema node may carry a `description` (the root always does): the message of a
violation inside it, with `{value}` (the offending value as JSON) or `{value!r}`, and
`{field}`. A violation is reported at the deepest described node on its way, as one
line `FILE: PATH: MESSAGE` (E7001). PATH is the keys down to that node, joined by
spaces; a message that names its `{field}` takes the last key out of the path, so a
quantised weight's bits read `R.json: quant w: bits is 8 or 4, not 6`.
"""

from __future__ import annotations

import json
from functools import cache

from presk.errors import RealizationError
from presk.jsontext import first_violation
from presk.kernel.contraction import ORDERS, PACKS, ROW_FORMS
from presk.kernel.machine import TYPES

PARAM_TYPES = ("f32", "bf16")  # a parameter's type (f64 is every parameter's already)
SHOWN = 60  # characters of an offending value a message shows


def _whole(least: int) -> dict:
    """A JSON integer (not 8.0) of at least `least`."""
    return {"type": "integer", "minimum": least}


def _object(description: str, properties: dict, unknown: str = "field") -> dict:
    """An object of `properties` alone: any other key is an `unknown` field."""
    names = list(properties)
    return {
        "type": "object",
        "description": description,
        "propertyNames": {
            "enum": names,
            "description": f"unknown {unknown} {{value!r}} (fields: {', '.join(names)})",
        },
        "properties": properties,
    }


def _field_of(values) -> dict:
    shown = ", ".join(values)
    return {"enum": list(values), "description": f"{{field}} is one of {shown}, not {{value}}"}


def _sites_to(value: dict, what: str) -> dict:
    return {
        "type": "object",
        "additionalProperties": value,
        "description": f"{{field}} is an object mapping {what}, not {{value}}",
    }


def _type(types) -> dict:
    shown = ", ".join(types)
    return {"enum": list(types), "description": f"unknown type {{value!r}} (types: {shown})"}


# W and P have at most 9 digits: a sum that long is beyond any kernel, and int() of the
# digits stays cheap
_ORDER = {
    "type": "string",
    "pattern": r"^(sequential|blocked\([1-9][0-9]{0,8}\)|interleaved\([1-9][0-9]{0,8}\))$",
    "description": "{value!r} is sequential, blocked(W) or interleaved(P), W and P whole "
    "numbers from 1 (at most 9 digits)",
}
_CONTRACTIONS = ("fma", "none")
FUNCTION_IMPLS = ("presk", "libm")  # whose exp, erf and tanh an f32 kernel calls
# every contraction's ("fma"), or by site with "default" for the sites not named
_CONTRACT = {
    "anyOf": [
        {"enum": list(_CONTRACTIONS)},
        {"type": "object", "additionalProperties": _field_of(_CONTRACTIONS)},
    ],
    "description": '{field} is "fma", "none" or an object mapping sites (and "default") to '
    '"fma" or "none", not {value}',
}
_QUANT = {
    **_object(
        'a quantised weight is an object {{"bits": 8 or 4, "over": …, "scheme": …}}, not {value}',
        {
            "bits": {
                "type": "integer",
                "enum": [8, 4],
                "description": "{field} is 8 or 4, not {value}",
            },
            "over": {
                "type": ["string", "integer"],
                "description": "{field} names an axis or gives its position from the end, "
                "not {value}",
            },
            "scheme": {
                "enum": ["absmax", "pow2"],
                "description": "{field} is absmax or pow2, not {value!r}",
            },
        },
    ),
    "required": ["bits"],
}

REALIZATION = _object(
    "a realization is a JSON object",
    {
        "default": _type(TYPES),
        "storage": _sites_to(_type(TYPES), "sites to types"),
        "accum": _sites_to(_type(TYPES), "sites to types"),
        "order": _sites_to(_ORDER, "sites to orders"),
        "contract": _CONTRACT,
        "functions": {
            "enum": list(FUNCTION_IMPLS),
            "description": '{field} is "presk" (presk\'s own exp, erf and tanh, the default) or '
            '"libm" (the C library\'s), not {value!r}',
        },
        "envelope": {"type": "object", "description": "{field} is an object, not {value}"},
        "params": _sites_to(_type(PARAM_TYPES), "parameter paths to types"),
        "quant": _sites_to(_QUANT, "parameter paths to quantisations"),
    },
)


@cache
def plan() -> dict:
    depth, workers = _whole(0), _whole(1)
    split = {
        "anyOf": [
            {"const": "none"},
            {"type": "array", "prefixItems": [depth, workers], "minItems": 2, "items": False},
            {
                "type": "object",
                "properties": {"depth": depth, "workers": workers},
                "required": ["depth", "workers"],
                "additionalProperties": False,
            },
        ],
        "description": '{field} is "none", [depth, workers] or {{"depth": d, "workers": p}}, '
        "depth a whole number from 0 and workers from 1, not {value}",
    }
    nest = _object(
        "a nest's layout is an object, not {value}",
        {  # in the order of their names, as an unknown field's message lists them
            "epilogue": {"type": "boolean", "description": "{field} is true or false, not {value}"},
            "form": _field_of(("rowwise", "tiled", *ROW_FORMS)),
            "kblock": {**_whole(0), "description": "{field} is a whole number from 0, not {value}"},
            "lanes": {**_whole(1), "description": "{field} is a whole number from 1, not {value}"},
            "order": _field_of(ORDERS),
            "pack": _field_of(PACKS),
            "split": split,
            "tile": {
                "type": "array",
                "items": _whole(1),
                "minItems": 2,
                "maxItems": 2,
                "description": "{field} is [m, n], two whole numbers from 1, not {value}",
            },
        },
        unknown="layout field",
    )
    return _object(
        "a plan is an object with a layout object",
        {
            "realize": {**_type(TYPES), "description": "{field} is f64, f32 or bf16, not {value}"},
            "layout": _sites_to(nest, "nests to layouts"),
        },
    )


def check(value, schema: dict, file: str, code: str = "E7001") -> None:
    """Refuse `value` (read from `file`) unless `schema` holds of it: `code` (E7001, an
    envelope's E7003) with the path and message of the first violation."""
    error = first_violation(value, schema)
    if error is not None:
        raise RealizationError(_message(error, schema, value, file), code=code)


def _message(error, schema: dict, document, file: str) -> str:
    node, depth, names_key = _described(schema, list(error.absolute_schema_path))
    keys = list(error.absolute_path)[:depth]
    value = error.instance if names_key else _at(document, keys)
    text = node["description"]  # a schema's root has one
    field = keys.pop() if "{field}" in text and keys else ""
    message = text.format(value=_Shown(value), field=field)
    return ": ".join([file, *([" ".join(map(str, keys))] if keys else []), message])


def _described(schema: dict, schema_path: list) -> tuple[dict, int, bool]:
    """The deepest node with a description on the way down `schema_path`: the node, the
    depth of the instance it describes, and whether it describes a key (propertyNames)."""
    node, depth, names_key = schema, 0, False
    found = (schema, 0, False)
    steps = iter(schema_path[:-1])  # the last is the keyword that failed
    for keyword in steps:
        if keyword in ("properties", "prefixItems"):
            node, depth = node[keyword][next(steps)], depth + 1
        elif keyword in ("additionalProperties", "items"):
            node, depth = node[keyword], depth + 1
        elif keyword == "anyOf":
            node = node[keyword][next(steps)]
        elif keyword == "propertyNames":
            node, names_key = node[keyword], True
        else:
            break  # a keyword the schemas here do not use
        if "description" in node:
            found = (node, depth, names_key)
    return found


def _at(document, keys: list):
    for key in keys:
        document = document[key]
    return document


class _Shown:
    """An offending value as a message shows it: `{value}` as JSON, `{value!r}` as
    Python's repr (a string in quotes), either cut to SHOWN characters."""

    def __init__(self, value):
        self.value = value

    def __str__(self) -> str:
        return _cut(json.dumps(self.value, ensure_ascii=False))

    def __repr__(self) -> str:
        return _cut(repr(self.value))


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


# the solve's rungs: the float ladder, then integer weights (precision/integers.py)
_RUNGS = ("f64", "f32", "bf16", "int8", "int8/pow2", "int4", "int4/pow2")
_OUTCOMES = ("taken", "refused", "slower", "kept", "rejected", "culprit", "measured", "held out")


def _record(what: str, properties: dict, optional: tuple[str, ...] = (), unknown="field") -> dict:
    """An object of exactly `properties`, all required but `optional`."""
    names = ", ".join(properties)
    return {
        **_object(f"{what} has the fields {names}, not {{value}}", properties, unknown),
        "required": [k for k in properties if k not in optional],
    }


def _number_or_inf(what: str, nullable: bool = False) -> dict:
    kinds = [{"type": "number"}, {"const": "inf"}] + ([{"type": "null"}] if nullable else [])
    null = ", or null" if nullable else ""
    return {
        "anyOf": kinds,
        "description": f'{{field}} is {what}: a number or "inf"{null}, not {{value}}',
    }


def _strings(what: str) -> dict:
    return {
        "type": "array",
        "items": {"type": "string"},
        "description": f"{{field}} is a list of {what}, not {{value}}",
    }


def _count(what: str) -> dict:
    return {**_whole(0), "description": f"{{field}} is {what}, a whole number, not {{value}}"}


_KINDS = ("value", "parameter")
_MOVE = _record(
    "a move",
    {
        "move": _field_of(("narrow", "widen")),
        "key": {"type": "string", "description": "{field} is a string, not {value}"},
        "kind": _field_of(_KINDS),
        "from": _field_of(_RUNGS),
        "to": _field_of(_RUNGS),
        "outcome": _field_of(_OUTCOMES),
        "estimate": _number_or_inf("the estimate after the move"),
        "gap": _number_or_inf("the measured gap that decided the move"),
    },
    optional=("gap",),  # only a move a measurement decided has one
)
_PRICED = _record(
    "a priced value",
    {
        "kind": _field_of(_KINDS),
        "elements": _count("its elements"),
        "term": _number_or_inf("its term in its final type", nullable=True),
        "ints": _record(
            "ints",
            {rung: _count("its bytes at that rung") for rung in _RUNGS[3:]},
            optional=_RUNGS[3:],
            unknown="rung",
        ),
        "over": {"type": "integer", "description": "{field} is an axis from the end, not {value}"},
    },
    optional=("ints", "over"),  # a parameter priced in integers: bytes and scale axis
)
# `presk solve`'s R.moves.json: every move, and what `presk explain` reads beside them
MOVES = _record(
    "a moves file (presk solve's R.moves.json)",
    {
        "realization": {"type": "string", "description": "{field} is a file name, not {value}"},
        "moves": {
            "type": "array",
            "items": _MOVE,
            "description": "{field} is a list of moves, not {value}",
        },
        "budget": _number_or_inf("the absolute budget"),
        "target": _number_or_inf("what the estimate aims at"),
        "estimate": _number_or_inf("the final estimate"),
        "gap": _number_or_inf("the final measured gap"),
        "threshold": {
            "type": ["number", "null"],
            "description": "{field} is budget/margin with --narrow, else null, not {value}",
        },
        "all_f64": _count("the all-f64 traffic in bytes"),
        "min_gain": {
            "type": "number",
            "minimum": 0,
            "description": "{field} is θ, a number from 0, not {value}",
        },
        "priced": _sites_to(_PRICED, "keys to priced values"),
        "offered": _strings("keys"),
        "left_out": _record(
            "left_out",
            {rule: _strings("keys") for rule in ("rule 1", "rule 2", "unreached")},
            unknown="rule",
        ),
    },
)
