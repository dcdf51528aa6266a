"""`presk bench --breakdown` refuses what it cannot measure."""

from __future__ import annotations

import pytest

from bad_input.refusal import refuse

TINY = ["tutorial/05_minigpt.psk", "--entry", "MiniGPT{64, 16, 2, 2}.loss"]


@pytest.mark.parametrize(
    "flags,says",
    [
        (["--sweep"], "--sweep and --breakdown"),
        (["--backends", "kernel"], "--breakdown times the mlir backend"),
        (["--backends", "interp,mlir"], "--breakdown times the mlir backend"),
        (["--lanes"], "drop --backends and --lanes"),
        (["--realize", "f16"], None),
    ],
)
def test_breakdown_refuses(flags, says):
    code = "E7001" if says is None else "E0001"
    refuse(["bench", *TINY, "--breakdown", *flags], code=code, says=says)
