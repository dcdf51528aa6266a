"""The primitives of PSK-Core, one family a module: typing rule, and later semantics.

`typing_rule(op_name)` gives the rule `psk-verify` checks an op against, or None.
"""

from __future__ import annotations


def typing_rule(op_name: str):
    return None
