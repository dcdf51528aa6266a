"""presk explain: every decision of a solved realization with its reason, one site through
every stage, and the HTML page in a real headless browser.

Programs solved at 2 samples and 64 bits: two of tests/data/widening, std_offset (its
proposal widened by measurement, a value left out by rule 1) and sum_equal at the default
--min-gain (its row sums left out by rule 2), and the training tests' MLP regression (its
parameters)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from presk import api, stages
from presk.cli.main import main

TESTS = Path(__file__).resolve().parent
SOLVES = {  # name: program, its entry and sizes, budget
    "std_offset": (TESTS / "data/widening/std_offset.psk", ["--entry", "loss"], "1e-3"),
    "sum_equal": (TESTS / "data/widening/sum_equal.psk", ["--entry", "loss"], "1e-5"),
    "mlp": (
        TESTS / "train/mlp_regression.psk",
        ["--entry", "Regression.loss", "--dim", "N=4"],
        "1e-3",
    ),
}
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
        flags = ("--bits", "64", "--samples", "2", "--workers", "1", "--out", env)
        presk("calibrate", "--precision", program, *entry, *flags)
        solve = [*entry, "--precision", str(env), "--budget", budget, "--workers", "1"]
        presk("solve", program, *solve, "--out", work / "r.json")
        out[name] = (str(program), work / "r.json", solve)
    return out


def explained(program: str, *flags) -> dict:
    return json.loads(presk("explain", program, "--format", "json", *flags))


def realized(solved, name: str) -> list[str]:
    """A solved program and the flags that explain its record."""
    program, record, _ = solved[name]
    return [program, *SOLVES[name][1], "--realize", f"@{record}"]


@pytest.mark.parametrize("name", SOLVES)
def test_no_site_of_a_solved_realization_is_without_a_reason(solved, name):
    program, *flags = realized(solved, name)
    doc = explained(program, *flags)
    entry, sizes = SOLVES[name][1][1], dict(s.split("=") for s in SOLVES[name][1][3::2])
    core = api.load(program).elaborate(entry=entry, dims={k: int(v) for k, v in sizes.items()})
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
    assert any(s.startswith("refused f32 → bf16: the estimate would be") for s in why["loss/%6"])
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
def test_the_page_opens_in_chromium_with_no_console_errors(solved, tmp_path):
    program, record, _ = solved["std_offset"]
    page = tmp_path / "page.html"
    presk(
        "explain",
        program,
        "--entry",
        "loss",
        "--realize",
        f"@{record}",
        "--format",
        "html",
        "--out",
        page,
    )
    decisions = len(explained(*realized(solved, "std_offset"))["decisions"])
    # open the first decision as a click would: its handler marks its source line
    opened = tmp_path / "opened.html"
    click = '<script>document.querySelector("details.decision").open = true;</script>'
    opened.write_text(page.read_text().replace("</body>", click + "</body>"))
    flags = ("--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom")
    dom, log = _chromium(opened, tmp_path, *flags)
    assert not [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert dom.count('class="decision"') == decisions
    assert dom.count('<details class="stage">') == 4 * decisions  # kernel, affine, llvm, machine
    assert 'class="mark"' in dom
