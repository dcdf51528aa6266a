"""JSON that presk reads from files (realizations, plans, containers' headers): parsed
within bounds, and checked against a JSON Schema with strict integers.

Python's json recurses once a level and converts integers of any length, so a hostile
file could exhaust the stack or spend minutes in `int()`: the text is measured first
(linear time), and integers longer than MAX_DIGITS digits, NaN and Infinity (not JSON)
are refused as they are read.
"""

from __future__ import annotations

import json
import re

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

from presk.fileio import too_deep

MAX_DIGITS = 20  # 2^64 has 20 digits: no size, offset or count presk reads is longer
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"?')  # a string, or its unterminated start


def parse(text: str, max_depth: int) -> object:
    """The value of JSON `text`, or ValueError saying what is wrong and where (`L:C: `
    leads the message when there is a place)."""
    deep = too_deep(text, "[]{}", max_depth, _STRING)
    if deep is not None:
        raise ValueError(f"{_place(text, deep)}nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_int=_integer, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise ValueError(f"{e.lineno}:{e.colno}: not JSON: {e.msg}") from None


def _place(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"{line}:{offset - (text.rfind(chr(10), 0, offset) + 1) + 1}: "


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_DIGITS})")
    return int(digits)


def _constant(name: str):
    raise ValueError(f"not JSON: {name} is not a number JSON has")


def first_violation(value, schema: dict):
    """The violation of `schema` by `value` that jsonschema ranks first (`best_match`: the
    shallowest), or None. Integers are strict: JSON Schema counts 8.0 (and, in Python,
    True) an integer, but no size, depth, step or bit count presk reads is written so."""
    types = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)
    )
    validator = validators.extend(Draft202012Validator, type_checker=types)(schema)
    return best_match(validator.iter_errors(value))
