"""The three programs the first-order estimate misjudges (tests/data/widening/): each is
solved, its proposal fails the measurement, and widening brings it inside its budget;
each well-formed variant beside it ends inside its budget too."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from presk.cli.main import main

WIDENING = Path(__file__).resolve().parent / "data" / "widening"
CASES = [  # program, budget, its flags, widened
    ("softmax_unshifted", "1e-3", (), True),
    ("softmax", "1e-3", (), False),
    ("std_offset", "1e-3", (), True),
    ("std", "1e-3", (), False),
    ("sum_equal", "1e-5", ("--min-gain", "0"), True),  # two row sums: rule 2 would keep them
    ("sum_varied", "1e-5", ("--min-gain", "0"), False),
]


def presk(*argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(a) for a in argv]) == 0
    return out.getvalue()


def field(text: str, head: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(head))


@pytest.mark.parametrize(("name", "budget", "flags", "widened"), CASES)
def test_each_solve_ends_inside_its_budget(tmp_path, name, budget, flags, widened):
    program = str(WIDENING / f"{name}.psk")
    env = tmp_path / "env.json"
    presk(
        "calibrate",
        "--precision",
        program,
        "--entry",
        "loss",
        "--bits",
        "64",
        "--samples",
        "2",
        "--workers",
        "1",
        "--out",
        env,
    )
    text = presk(
        "solve",
        program,
        "--entry",
        "loss",
        "--precision",
        env,
        "--budget",
        budget,
        "--workers",
        "1",
        "--out",
        tmp_path / "r.json",
        *flags,
    )
    assert field(text, "measured gap").endswith(": inside")
    rounds = int(field(text, "widening rounds:").split()[2].rstrip(";"))
    assert (rounds > 0) == widened  # a well-formed variant is judged right: no round
