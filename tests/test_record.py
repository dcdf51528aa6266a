"""bench/record.py: this machine's section of docs/performance.md rebuilt from its
benchmarks' blocks, other sections and the text around them untouched, a missing section
added after the last, malformed markers refused on one located line. No benchmark runs:
the blocks are rendered from figures given here, and the scripts' runs are faked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, bench_script

from presk.cli.common import run_cli

record = bench_script("record")
HEADING = "AMD EPYC (znver5), 2 cores, 64-byte vectors"
PAGE = """# Performance

Text before the sections.

<!-- record: znver5 -->
## AMD EPYC (znver5), 2 cores, 64-byte vectors

<!-- bench: peers -->
### Against PyTorch eager

old peers
<!-- /bench -->

<!-- bench: gemm -->
### A 1024³ product in the layout space

old gemm
<!-- /bench -->
<!-- /record -->

<!-- record: emeraldrapids -->
## Intel Xeon (emeraldrapids), 2 cores, 64-byte vectors

<!-- bench: compile -->
old compile
<!-- /bench -->
<!-- /record -->

## The test suite and a fresh clone

Text after them.
"""
PEERS = {
    "torch": "2.13.0",
    "onnxruntime": "1.32.0",
    "threads": 2,
    "repeat": 10,
    "omp_wait_policy": "unset",
    "plan": "auto",
    "peers": ["eager", "compile", "onnxruntime"],
    "rows": [
        {"model": m, "entry": e, "type": "f32", "presk_ms": p, "torch_ms": t, **more}
        for m, e, p, t, more in [
            ("tiny", "forward", 0.039, 0.220, {"compile_ms": 0.195, "onnxruntime_ms": 0.050}),
            ("tiny", "training step", 0.237, 1.688, {"compile_ms": 1.50}),
            ("corpus", "forward", 2.36, 2.82, {"compile_ms": 2.5, "onnxruntime_ms": 1.4}),
            ("corpus", "training step", 12.5, 20.2, {"compile_ms": 16.0}),
        ]
    ],
}
GEMM = {
    "threads": 2,
    "repeat": 3,
    "products": [
        {
            "n": 1024,
            "type": "f32",
            "numpy": 210.0,
            "contracts": {
                c: {
                    "best": best,
                    "best_layout": {"form": "tiled", "tile": [4, 64], "kblock": k, "order": o,
                                    "lanes": 16, "pack": "b", "split": [0, 2], "epilogue": False},
                    "pick": pick,
                    "pick_layout": {"form": "tiled", "tile": [4, 64], "kblock": 0, "order": "JI",
                                    "lanes": 16, "pack": "b", "split": [0, 2], "epilogue": False},
                    "turns": {"presk": presk, "numpy": numpy},
                }
                for c, best, k, o, pick, presk, numpy in [
                    ("none", 300.0, 128, "JIK", 250.0, 270.0, 214.0),
                    ("fma", 380.0, 0, "JI", 380.0, 374.0, 231.0),
                ]
            },
        }
    ],
}  # fmt: skip
COMPILE = {
    "realize": "f32",
    "cold": [{"kernels": 150, "first": f, "lower": 1.0} for f in (2.1, 2.0, 2.3)],
    "warm": [{"kernels": 150, "first": f, "lower": 0.9} for f in (0.037, 0.026, 0.04)],
}


def peers_block(date: str = "2026-12-09"):
    return record.block("peers", PEERS, date, (0.3, 0.5))


def test_this_machines_blocks_are_replaced_and_the_rest_kept():
    page, body, changes = record.rewrite(PAGE, "p.md", "znver5", HEADING, [peers_block()])
    assert changes == ["peers: replaced", "gemm: kept (not run)"]
    assert "old peers" not in page and "old gemm" in body
    assert body in page and body.startswith("<!-- record: znver5 -->\n## " + HEADING)
    assert page.index("<!-- bench: peers -->") < page.index("<!-- bench: gemm -->")
    start = PAGE.index("<!-- record: znver5 -->")
    end = PAGE.index("<!-- /record -->") + len("<!-- /record -->\n")
    assert page == PAGE[:start] + body + PAGE[end:]  # nothing else moved
    assert "2026-12-09, load average 0.3–0.5" in body
    header = "| model | entry | presk | PyTorch eager | torch.compile | onnxruntime |"
    assert header in body
    forward = "| tiny MiniGPT | forward | 0.039 ms | 0.18 (0.220 ms) | 0.20 (0.195 ms) | 0.78 (0.050 ms) |"
    assert forward in body
    assert (
        "| tiny MiniGPT | training step | 0.237 ms | 0.14 (1.69 ms) | 0.16 (1.50 ms) | — |" in body
    )
    assert "| course GPT | training step | not measured | — | — | — |" in body
    assert "default plan (`auto`)" in body and "onnxruntime 1.32.0" in body
    # The page written is read back the same way, and the same figures change nothing.
    again, _, changes = record.rewrite(page, "p.md", "znver5", HEADING, [peers_block()])
    assert again == page and changes == ["peers: unchanged", "gemm: kept (not run)"]


def test_a_missing_section_is_added_after_the_last():
    heading = "AMD EPYC (znver1), 2 cores, 32-byte vectors"
    blocks = [record.block("compile", COMPILE, "2026-12-09", (1.0, 1.2)), peers_block()]
    page, body, changes = record.rewrite(PAGE, "p.md", "znver1", heading, blocks)
    assert changes == ["section `znver1` added", "compile: added", "peers: added"]
    after = PAGE.index("<!-- /record -->\n\n## The test suite") + len("<!-- /record -->\n")
    assert page == PAGE[:after] + "\n" + body + PAGE[after:]
    assert body.index("<!-- bench: peers -->") < body.index("<!-- bench: compile -->")
    kinds = [s.kind for s in record.sections(page, "p.md")]
    assert kinds == ["znver5", "emeraldrapids", "znver1"]
    # A page with no section at all gets it at its end.
    page, body, _ = record.rewrite("# Performance\n", "p.md", "znver1", heading, blocks)
    assert page == "# Performance\n\n" + body


def test_a_heading_of_another_machine_of_the_kind_is_said():
    _, body, changes = record.rewrite(PAGE, "p.md", "znver5", "AMD EPYC (znver5), 4 cores", [])
    assert "## AMD EPYC (znver5), 4 cores\n" in body
    assert changes[0].startswith(f"heading `{HEADING}` now `AMD EPYC (znver5), 4 cores`")


def test_a_benchmark_not_measured_keeps_the_figures_there():
    absent = record.unmeasured("peers")
    page, _, changes = record.rewrite(PAGE, "p.md", "znver5", HEADING, [absent])
    assert page == PAGE
    assert changes == ["peers: not measured, the figures there kept", "gemm: kept (not run)"]
    _, body, changes = record.rewrite(PAGE, "p.md", "znver1", "znver1", [absent])
    assert "Not measured: PyTorch absent (`pip install -e .[peers]`)." in body
    assert changes[1] == "peers: added (not measured)"


def test_the_blocks_figures():
    gemm = "\n".join(record.gemm_figures(GEMM))
    assert (
        "| 1024³ f32, exact | 270.0 | 214.0 | 1.26 | [4, 64] JIK, k-block 128, pack b "
        "| [4, 64] JI, pack b, 1.20× from the best |"
    ) in gemm
    assert (
        '| 1024³ f32, fused (`"contract": "fma"`) | 374.0 | 231.0 | 1.62 | [4, 64] JI, pack b | [4, 64] JI, pack b |'
        in gemm
    )
    compile_time = "\n".join(record.compile_figures(COMPILE))
    assert "in f32 (150 kernels)" in compile_time and "; 3 runs:" in compile_time
    assert "| cold: an empty kernel cache | 2.00 s | 2.10 s |" in compile_time
    assert "| warm: the cache the cold run filled | 26.0 ms | 37.0 ms |" in compile_time
    assert "| the lowering before it, not counted | 900 ms | 950 ms |" in compile_time


MALFORMED = {
    "no colon": ("<!-- record znver5 -->\n", 1, "a malformed marker"),
    "no spaces": ("<!--record: znver5-->\n", 1, "a malformed marker"),
    "text after": ("<!-- /record --> x\n", 1, "a malformed marker"),
    "a closing name": ("<!-- record: a -->\n<!-- /record: a -->\n", 2, "names nothing"),
    "an opening without": ("<!-- record -->\n", 1, "`record` needs a name"),
    "nested": ("<!-- record: a -->\n<!-- record: b -->\n", 2, "the section `a` of line 1 is open"),
    "unopened": ("x\n<!-- /record -->\n", 2, "closes no section"),
    "unclosed": ("<!-- record: a -->\n## A\n", 1, "the section `a` is never closed"),
    "twice": ("<!-- record: a -->\n<!-- /record -->\n<!-- record: a -->\n", 3, "a second section"),
    "outside": ("<!-- bench: peers -->\n", 1, "outside any machine's section"),
    "unknown": ("<!-- record: a -->\n  <!-- bench: nothing -->\n", 2, "no benchmark `nothing`"),
    "block open": (
        "<!-- record: a -->\n<!-- bench: peers -->\n<!-- /record -->\n",
        3,
        "the block `peers` of line 2 is not closed",
    ),
    "block unclosed": ("<!-- record: a -->\n<!-- bench: gemm -->\n", 2, "is never closed"),
    "block twice": (
        "<!-- record: a -->\n<!-- bench: gemm -->\n<!-- /bench -->\n<!-- bench: gemm -->\n",
        4,
        "a second block `gemm` in the section `a`",
    ),
    "no block": ("<!-- record: a -->\n<!-- /bench -->\n", 2, "closes no block"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_markers_are_refused_on_their_line(case):
    text, line, message = MALFORMED[case]
    with pytest.raises(record.RecordError) as e:
        record.sections(text, "p.md")
    col = 3 if case == "unknown" else 1
    assert e.value.code == "E0008"
    assert str(e.value).startswith(f"p.md:{line}:{col}: error[E0008]: ")
    assert message in str(e.value)


def test_the_page_of_record_is_well_formed():
    page = (REPO / "docs" / "performance.md").read_text()
    sections = record.sections(page, "docs/performance.md")
    assert [s.kind for s in sections] == ["znver5", "emeraldrapids", "znver1"]
    for s in sections:
        assert s.heading.startswith(("AMD EPYC (", "Intel Xeon (")) and f"({s.kind})" in s.heading
        for name, text in s.blocks.items():
            assert text.startswith(f"### {record.BENCHMARKS[name].title}\n\n`python bench/")


def faked_run(monkeypatch, name: str, stdout: str, status: int = 0) -> None:
    """The benchmark's script, run as `measure` runs it, printing `stdout`."""

    def run(argv, **kwargs):
        assert argv == [sys.executable, *record.BENCHMARKS[name].argv, "--json"]
        return subprocess.CompletedProcess(argv, status, stdout=stdout)

    monkeypatch.setattr(record.subprocess, "run", run)


def test_a_scripts_figures_are_checked(monkeypatch):
    faked_run(monkeypatch, "compile", "its report\n" + json.dumps(COMPILE | {"realize": 1}))
    with pytest.raises(record.RecordError, match="compile_time.py --json: 1 is not of type"):
        record.measure("compile")
    faked_run(monkeypatch, "compile", "", status=1)
    with pytest.raises(record.RecordError, match=r"failed \(exit status 1\); nothing written"):
        record.measure("compile")
    faked_run(monkeypatch, "compile", "{")
    with pytest.raises(record.RecordError, match="--json: 1:2: not JSON"):
        record.measure("compile")
    faked_run(monkeypatch, "compile", json.dumps(COMPILE))
    assert "| cold: an empty kernel cache | 2.00 s | 2.10 s |" in record.measure("compile").text


def test_peers_without_pytorch_is_not_measured(monkeypatch):
    monkeypatch.setattr(record.importlib.util, "find_spec", lambda name: None)
    assert not record.measure("peers").measured


@pytest.fixture
def this_machine(monkeypatch):
    monkeypatch.setattr(record, "host_cpu", lambda: ("znver5", ""))
    monkeypatch.setattr(record, "machine", lambda: HEADING)
    monkeypatch.setattr(record, "measure", lambda name: peers_block())


def test_the_command_writes_the_page_or_prints_the_section(tmp_path, this_machine, capsys):
    page = tmp_path / "performance.md"
    page.write_text(PAGE)
    assert run_cli(record.main, ["--only", "peers", "--dry-run", "--page", str(page)]) == 0
    out = capsys.readouterr().out
    assert page.read_text() == PAGE
    assert out.startswith("<!-- record: znver5 -->\n") and "| 0.18 (0.220 ms) |" in out
    assert out.endswith("  peers: replaced\n  gemm: kept (not run)\nnot written (--dry-run)\n")
    assert run_cli(record.main, ["--only", "peers", "--page", str(page)]) == 0
    assert capsys.readouterr().out.endswith(f"  gemm: kept (not run)\nwrote {page}\n")
    assert "| 0.18 (0.220 ms) |" in page.read_text() and "old gemm" in page.read_text()


def test_the_command_refuses_bad_input_in_one_line(tmp_path, this_machine, capsys):
    page = tmp_path / "performance.md"
    page.write_text(PAGE.replace("<!-- /bench -->", "<!-- /bench", 1))
    assert run_cli(record.main, ["--page", str(page)]) == 1
    assert capsys.readouterr().err.startswith(f"{page}:12:1: error[E0008]: a malformed marker")
    assert run_cli(record.main, ["--only", "peers,nothing", "--page", str(page)]) == 1
    assert "error[E0001]: --only nothing: no such benchmark" in capsys.readouterr().err
    assert run_cli(record.main, ["--page", str(tmp_path)]) == 1
    assert "error[E0002]" in capsys.readouterr().err
