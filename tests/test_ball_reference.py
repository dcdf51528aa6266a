"""The certified reference (`--backend ball`) against the MPFR interpreter, its independent
cross-check: on every tutorial entry and conformance case, the MPFR result at 256 bits
lies inside the ball certified to 128 bits (whose midpoints carry fewer than 256 bits, so
that its radius bounds MPFR's own roundings too), and the ball at 64 bits contains the
128-bit ball's midpoint; indices and masks are the interpreter's. A call certifies the
bits asked, running again with more where it fell short. Then what balls cannot decide:
a comparison or a division whose ball straddles 0 runs again at more bits, and past its
bound stops with E8005, naming the site and asking to raise --bits; `--bits` outside the
balls' range is refused."""

from __future__ import annotations

import json
import re

import gmpy2
import numpy as np
import pytest
from conftest import assert_user_error, run_in_process
from programs import REPO, entries

from presk import backends
from presk.api import load_text
from presk.backends import ball
from presk.backends.host import CallContext
from presk.backends.interp import cost
from presk.errors import PreskError
from presk.prims import balls
from presk.runtime.inputs import arguments, parameters
from presk.runtime.output import text
from presk.runtime.values import Tensor, leaves
from tests.conformance.suite import Case, all_cases, inputs, module_of, reference

TUTORIAL = [(p, a) for p, a in entries() if p.parent.name == "tutorial"]


def _tutorial_case(path, args: list[str]) -> Case:
    entry = args[args.index("--entry") + 1]
    dims = tuple(args[i + 1] for i, a in enumerate(args) if a == "--dim")
    return Case(f"{path.name} {entry}", str(path.relative_to(REPO)), entry, dims)


CASES = [_tutorial_case(p, a) for p, a in TUTORIAL] + all_cases()
IDS = [f"{c.name}{' drawn' if c.drawn else ''}" for c in CASES]


def _ball_output(case: Case, bits: int):
    return backends.make("ball", module_of(case), bits).call(inputs(case), CallContext())


def _inside(x, ball) -> bool:
    """The MPFR number `x` lies in `ball`, compared exactly."""
    mid = balls.midpoint(ball)
    with gmpy2.context(precision=max(x.precision, mid.precision) + 64):
        return abs(x - mid) <= gmpy2.mpfr(float(ball.rad()))


def assert_contains(exact, ball, what: str) -> None:
    for (path, x), (_, y) in zip(leaves(exact), leaves(ball), strict=True):
        if x.type.kind != "real":
            assert np.array_equal(np.asarray(x.data), np.asarray(y.data)), (what, path)
            continue
        for at, (xe, ye) in enumerate(zip(x.data.flat, y.data.flat, strict=True)):
            assert _inside(xe, ye), f"{what} {path}[{at}]: {xe} outside {ye}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_mpfr_result_lies_inside_the_ball_and_64_bits_contain_128s_midpoint(case):
    exact = reference(case)
    wide, narrow = _ball_output(case, 64), _ball_output(case, 128)
    assert_contains(exact, narrow, f"{case.name}: MPFR at 256 bits in the ball at 128")
    for (path, x), (_, y) in zip(leaves(narrow), leaves(wide), strict=True):
        if x.type.kind == "real":
            assert (balls.certified_bits(x.data) or 128) >= 128, (case.name, path)
            for at, (n, w) in enumerate(zip(x.data.flat, y.data.flat, strict=True)):
                assert w.contains(n.mid()), f"{case.name} {path}[{at}]: {n} outside {w}"


def test_a_ball_certifies_the_bits_asked_on_a_small_model():
    case = next(c for c in all_cases() if c.name == "training loss (tiny MiniGPT)")
    out = _ball_output(case, 256).data
    assert 256 <= balls.correct_bits(out) <= 256 + 60
    assert balls.radius(out).max() > 0  # not exact: the radius says how far it is


STRAIGHT = """
fn total(x : ℝ[3]) -> ℝ { sum(relu(x / 3 * 3 - x)) }
fn cut = grad(total)
fn inverse(x : ℝ[3]) -> ℝ[3] { 1 / (x / 3 * 3 - x) }
fn inverse_of_zero(x : ℝ[3]) -> ℝ[3] { 1 / (x - x) }
fn logarithm(x : ℝ[3]) -> ℝ[3] { log(x / 3 * 3 - x) }
fn bend(x : ℝ[3]) -> ℝ[3] { relu(x - x + 1e-30) }
fn cancel(x : ℝ[3]) -> ℝ[3] { x + 1 - 1 }
fn nothing(x : ℝ[3]) -> ℝ[3] { x + 1 - 1 - x }
fn twice(x : ℝ[3]) -> ℝ[3] { x * 2 }
fn flat(x : ℝ[3]) -> ℝ[3] { exp(x * 1e-12 + 1 - 1) }
"""


def _run(entry: str, x, bits: int = 32):
    core = load_text(STRAIGHT, "straight.psk").elaborate(entry)
    return core.reference(bits, "ball")(np.asarray(x, dtype=np.float64))


def _ball_value(entry: str, x, bits: int = 32) -> Tensor:
    reference = load_text(STRAIGHT, "straight.psk").elaborate(entry).reference(bits, "ball")
    return reference.backend.call(reference.values([np.asarray(x, dtype=np.float64)]))


def _balls(entry: str, x, bits: int = 32) -> np.ndarray:
    return _ball_value(entry, x, bits).data


TINY = [1e-20, 2e-20, 3e-20]


def test_a_call_that_certifies_fewer_bits_than_asked_runs_again_with_those_it_lacked(capsys):
    # x + 1 − 1 at x ≈ 1e-20 loses 66 bits to the rounding of x + 1, which no contraction
    # foretells: 32 bits and the guard certify none; 32 more and the guard, 46
    out = _balls("cancel", TINY)
    assert balls.certified_bits(out) >= 32
    assert all(b.contains(x) for b, x in zip(out, TINY, strict=True))
    first = 32 + ball.GUARD_BITS
    assert capsys.readouterr().err.splitlines() == [
        f"note: the ball reference certified 0 of the 32 bits asked of the value at {first} "
        f"bits of working precision; running again at {first + 32 + ball.GUARD_BITS}"
    ]


def test_a_value_that_more_bits_do_not_narrow_is_given_as_it_is_with_a_note(capsys):
    out = _balls("nothing", TINY)  # 0 exactly, in a ball that more bits only shrink about 0
    assert all(b.contains(0) and not b.is_exact() for b in out)
    last = 2 * 32 + 2 * ball.GUARD_BITS  # the first run's, then 32 more and the guard
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"note: the ball reference certifies only 0 of the 32 bits asked of the value, at "
        f"{last} bits of working precision: more bits did not narrow it (it may be 0)"
    )


def test_a_comparison_that_balls_cannot_decide_runs_again_then_names_its_site_and_bits(capsys):
    # relu's derivative asks x / 3 · 3 − x > 0: 0 exactly, in a ball no bits move off it
    with pytest.raises(PreskError) as e:
        _run("cut", [0.1, 0.2, 0.3], 32)
    assert e.value.code == "E8005", e.value
    said = e.value.render()
    assert said.startswith("straight.psk:2:") and "(at total.bwd/" in said
    last = (32 + ball.GUARD_BITS) << ball.RAISES  # doubled as often as a call may
    assert f"no certain answer at {last} bits of working precision" in said
    assert said.endswith(f"; raise --bits (this call ran at up to {last} bits)")
    notes = capsys.readouterr().err.splitlines()
    assert [n[n.rindex(" at ") :] for n in notes] == [f" at {last // 2} bits", f" at {last} bits"]


def test_a_division_or_logarithm_whose_ball_reaches_zero_is_e8005_and_an_exact_zero_e8001():
    x = [0.1, 0.2, 0.3]  # x / 3 · 3 − x: 0 exactly, in a ball about 0 that bits only shrink
    for entry in ("inverse", "logarithm"):
        with pytest.raises(PreskError) as e:
            _run(entry, x)
        assert e.value.code == "E8005", (entry, e.value)
        assert "containing 0" in e.value.message and "raise --bits" in e.value.message
    with pytest.raises(PreskError) as e:
        _run("inverse_of_zero", x)
    assert e.value.code == "E8001", e.value  # x − x is exactly 0: no real value at all


def test_a_function_follows_the_accuracy_its_operand_has_near_0_not_its_relative_one(capsys):
    # x · 10⁻¹² + 1 − 1 is about 10⁻¹³ to 2⁻ᵖ: 43 bits fewer relative to itself than
    # relative to 1, which is what exp of it, about 1, can keep
    out = _balls("flat", [0.1, 0.2, 0.3], 64)
    assert balls.certified_bits(out) >= 64 and capsys.readouterr().err == ""


def test_an_output_of_exact_balls_prints_as_exact():
    lines = text(_ball_value("twice", [0.1, 0.2, 0.3])).splitlines()
    assert lines[-1] == "certified: every value exact"  # not the bits of a float64


def test_relu_of_a_straddling_ball_is_the_union_of_both_sides():
    y = np.asarray(_run("bend", [0.1, 0.2, 0.3]), dtype=np.float64)
    assert np.all(np.isfinite(y))  # a ball around [0, 1e-30 + its radius], no refusal


def test_bits_outside_the_balls_range_are_refused_before_the_run():
    proc = run_in_process(
        "presk", "run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply",
        "--dim", "batch=4", "--backend", "ball", "--bits", "16",
    )  # fmt: skip
    message = assert_user_error(proc, "E0001")
    assert "outside the ball reference's 32 to 65536" in message


def test_presk_run_on_the_ball_backend_prints_midpoints_radii_and_certified_bits():
    args = ["tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4"]
    ball = run_in_process("presk", "run", *args, "--backend", "ball", "--bits", "64")
    assert ball.returncode == 0, ball.stderr
    lines = ball.stdout.splitlines()
    assert lines[5].startswith("± [[") and lines[-1] == "certified: 87 bits of every value"
    interp = run_in_process("presk", "run", *args, "--backend", "interp", "--bits", "64")
    assert lines[:5] == interp.stdout.splitlines()  # the midpoints, to the digits shown
    assert ball.stderr.strip().endswith("on ball at 64 bits")


MLP = str(REPO / "tests" / "train" / "mlp_regression.psk")
LOSS = "Regression.loss"


def _calibrated(tmp_path, *flags: str, name: str) -> tuple[bytes, str]:
    out = tmp_path / name
    argv = ["calibrate", "--precision", MLP, "--entry", LOSS, "--dim", "N=4", "--bits", "64"]
    proc = run_in_process("presk", *argv, "--samples", "3", *flags, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes(), proc.stdout


def _solved(tmp_path, envelope, *flags: str, name: str) -> tuple[bytes, bytes, str]:
    out = tmp_path / f"{name}.json"
    argv = ["solve", MLP, "--entry", LOSS, "--dim", "N=4", "--precision", str(envelope)]
    # traffic decides: the time objective's record follows this machine's timings
    budget = ["--budget", "1e-3", "--objective", "bytes", "--force"]
    proc = run_in_process("presk", *argv, *budget, *flags, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    path = str(tmp_path / name)
    moves = (tmp_path / f"{name}.moves.json").read_bytes().replace(f'"{name}.json"'.encode(), b"")
    # the record timed beside all-f32 and all-f64: this machine's times, which vary
    untimed = [line for line in proc.stdout.splitlines() if not _TIMED.search(line)]
    return out.read_bytes(), moves, "\n".join(untimed).replace(path, "NAME")


_TIMED = re.compile(r"\d ms\b|× (faster|slower)")


def test_serial_local_and_dask_runs_of_calibrate_and_a_solves_measurements_give_the_same_bytes(
    tmp_path, monkeypatch
):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    serial = _calibrated(tmp_path, "--workers", "1", name="env-serial.json")
    local = _calibrated(tmp_path, "--workers", "2", name="env-local.json")
    envelope = tmp_path / "env-serial.json"
    solves = [
        _solved(tmp_path, envelope, "--workers", "1", name="serial"),
        _solved(tmp_path, envelope, "--workers", "2", name="local"),
    ]
    with distributed.LocalCluster(processes=False, n_workers=1, dashboard_address=None) as c:
        dask = _calibrated(tmp_path, "--scheduler", c.scheduler_address, name="env-dask.json")
        solves.append(_solved(tmp_path, envelope, "--scheduler", c.scheduler_address, name="dask"))
    assert serial == local == dask
    assert b'"reference": "ball"' in serial[0]
    records, moves, texts = zip(*solves, strict=True)
    assert records[0] == records[1] == records[2] and moves[0] == moves[1] == moves[2]
    assert texts[0] == texts[1] == texts[2]  # but for the names of the files they wrote
    assert "the reference's radius" in texts[0]


@pytest.mark.parametrize("backend", ["interp", "ball"])
def test_a_reference_past_memory_is_refused_before_the_run_with_its_estimate(backend):
    proc = run_in_process(
        "presk", "run", "tutorial/03_attention.psk", "--backend", backend, "--entry",
        "attention", "--dim", "B=2", "--dim", "T=4096",
    )  # fmt: skip
    message = assert_user_error(proc, "E3012")
    bits = 256 if backend == "interp" else 256 + 6 + ball.GUARD_BITS  # and what it may lose
    assert f"the reference ({backend} at {bits} bits) would hold about" in message
    assert "GiB, more than this machine's" in message


def _module_of(params: int) -> str:
    fields = "\n".join(f"  param a{i} : ℝ[64] = ones" for i in range(params))
    total = " + ".join(f"sum(a{i} * x)" for i in range(params))
    return f"module M {{\n{fields}\n  fn loss(x : ℝ[64]) -> ℝ {{ {total} }}\n}}\n"


def test_the_reals_a_call_holds_grow_with_its_values_not_with_the_records_that_name_them():
    held = []
    for params in (2, 16):
        core = load_text(_module_of(params), "m.psk").elaborate("M.loss.grad")
        program = core.reference(64, "interp").backend.program
        held.append(cost(program, program.entry, {}).held)
    # the gradient's record is built a field at a time: each step names the fields so far
    assert held[1] < 8 * held[0], held


def test_a_long_reference_call_says_how_long_it_is_expected_to_take(capsys, monkeypatch):
    monkeypatch.setenv("PRESK_PROGRESS", "")
    core = load_text((REPO / "corpus/nlp/05_gpt.psk").read_text(), "gpt.psk").elaborate(
        "loss", {"B": 4096, "T": 16}, {"D": 32, "H": 2, "L": 2}
    )
    reference = core.reference(64, "interp").backend
    monkeypatch.setattr(reference.host, "call", lambda *args: "not run")
    args = [parameters(core.view, 0, None), *arguments(core.view, 0, None)]
    assert reference.call(args) == "not run"
    note = capsys.readouterr().err
    assert note.startswith("note: the reference (interp at 64 bits) is expected to take about")
    assert "2.28e+09 multiply-adds); it shows its progress" in note


def test_a_calibration_whose_ball_runs_again_records_the_sample_once(tmp_path, monkeypatch):
    once = json.loads(_calibrated(tmp_path, "--workers", "1", name="once.json")[0])
    # a first run short of bits certifies too few, and each sample runs again: recorded
    # on top of the abandoned run, every site's count was twice its own
    monkeypatch.setattr(ball.BallReference, "working_bits", lambda self, entry: self.bits - 8)
    again = json.loads(_calibrated(tmp_path, "--workers", "1", name="again.json")[0])
    assert again["sites"].keys() == once["sites"].keys()
    for site, seen in once["sites"].items():
        assert again["sites"][site]["count"] == seen["count"], site
        # certified bounds at another working precision: the same to many digits
        assert again["sites"][site]["magnitude"] == pytest.approx(seen["magnitude"], rel=1e-12)
