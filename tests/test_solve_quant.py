"""Integer weights in `presk solve`: `--quant` after the float solve, and `--menu` with
int8 and int4 as rungs beside the floats.

On the tiny MiniGPT trained 30 steps (its head is zero at initialisation, so every
sensitivity upstream of it would be 0), an envelope of two samples at 64 bits: both
solves end inside their budget by measurement, and their records run natively with the
kernel evaluator's bits; a menu without integers is the float solve, decision for
decision."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from presk import api
from presk.cli.main import main
from presk.ir.types import Axis, TensorType
from presk.precision.integers import integer_bytes, move, scale_axes
from presk.precision.offers import Menu, Priced
from presk.quantize import dequantize, quantize
from presk.realize import Quant

REPO = Path(__file__).resolve().parent.parent
MINIGPT_FILE = str(REPO / "tutorial/05_minigpt.psk")
MINIGPT = ["--entry", "MiniGPT{64, 16, 2, 2}.loss", "--dim", "B=1", "--dim", "T=8"]


def presk(*argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(a) for a in argv]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[str, str]:
    """(the checkpoint, the envelope on it)."""
    work = tmp_path_factory.mktemp("gpt")
    train = ("--steps", "30", "--backend", "mlir", "--quiet", "--out", work / "gpt")
    presk("train", MINIGPT_FILE, *MINIGPT, *train)
    weights = str(work / "gpt" / "checkpoint.psk.d")
    env = work / "env.json"
    flags = ("--bits", "64", "--samples", "2", "--workers", "1", "--out", env)
    presk("calibrate", "--precision", MINIGPT_FILE, *MINIGPT, "--weights", weights, *flags)
    return weights, str(env)


def solve(env: str, out: Path, *flags) -> str:
    """A solve of traffic, whose decisions do not depend on this machine's speeds."""
    return presk("solve", MINIGPT_FILE, *MINIGPT, "--precision", env, "--workers", "1",
                 "--out", out, "--objective", "bytes", *flags)  # fmt: skip


def decided(text: str) -> str:
    """A solve's summary without its timings on this machine, which no two runs share."""
    timed = ("on this machine", "against all-", "all-f32 is the fastest")
    return "\n".join(x for x in text.splitlines() if not x.startswith(timed))


def line(text: str, head: str) -> str:
    return next(x for x in text.splitlines() if x.lstrip().startswith(head))


def same_bits_natively(weights: str, record: Path, tmp_path: Path) -> None:
    outputs = []
    for backend in ("kernel", "mlir"):
        npz = tmp_path / f"{backend}.npz"
        presk("run", MINIGPT_FILE, *MINIGPT, "--weights", weights, "--realize", f"@{record}",
              "--backend", backend, "--out", npz)  # fmt: skip
        with np.load(npz) as arrays:
            outputs.append({k: arrays[k] for k in arrays.files})
    for name, a in outputs[0].items():
        assert np.array_equal(a.view(np.uint64), outputs[1][name].view(np.uint64))


def test_quant_stores_matrices_in_integers_inside_the_budget(trained, tmp_path):
    weights, env = trained
    out = tmp_path / "q.json"
    text = solve(env, out, "--budget", "1e-2", "--quant")
    assert line(text, "measured gap").endswith(": inside")
    quant = json.loads(out.read_text())["quant"]
    assert quant and all(q["bits"] in (8, 4) and q["scheme"] == "absmax" for q in quant.values())
    for rung in ("int8", "int4"):  # the first-order table: bound, signed, rss, measured
        bound, signed, rss, measured = map(float, line(text, rung + " ").split()[1:])
        assert bound >= abs(signed) and bound >= rss > 0 and measured > 0
    same_bits_natively(weights, out, tmp_path)
    solve(env, tmp_path / "p.json", "--budget", "1e-2", "--quant", "--scheme", "pow2")
    pow2 = json.loads((tmp_path / "p.json").read_text())["quant"]
    assert pow2 and {q["scheme"] for q in pow2.values()} == {"pow2"}


def test_the_one_menu_takes_integers_inside_the_budget(trained, tmp_path):
    weights, env = trained
    out = tmp_path / "m.json"
    text = solve(env, out, "--budget", "1e-1", "--menu", "f64,f32,bf16,int8,int4")
    assert line(text, "measured gap").endswith(": inside")
    quant = json.loads(out.read_text())["quant"]
    assert quant and all(q["over"] == -2 for q in quant.values())
    same_bits_natively(weights, out, tmp_path)
    explained = presk("explain", MINIGPT_FILE, *MINIGPT, "--realize", f"@{out}")
    path, q = next(iter(quant.items()))
    rung = f"int{q['bits']}" + ("/pow2" if q["scheme"] == "pow2" else "")
    assert f"{path} (parameter): {rung}," in explained


def test_the_one_menu_reaches_the_two_pass_result(trained, tmp_path):
    # its integers priced as --quant prices them, √Σ(g·δ)² added by root-sum-square, not
    # by the worst case of each move, which took the budget alone
    _, env = trained
    two = solve(env, tmp_path / "q.json", "--budget", "1e-2", "--quant")
    one = solve(env, tmp_path / "m.json", "--budget", "1e-2", "--menu", "f64,f32,bf16,int8,int4")
    assert line(one, "measured gap").endswith(": inside")
    traffic = [int(line(text, "traffic:").split()[1]) for text in (one, two)]
    assert traffic[0] <= traffic[1]


def test_the_estimate_takes_the_integers_by_their_root_sum_square():
    terms = {"f64": 0.0, "f32": 1.0, "bf16": 2.0, "int8": 3.0, "int4": 4.0}
    ladder = ("f64", "f32", "bf16", "int8", "int4")
    params = {
        k: Priced(k, "parameter", 64, terms, ladder=ladder, ints={"int8": 80, "int4": 48})
        for k in "abc"
    }
    m = Menu({}, params, tuple(params), {}, 3 * 512, 1e-3)
    assignment = {"a": "int8", "b": "int4", "c": "f32"}
    # each kind aimed at the target: f32's 1, and the integers' √(3² + 4²)
    assert m.estimate(assignment, "sum") == 5.0
    assert m.estimate({"a": "bf16", "b": "int8", "c": "bf16"}, "sum") == 2.0 + 2.0  # over 3
    assert m.estimate(assignment, "rss") == 5.0


def test_a_menu_without_integers_is_the_float_solve(trained, tmp_path):
    _, env = trained
    floats = solve(env, tmp_path / "f.json", "--budget", "1e-2")
    menu = solve(env, tmp_path / "m.json", "--budget", "1e-2", "--menu", "f64,f32,bf16")
    assert (tmp_path / "f.json").read_text() == (tmp_path / "m.json").read_text()
    moves = [json.loads((tmp_path / f"{n}.moves.json").read_text())["moves"] for n in "fm"]
    assert moves[0] == moves[1]
    assert decided(floats.replace("f.json", "m.json").replace("f.moves", "m.moves")) == decided(
        menu
    )


def test_the_scale_axis_is_the_one_every_reader_contracts(tmp_path):
    program = tmp_path / "readers.psk"
    program.write_text(
        "module M {\n"
        "  param left : ℝ[4, 3] = normal(scale = 0.1)\n"
        "  param right : ℝ[4, 3] = normal(scale = 0.1)\n"
        "  param both : ℝ[4, 4] = normal(scale = 0.1)\n"
        "  fn loss(x : ℝ[3], y : ℝ[4]) -> ℝ {\n"
        "    sum(left · x) + sum(y · right) + sum(both · y) + sum(y · both)\n"
        "  }\n"
        "}\n"
    )
    core = api.load(str(program)).elaborate("M.loss", {})
    assert scale_axes(core, ["left", "right", "both"]) == {"left": -1, "right": -2, "both": -2}


def test_integer_bytes_count_the_scales():
    # a 4 × 4 matrix in three layers: 48 + 48 bytes in int8 (as in bf16), 24 + 48 in int4
    assert integer_bytes((3, 4, 4), "int8", -2) == 48 + 48
    assert integer_bytes((3, 4, 4), "int4/pow2", -2) == 24 + 48


def test_a_move_is_exact():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 5))
    t = TensorType("real", (Axis(None, 8), Axis(None, 5)))
    d = move(w, t, "int4/pow2", -2)
    ints, scales = quantize(w, t, Quant(4, -2, "pow2"))
    assert np.array_equal(w + d, dequantize(ints, scales).astype(np.float64))
