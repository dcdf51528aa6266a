"""presk explain: every decision of a solved realization with its reason, one site through
every stage, and the HTML page in a real headless browser.

Programs solved at 2 samples and 64 bits: two of tests/data/widening, std_offset (its
proposal widened by measurement, a value left out by rule 1) and sum_equal at the default
--min-gain (its row sums left out by rule 2), the training tests' MLP regression (its
parameters), and two models with `Linear` biases, which the mlir backend's plan folds
into the contraction before them (epilogues) and whose attention renames on the host:
the tutorial's MiniGPT and the corpus GPT at tiny sizes."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from presk import api, stages
from presk.cli.main import main

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SOLVES = {  # name: program, its entry and sizes, budget
    "std_offset": (TESTS / "data/widening/std_offset.psk", ["--entry", "loss"], "1e-3"),
    "sum_equal": (TESTS / "data/widening/sum_equal.psk", ["--entry", "loss"], "1e-5"),
    "mlp": (
        TESTS / "train/mlp_regression.psk",
        ["--entry", "Regression.loss", "--dim", "N=4"],
        "1e-3",
    ),
    "minigpt": (
        ROOT / "tutorial/05_minigpt.psk",
        ["--entry", "MiniGPT.loss", *("--const", "V=64", "--const", "D=16")]
        + ["--const", "H=2", "--const", "L=2", "--dim", "T=8", "--dim", "B=2"],
        "1e-3",
    ),
    "gpt": (
        ROOT / "corpus/nlp/05_gpt.psk",
        ["--entry", "loss", "--const", "D=8", "--const", "H=2", "--const", "L=1"]
        + ["--dim", "T=4", "--dim", "B=1"],
        "1e-3",
    ),
}
BIASED = ("minigpt", "gpt")  # the models with Linear biases
CHROMIUM = shutil.which("chromium")
HEADLESS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def presk(*argv) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([str(a) for a in argv]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> dict[str, tuple[str, Path, list[str]]]:
    """By program: its file, its record and solve's flags."""
    out = {}
    for name, (program, entry, budget) in SOLVES.items():
        work = tmp_path_factory.mktemp(name)
        env = work / "env.json"
        flags = ["--bits", "64", "--samples", "2", "--workers", "1", "--out", env]
        if name in BIASED:  # trained-like parameters: a solve at initialisation is vacuous
            flags += ["--weights", drawn_parameters(name, work / "p.npz")]
        presk("calibrate", "--precision", program, *entry, *flags)
        solve = [*entry, "--precision", str(env), "--budget", budget, "--workers", "1"]
        solve += ["--objective", "bytes"]  # decisions that do not depend on this machine
        presk("solve", program, *solve, "--out", work / "r.json")
        out[name] = (str(program), work / "r.json", solve)
    return out


def drawn_parameters(name: str, path: Path) -> Path:
    """A model's initial parameters with those initialised to zeros drawn instead (its
    output head passes no gradient upstream at zero, so every sensitivity would be 0)."""
    rng = np.random.default_rng(0)
    params = {
        p: x if np.any(x) else rng.normal(scale=0.02, size=np.shape(x))
        for p, x in elaborated(name).params(0).items()
    }
    np.savez(path, **params)
    return path


def explained(program: str, *flags) -> dict:
    return json.loads(presk("explain", program, "--format", "json", *flags))


def realized(solved, name: str) -> list[str]:
    """A solved program and the flags that explain its record."""
    program, record, _ = solved[name]
    return [program, *SOLVES[name][1], "--realize", f"@{record}"]


def elaborated(name: str) -> api.Core:
    """A solved program's entry at its sizes."""
    program, flags, _ = SOLVES[name]
    sizes: dict[str, dict[str, int]] = {"--dim": {}, "--const": {}}
    for flag, binding in zip(flags[2::2], flags[3::2], strict=True):
        key, value = binding.split("=")
        sizes[flag][key] = int(value)
    return api.load(str(program)).elaborate(
        entry=flags[1], dims=sizes["--dim"], consts=sizes["--const"]
    )


@pytest.mark.parametrize("name", SOLVES)
def test_no_site_of_a_solved_realization_is_without_a_reason(solved, name):
    program, *flags = realized(solved, name)
    doc = explained(program, *flags)
    core = elaborated(name)
    sites = stages.launch_sites(core.lower(flags[-1]).module)
    paths = stages.parameter_paths(core.view)
    assert sorted(d["key"] for d in doc["decisions"]) == sorted(sites + paths)
    for d in doc["decisions"]:
        assert d["why"] and all(d["why"]), d
        if d["kind"] == "value":  # its source line and its PSK-Core op
            assert d["place"]["where"].startswith(program + ":"), d
            assert d["place"]["op"].startswith(d["key"].split("/")[1] + " = "), d
    assert (
        name != "mlp" or paths and {d["kind"] for d in doc["decisions"]} == {"value", "parameter"}
    )


def test_the_reasons_name_the_moves_and_the_rules(solved):
    program, record, _ = solved["std_offset"]
    moves = json.loads(record.with_name("r.moves.json").read_text())
    assert moves["left_out"]["rule 1"] == ["loss/%9"]
    why = {d["key"]: d["why"] for d in explained(*realized(solved, "std_offset"))["decisions"]}
    assert why["loss/%9"] == ["left out by rule 1: one element; kept f64"]
    widened = [k for k, w in why.items() if any(s.startswith("widened") for s in w)]
    assert widened and all("after a measured gap" in s for k in widened for s in why[k][-1:])
    refused = [s for w in why.values() for s in w if s.startswith("refused f32 → bf16")]
    assert any(s.startswith("refused f32 → bf16: the estimate would be") for s in refused)
    rule2 = [
        d for d in explained(*realized(solved, "sum_equal"))["decisions"] if d["reason"] == "rule 2"
    ]
    assert rule2 and all(d["why"][0].startswith("left out by rule 2") for d in rule2)


def test_budget_explains_what_the_record_does(solved):
    program, _, solve = solved["mlp"]
    from_record = explained(*realized(solved, "mlp"))
    from_budget = explained(program, *solve)
    assert from_budget["decisions"] == from_record["decisions"]
    assert from_budget["traffic"] == from_record["traffic"]


def test_a_fused_site_through_every_stage(solved):
    program, record, _ = solved["std_offset"]
    text = presk(
        "explain", program, "--entry", "loss", "--realize", f"@{record}", "--site", "loss/%5"
    )
    assert "site loss/%5, fused into loss/%6's kernel" in text
    assert f"-- source {program}:14" in text and "%5 = sub %1, %4" in text
    kernel, affine, llvm, machine = (
        text.split(f"-- {name}\n", 1)[1] for name in ("kernel", "affine", "llvm", "machine code")
    )
    assert kernel.lstrip().startswith("kernel mul")
    assert "affine.for" in affine
    assert "llvm.func @kernel" in llvm
    assert "<kernel>:" in machine and "ret" in machine


@pytest.mark.parametrize(
    ("site", "says"),
    [  # before the fix, each was refused: "no kernel computes it (the host does)"
        (
            "Linear.apply/%1",
            "site Linear.apply/%1, folded into Linear.apply/%0's kernel as its epilogue: kernel ",
        ),
        ("SelfAttention.apply/%2", "site SelfAttention.apply/%2: no kernel computes it, the host"),
        ("SelfAttention.apply/%6", "site SelfAttention.apply/%6: no op computes it at the kernel"),
    ],
)
def test_a_site_no_kernel_of_its_own_computes(solved, site, says):
    storage = json.loads(solved["gpt"][1].read_text())["storage"]
    # the plan folds a bias add only into a product stored in the add's type
    assert storage["Linear.apply/%0"] == storage["Linear.apply/%1"], storage
    text = presk("explain", *realized(solved, "gpt"), "--site", site)
    assert says in text
    assert "-- source " in text and "-- core\n" in text
    if site == "Linear.apply/%1":  # the bias add, in the contraction's kernel
        assert text.split("its epilogue: kernel ", 1)[1].split()[0].endswith(".bias")
        assert "llvm.func @kernel" in text and "<kernel>:" in text
    elif site == "SelfAttention.apply/%2":  # the rename: the host's op, no kernel's stages
        assert "-- host\n  %" in text and '"psk.rename"' in text
        assert "-- kernel\n" not in text
    else:  # a constant the kernels reading it hold as a literal
        assert "-- host\n" not in text and "-- kernel\n" not in text


def test_a_record_without_its_moves_file(solved, tmp_path):
    program, record, solve = solved["mlp"]
    alone = tmp_path / "r.json"  # as written by hand, or by another tool: no r.moves.json
    shutil.copy(record, alone)
    flags = [*SOLVES["mlp"][1], "--realize", f"@{alone}"]
    doc = explained(program, *flags)
    with_moves = explained(*realized(solved, "mlp"))
    assert doc["moves_file"] is None and doc["figures"] is None and doc["checked"] is None
    assert [(d["key"], d["rung"]) for d in doc["decisions"]] == [
        (d["key"], d["rung"]) for d in with_moves["decisions"]
    ]
    assert {d["reason"] for d in doc["decisions"]} == {"absent"}
    text = presk("explain", program, *flags)
    assert "no moves file: the decisions' history is absent" in text
    assert "the bound and the measured gap: give --precision ENV.json" in text
    # with the envelope: the bound, and the gap the solve measured on the same samples
    envelope = solve[solve.index("--precision") + 1]
    checked = explained(program, *flags, "--precision", envelope)["checked"]
    moves = json.loads(record.with_name("r.moves.json").read_text())
    assert checked["gap"] == moves["gap"] and checked["samples"] == 2
    assert checked["bound"] >= checked["gap"] > 0
    text = presk("explain", program, *flags, "--precision", envelope)
    assert f"bound (cond) {checked['bound']:.3g}; measured gap (kernel) " in text


@pytest.fixture(scope="module")
def pages(solved, tmp_path_factory):
    """A solved program's page (`presk explain --format html`), made once."""
    made: dict[str, Path] = {}

    def page(name: str) -> Path:
        if name not in made:
            out = tmp_path_factory.mktemp("pages") / f"{name}.html"
            presk("explain", *realized(solved, name), "--format", "html", "--out", out)
            made[name] = out  # once written: a refusal leaves no page to read
        return made[name]

    return page


@pytest.mark.parametrize("name", BIASED)
def test_the_page_of_a_model_with_biases_shows_every_stored_value(solved, pages, name):
    page = pages(name).read_text()  # before the fix: refused at the first bias add
    decisions = explained(*realized(solved, name))["decisions"]
    values = [d for d in decisions if d["kind"] == "value"]
    assert page.count('<details class="decision"') == len(decisions)
    assert page.count('<details class="stage">') == 4 * len(values)
    # the plan folds a bias add only into a product stored in the add's type
    storage = json.loads(solved[name][1].read_text())["storage"]
    folded = storage["Linear.apply/%0"] == storage["Linear.apply/%1"]
    assert folded == ("folded into Linear.apply/%0&#x27;s kernel as its epilogue" in page)


def _chromium(page: Path, tmp_path: Path, *flags) -> tuple[str, str]:
    done = subprocess.run(
        [CHROMIUM, *HEADLESS, f"--user-data-dir={tmp_path / 'profile'}", *flags, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
@pytest.mark.parametrize("name", ["std_offset", *BIASED])
def test_the_page_opens_in_chromium_with_no_console_errors(solved, pages, name, tmp_path):
    decisions = explained(*realized(solved, name))["decisions"]
    values = [d for d in decisions if d["kind"] == "value"]
    # open the first decision as a click would: its handler marks its source line
    opened = tmp_path / "opened.html"
    click = '<script>document.querySelector("details.decision").open = true;</script>'
    opened.write_text(pages(name).read_text().replace("</body>", click + "</body>"))
    flags = ("--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom")
    dom, log = _chromium(opened, tmp_path, *flags)
    assert not [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert dom.count('class="decision"') == len(decisions)
    assert dom.count('<details class="stage">') == 4 * len(values)  # kernel, affine, llvm, machine
    assert 'class="mark"' in dom
