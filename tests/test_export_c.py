"""`presk export --target c`: the exported C program, built with the system cc under
-std=c99 -Wall -Werror, gives --backend mlir's bits on a few small entries in f64 and f32
(`make c-conformance` runs every conformance case and tutorial entry, bf16 too); a bad
index stops it; what it cannot run is refused with a code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from presk.cli.common import run_cli
from presk.cli.main import main
from tests.conformance.suite import SAMPLE, Case

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import c_conformance  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

CASES = [
    Case("linear", "tutorial/01_linear.psk", "Linear{3, 2}.apply", ("batch=4",)),
    Case("layernorm", "tutorial/04_norms.psk", "LayerNorm{8}.apply", ("B=2", "T=4")),
    Case("cross_entropy", "tests/data/prims.psk", "cross_entropy_", ("N=3", "M=4", "K=5")),
]


@pytest.mark.parametrize("machine", ["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_export_gives_the_mlir_backends_bits(case, machine, tmp_path):
    assert c_conformance.check(case, machine, tmp_path) == "same"
    source = (tmp_path / "model.c").read_text()
    assert "presk_launch" in source and "k0_" in source  # the kernels and the host, emitted


LINEAR = ["tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4"]


def test_the_command_writes_a_program_that_builds(tmp_path, capsys):
    out = tmp_path / "lin"
    assert (
        main(
            [
                "export",
                str(REPO / LINEAR[0]),
                *LINEAR[1:],
                "--realize",
                "bf16",
                "--target",
                "c",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "Makefile",
        "main.c",
        "model.bin",
        "model.c",
        "model.h",
    ]
    header = (out / "model.h").read_text()
    assert "uint16_t x[4][3]" in header and "#define MODEL_INPUTS 1" in header
    build = subprocess.run(["make", "-s", "-C", str(out)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr


def test_an_index_out_of_range_stops_the_program(tmp_path):
    case = CASES[2]
    c_conformance.check(case, "f64", tmp_path)  # built, and inputs.bin written
    bad = bytearray((tmp_path / "inputs.bin").read_bytes())
    targets_at = len(bad) - 3 * 8  # the targets follow the logits, int64 each
    bad[targets_at : targets_at + 8] = np.int64(4).tobytes()  # M = 4: out of range
    (tmp_path / "inputs.bin").write_bytes(bytes(bad))
    names = [str(tmp_path / n) for n in ("model", "model.bin", "inputs.bin", "outputs.bin")]
    run = subprocess.run(names, capture_output=True, text=True)
    assert run.returncode == 2 and "index check 1 failed" in run.stderr


def test_what_the_export_cannot_run_is_refused(tmp_path, capsys):
    dims = [a for d in SAMPLE.bindings for a in ("--dim", d)]
    args = ["export", str(REPO / SAMPLE.path), "--entry", SAMPLE.entry, *dims]
    assert run_cli(main, [*args, "--out", str(tmp_path / "s")]) == 1
    assert "error[E0001]: the C export cannot run the host step `sample`" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    linear = ["export", str(REPO / LINEAR[0]), *LINEAR[1:]]
    assert run_cli(main, [*linear, "--out", str(tmp_path / "file")]) == 1
    assert "error[E0003]" in capsys.readouterr().err
