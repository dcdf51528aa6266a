"""presk solve: a budget in, the cheapest realization out, measured inside the budget.

Tiny programs, two samples, 64-bit envelopes: the MLP regression of the training tests
(its loss at N=4), the tutorial's MLP{4, 8, 1}.mse for the greedy proposal against
the exhaustive search, and the tiny MiniGPT on windows of text for the held-out samples
(its head zero-initialised: a vacuous solve, refused but for --force)."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

import gmpy2
import numpy as np
import pytest

from presk import api
from presk.api import to_numpy
from presk.cli import cmd_solve
from presk.cli.main import main
from presk.errors import UsageError
from presk.precision import solve_text
from presk.precision import versus as versus_module
from presk.precision.bound import exact_output, gap_to
from presk.precision.calibrate import Job
from presk.precision.envelope import envelope_for
from presk.precision.offers import envelope_menu, estimate, menu
from presk.precision.samples import sample_arguments
from presk.precision.sensitivity import sensitivities
from presk.precision.solve import Gauge, Options, realization_of, solve
from presk.runtime.inputs import arguments

REPO = Path(__file__).resolve().parent.parent
MLP = str(REPO / "tests/train/mlp_regression.psk")
LOSS = ["--entry", "Regression.loss", "--dim", "N=4"]
TUTORIAL = str(REPO / "tutorial/02_regression.psk")
MSE = ["--entry", "MLP{4, 8, 1}.mse", "--dim", "N=16"]
MINIGPT_FILE = str(REPO / "tutorial/05_minigpt.psk")
MINIGPT = ["--entry", "MiniGPT{64, 16, 2, 2}.loss", "--dim", "B=1", "--dim", "T=8"]


def presk(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(a) for a in argv]) == 0
    return out.getvalue()


def calibrate(program: str, sizes: list[str], path: Path) -> str:
    flags = ("--bits", "64", "--samples", "2", "--workers", "1", "--out", path)
    presk("calibrate", "--precision", program, *sizes, *flags)
    return str(path)


@pytest.fixture(scope="module")
def mlp_env(tmp_path_factory) -> str:
    return calibrate(MLP, LOSS, tmp_path_factory.mktemp("env") / "mlp.json")


@pytest.fixture(scope="module")
def mse_env(tmp_path_factory) -> str:
    return calibrate(TUTORIAL, MSE, tmp_path_factory.mktemp("env") / "mse.json")


def solved(program: str, sizes: list[str], env: str, out: Path, *flags: str) -> str:
    """A solve of traffic, whose decisions do not depend on this machine's speeds."""
    return presk(
        "solve",
        program,
        *sizes,
        "--precision",
        env,
        "--workers",
        "1",
        "--out",
        out,
        "--objective",
        "bytes",
        *flags,
    )


def line(text: str, head: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(head))


def test_a_solve_ends_inside_its_budget_and_its_record_runs_with_the_same_bits(mlp_env, tmp_path):
    out = tmp_path / "r.json"
    text = solved(MLP, LOSS, mlp_env, out, "--budget", "1e-3", "--sites", "3")
    assert line(text, "measured gap").endswith(": inside")
    record = json.loads(out.read_text())
    assert record["default"] == "f64" and (record["storage"] or record["params"])
    moves = json.loads((tmp_path / "r.moves.json").read_text())["moves"]
    assert any(m["move"] == "narrow" and m["outcome"] == "taken" for m in moves)
    outputs = {}
    for backend in ("kernel", "mlir"):
        npz = tmp_path / f"{backend}.npz"
        presk("run", MLP, *LOSS, "--realize", f"@{out}", "--backend", backend, "--out", npz)
        with np.load(npz) as arrays:
            outputs[backend] = {k: arrays[k] for k in arrays.files}
    for name, a in outputs["kernel"].items():
        assert np.array_equal(a.view(np.uint64), outputs["mlir"][name].view(np.uint64))
    timed = presk(
        "bench",
        MLP,
        *LOSS,
        "--realize",
        f"f64,@{out}",
        "--backends",
        "kernel,mlir",
        "--repeat",
        "1",
    )
    assert f"mlir @{out}" in timed


def test_the_traffic_ratio_is_above_1_at_a_loose_budget(mlp_env, tmp_path):
    text = solved(MLP, LOSS, mlp_env, tmp_path / "r.json", "--budget", "1e-1")
    ratio = float(line(text, "traffic:").split(", ")[1].split("×")[0])
    assert ratio > 1


def _solver_inputs(program: str, entry: str, dims: dict, env: str):
    core = api.load(program).elaborate(entry, dims)
    envelope = envelope_for(env, core)
    meta = envelope.meta
    found = sensitivities(core, meta.seed, meta.weights, meta.bits)
    job = Job(Path(program).read_text(), program, "store", meta)
    return core, envelope, found, job


def test_the_rules_leave_out_what_they_say(mlp_env):
    core, envelope, found, _ = _solver_inputs(MLP, "Regression.loss", {"N": 4}, mlp_env)
    theta = 0.05
    m = menu(core, envelope, found, min_gain=theta)
    priced = {**m.values, **m.params}
    one = {k for k, p in priced.items() if p.elements == 1}
    small = {k for k, p in priced.items() if p.elements > 1 and 4 * p.elements < theta * m.all_f64}
    assert one == {"Regression.loss/%2", "c"}  # the loss and the output's bias
    assert set(m.left_out["rule 1"]) == one
    assert small and set(m.left_out["rule 2"]) == small
    assert set(m.offered) == set(priced) - one - small
    assert all(4 * priced[k].elements >= theta * m.all_f64 for k in m.offered)


def test_a_site_the_sweep_did_not_reach_is_not_offered(mlp_env):
    core, envelope, found, _ = _solver_inputs(MLP, "Regression.loss", {"N": 4}, mlp_env)
    missed = "Regression.apply/%1"  # as if the sweep had not reached it
    unreached = replace(found, rows=[r for r in found.rows if r.key != missed])
    m = menu(core, envelope, unreached, min_gain=0)
    assert missed in menu(core, envelope, found, min_gain=0).offered
    assert missed not in m.offered
    assert m.left_out["unreached"] == [missed]
    assert missed not in m.terms({k: "bf16" for k in m.offered})  # unknown, not zero


@pytest.mark.parametrize("budget", [1e-3, 1e-6])
def test_the_greedy_proposal_is_within_1_1x_of_the_exhaustive_optimum(mse_env, budget):
    core, envelope, found, job = _solver_inputs(TUTORIAL, "MLP{4, 8, 1}.mse", {"N": 16}, mse_env)
    m = menu(core, envelope, found)
    s = solve(m, Options(budget, exhaustive=True), Gauge(core, envelope, job, m))
    assert 2 <= len(m.offered) <= 12
    assert s.exhaustive.optimum <= m.traffic(s.proposed) <= 1.1 * s.exhaustive.optimum
    assert s.inside


def test_the_exhaustive_comparison_is_printed(mse_env, tmp_path):
    text = solved(TUTORIAL, MSE, mse_env, tmp_path / "r.json", "--budget", "1e-6", "--exhaustive")
    assert "× the optimum" in line(text, "exhaustive:")


def test_the_answer_does_not_depend_on_the_workers(mse_env, tmp_path):
    flags = ("--budget", "1e-6", "--out")
    base = ["solve", TUTORIAL, *MSE, "--precision", mse_env]
    presk(*base, "--workers", "1", *flags, tmp_path / "one.json")
    presk(*base, "--workers", "2", *flags, tmp_path / "two.json")
    assert (tmp_path / "one.json").read_text() == (tmp_path / "two.json").read_text()


def test_narrowing_by_measurement_keeps_only_steps_inside_budget_over_margin(mlp_env):
    core, envelope, found, job = _solver_inputs(MLP, "Regression.loss", {"N": 4}, mlp_env)
    m = menu(core, envelope, found)
    gauge = Gauge(core, envelope, job, m)
    plain = solve(m, Options(1e-3), gauge)
    s = solve(m, Options(1e-3, narrow="measured"), gauge)
    n = s.narrowing
    assert n.kept > 0 and n.passes <= 3 and n.threshold == s.budget / 2.5
    assert m.traffic(s.assignment) < m.traffic(plain.assignment)
    measured = [mv for mv in s.moves if mv.outcome in ("kept", "rejected")]
    assert len(measured) == n.tried
    assert all((mv.gap <= n.threshold) == (mv.outcome == "kept") for mv in measured)
    assert s.gap == _measured(core, envelope, m, s.assignment) <= n.threshold


def test_narrowing_heldout_undoes_the_last_steps_until_the_held_out_samples_are_inside(mlp_env):
    core, envelope, found, job = _solver_inputs(MLP, "Regression.loss", {"N": 4}, mlp_env)
    m = menu(core, envelope, found)
    meta = envelope.meta  # drawn inputs: the samples after the envelope's are seeds 2 and 3
    held = replace(meta, first=meta.first + meta.samples)
    gauge = Gauge(core, envelope, job, m)
    s = solve(m, Options(1e-2, narrow="heldout"), gauge, gauge.moved_to(held))
    n = s.narrowing
    undone = [mv for mv in s.moves if mv.outcome == "held out"]
    assert n.undone == len(undone) > 0  # 3 of 10 steps fail out of sample
    assert s.held_out.gap <= n.threshold or n.undone == n.kept
    assert s.held_out.gap == _measured(core, replace(envelope, meta=held), m, s.assignment)
    assert s.gap == _measured(core, envelope, m, s.assignment)


def _measured(core, envelope, m, assignment) -> float:
    meta = envelope.meta
    exact = [exact_output(core, meta, i) for i in range(meta.first, meta.first + meta.samples)]
    return gap_to(exact, core, envelope, realization_of(m, assignment), "kernel")


def test_the_held_out_gap_is_printed_on_the_windows_after_the_envelopes(tmp_path):
    data = tmp_path / "text.psk.d"
    presk("data", REPO / "corpus/nlp/data/GPL-1.txt", "--window", "8", "--out", data)
    sizes = [*MINIGPT, "--data", data]
    env = calibrate(MINIGPT_FILE, sizes, tmp_path / "env.json")
    flags = ("--budget", "1e-3", "--heldout", "3", "--force")  # initialised: vacuous
    text = solved(MINIGPT_FILE, MINIGPT, env, tmp_path / "r.json", *flags)
    assert f"samples 2 to 4 of {data}" in line(text, "held-out gap")
    # the sweep ran on the envelope's first sample, the data's windows, not drawn tokens
    core = api.load(MINIGPT_FILE).elaborate("MiniGPT{64, 16, 2, 2}.loss", {"B": 1, "T": 8})
    envelope = envelope_for(env, core)
    meta = envelope.meta
    on_data = sensitivities(core, meta.seed, None, meta.bits, sample_arguments(core, meta, 0))
    drawn = sensitivities(core, meta.seed, None, meta.bits)
    assert envelope_menu(core, envelope) == menu(core, envelope, on_data)
    # (the head is initialised to 0, so only the parameters' gradients tell them apart)
    assert [(r.key, r.l1) for r in on_data.rows] != [(r.key, r.l1) for r in drawn.rows]


def test_a_value_is_charged_where_a_narrower_kernel_reads_it(tmp_path):
    # softmax.psk: %1 = x + 84 is read by the softmax kernel, %2: in bf16 that kernel
    # reads x + 84 at a spacing of 0.5, so %1's term in bf16 is charged
    program = str(REPO / "tests/data/widening/softmax.psk")
    env = calibrate(program, ["--entry", "loss"], tmp_path / "env.json")
    core, envelope, found, _ = _solver_inputs(program, "loss", {}, env)
    m = menu(core, envelope, found)
    assert m.values["loss/%1"].readers == ("loss/%2",)
    own = m.terms({"loss/%1": "f32"})["loss/%1"]
    read = m.terms({"loss/%1": "f32", "loss/%2": "bf16"})["loss/%1"]
    assert read == m.values["loss/%1"].terms["bf16"] and read > 1000 * own


def test_a_fused_member_is_charged_its_rounding_in_the_kernels_arithmetic(tmp_path):
    # softmax_unshifted.psk: x + 84 (%1) is fused into exp's kernel (%2), which in bf16
    # keeps it in f32: its term there is its f32 rounding, not its bf16 one (a spacing of
    # 0.5 at 84, an exponent off by a quarter)
    program = str(REPO / "tests/data/widening/softmax_unshifted.psk")
    env = calibrate(program, ["--entry", "loss"], tmp_path / "env.json")
    core, envelope, found, _ = _solver_inputs(program, "loss", {}, env)
    weighted = {r.key: r.weighted for r in found.rows}
    terms = menu(core, envelope, found).values["loss/%2"].terms
    assert "loss/%1" not in menu(core, envelope, found).values  # a member, not stored
    assert terms["bf16"] == weighted["loss/%2"]["bf16"] + weighted["loss/%1"]["f32"]
    assert terms["f32"] == weighted["loss/%2"]["f32"] + weighted["loss/%1"]["f32"]


# ∂L/∂tanh(x) = w and ∂L/∂w = tanh(x): each pairs with a value a test can round by hand.
WEIGHED = """dim N = 5
fn f(x : ℝ[N], w : ℝ[N]) -> ℝ { sum(tanh(x) * w) }
"""


def _fl(v: np.ndarray, t: str) -> np.ndarray:
    """`v` rounded to `t` by numpy: f32, or bf16 as f32's top 16 bits, nearest even."""
    f32 = v.astype(np.float32)
    if t == "f32":
        return f32.astype(np.float64)
    bits = f32.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def _weighted_by_hand(ct: list, v: list, t: str) -> float:
    """Σᵢ |ctᵢ|·|fl_t(vᵢ) − vᵢ|, in MPFR at 128 bits but for the rounding to `t`."""
    rounded = _fl(np.array([float(x) for x in v]), t)
    return float(
        sum(abs(c) * abs(gmpy2.mpfr(r) - x) for c, r, x in zip(ct, rounded, v, strict=True))
    )


def test_the_weighted_term_is_the_exact_sum_of_sensitivity_times_rounding():
    core = api.load(WEIGHED).elaborate("f")
    x, w = (to_numpy(v) for v in arguments(core.view, 0, None))
    rows = {r.key: r for r in sensitivities(core).rows}
    with gmpy2.context(precision=128):
        tanh = [gmpy2.tanh(gmpy2.mpfr(float(xi))) for xi in x]
        w_exact = [gmpy2.mpfr(float(wi)) for wi in w]
        for t in ("f32", "bf16"):
            site = _weighted_by_hand(w_exact, tanh, t)  # tanh(x)'s cotangent is w
            argument = _weighted_by_hand(tanh, w_exact, t)  # w's is tanh(x)
            assert site > 0 and rows["f/%0"].weighted[t] == pytest.approx(site, rel=2.0**-40)
            assert rows["w"].weighted[t] == pytest.approx(argument, rel=2.0**-40)


def test_the_weighted_estimate_is_at_most_the_measured_one_and_its_solve_ends_inside(mlp_env):
    core, envelope, found, job = _solver_inputs(MLP, "Regression.loss", {"N": 4}, mlp_env)
    measured = menu(core, envelope, found, rounding="measured")
    weighted = menu(core, envelope, found, rounding="weighted")
    for rung in ("f32", "bf16"):
        narrowed = {k: rung for k in weighted.offered}
        assert (
            0
            < estimate(weighted.terms(narrowed).values(), "sum")
            <= estimate(measured.terms(narrowed).values(), "sum")
        )
    s = solve(weighted, Options(1e-3), Gauge(core, envelope, job, weighted))
    assert s.inside and any(t != "f64" for t in s.assignment.values())


def test_a_vacuous_solve_goes_on_under_force_with_a_warning(tmp_path, capsys):
    # drawn parameters: the head is zero, so nothing upstream of it has a sensitivity
    env = calibrate(MINIGPT_FILE, MINIGPT, tmp_path / "env.json")
    text = solved(MINIGPT_FILE, MINIGPT, env, tmp_path / "r.json", "--budget", "1e-3", "--force")
    assert line(text, "measured gap").endswith(": inside")
    warning = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("warning:"))
    assert "the solve is vacuous: 31 of the 33 values offered" in warning
    assert "passes no gradient upstream" in warning and warning.endswith("(--force)")


@pytest.mark.parametrize(
    "sweep, swept, total, noted",
    [
        ("reference", 81.0, 104.0, True),  # the corpus GPT's (section 7)
        ("reference", 40.0, 100.0, False),  # not most of the time
        ("reference", 3.0, 4.0, False),  # too short to be worth a note
        ("f64", 81.0, 104.0, False),  # --sweep f64 given
    ],
)
def test_the_sweep_note_when_the_reference_sweep_takes_most_of_the_time(sweep, swept, total, noted):
    note = cmd_solve.sweep_note(sweep, swept, total)
    assert (note is not None) is noted
    if noted:
        assert "--sweep f64" in note and f"took {swept:.1f} s of the solve's {total:.1f} s" in note


@pytest.mark.parametrize("sweep", ["reference", "f64"])
def test_the_solve_prints_the_note_unless_sweep_f64_is_given(
    mlp_env, tmp_path, capsys, monkeypatch, sweep
):
    monkeypatch.setattr(cmd_solve, "SWEEP_SECONDS", 0.0)  # the tiny sweep counts as long
    monkeypatch.setattr(cmd_solve, "SWEEP_SHARE", 0.0)
    solved(MLP, LOSS, mlp_env, tmp_path / "r.json", "--budget", "1e-3", "--sweep", sweep)
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")]
    if sweep == "f64":
        assert notes == []
    else:
        assert len(notes) == 1 and "--sweep f64" in notes[0]
        assert re.search(r"took \d+\.\d s of the solve's \d+\.\d s", notes[0])


def test_a_solve_answers_against_all_f32_and_all_f64_in_bytes_and_time(mlp_env, tmp_path):
    # the default objective, time, priced with this machine's profile (fitted once)
    argv = ["solve", MLP, *LOSS, "--precision", mlp_env, "--workers", "1", "--budget", "1e-3"]
    text = presk(*argv, "--out", tmp_path / "r.json")
    assert line(text, "predicted time (")
    timed = line(text, "on this machine (mlir, the median of 20 calls each, in turns): ")
    assert all(f"{name} " in timed for name in ("the solved record", "all-f32", "all-f64"))
    for other in ("all-f64", "all-f32"):
        said = line(text, f"against {other}: ")
        assert "less traffic, " in said and f"{other}'s measured gap " in said


def run(name: str, bytes_: int, gap: float, ms: float):
    return versus_module.Run(name, bytes_, gap, ms)


@pytest.mark.parametrize(("f32_gap", "f32_ms", "said"), [(1e-7, 1.0, True), (1e-2, 1.0, False),
                                                          (1e-7, 3.0, False)])  # fmt: skip
def test_the_solve_says_plainly_when_all_f32_is_the_fastest_inside_the_budget(
    f32_gap, f32_ms, said
):
    v = versus_module.Versus(
        run("the solved record", 300, 1e-4, 2.0),
        run("all-f32", 400, f32_gap, f32_ms),
        run("all-f64", 800, 0.0, 4.0),
        "mlir",
        20,
    )
    lines = solve_text._versus(v, budget=1e-3)
    assert lines[1] == (
        "against all-f64: 2.667× less traffic, 2.00× faster; all-f64's measured gap 0"
    )
    plain = [x for x in lines if x.startswith("all-f32 is the fastest inside the budget here")]
    assert bool(plain) == said


def test_bytes_with_a_profile_is_refused(mlp_env, tmp_path):
    argv = ["solve", MLP, *LOSS, "--precision", mlp_env, "--budget", "1e-3", "--out"]
    argv += [str(tmp_path / "r.json"), "--objective", "bytes", "--profile", "P.json"]
    with pytest.raises(UsageError, match="--profile prices time") as refused:
        main(argv)
    assert refused.value.code == "E0001"
