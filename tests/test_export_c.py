"""`presk export --target c`: the exported C program, built with the system cc under
-std=c99 -Wall -Werror, gives --backend mlir's bits on a few small entries in f64 and f32
(`make c-conformance` runs every conformance case and tutorial entry, bf16 too), its
parameters read from a checkpoint (`./model --weights CKPT.psk.d`) and converted in C as
presk converts them, integer weights included; a checkpoint of another model or a damaged
one is refused; a bad index stops it; what it cannot run is refused with a code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from presk.cli.common import run_cli
from presk.cli.main import main
from presk.runtime import pskd
from tests.conformance.suite import EXAMPLES, SAMPLE, Case

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
        "checkpoint.c",
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


@pytest.mark.parametrize(
    ("machine", "stored"),
    [("f32", np.float32), ("bf16", np.float32), ("bf16", ml_dtypes.bfloat16), ("f64", np.float32)],
    ids=["f32 from f32", "bf16 from f32", "bf16 from bf16", "f64 from f32"],
)
def test_a_checkpoint_of_another_type_is_converted_as_presk_converts_it(machine, stored, tmp_path):
    assert c_conformance.check(CASES[0], machine, tmp_path, stored) == "same"


@pytest.mark.parametrize(
    "quant",
    [
        {"default": "f32", "quant": {"w": {"bits": 8, "over": 0, "scheme": "absmax"}}},
        {"default": "f64", "quant": {"w": {"bits": 4, "over": -1, "scheme": "pow2"}}},
    ],
    ids=["int8 absmax", "int4 pow2"],
)
def test_integer_weights_are_quantised_in_c_as_presk_quantises_them(quant, tmp_path):
    realization = tmp_path / "R.json"
    realization.write_text(json.dumps(quant))
    # w is [2, 3]: at 4 bits each row's last byte holds one integer
    odd = Case("linear", "tutorial/01_linear.psk", "Linear{2, 3}.apply", ("batch=4",))
    assert c_conformance.check(odd, f"@{realization}", tmp_path / "c") == "same"
    # the integers and scales C made are the bytes presk writes to model.bin for them
    exported = tmp_path / "exported"
    c_conformance.export_c(
        c_conformance.core_of(odd).lower(f"@{realization}"), params=c_conformance.inputs(odd)[0]
    ).write(exported)
    image = _model_bin_after_reading(tmp_path / "c")
    assert image == (exported / "model.bin").read_bytes()


def test_a_mixed_realization_of_a_stacked_model_reads_its_checkpoint(tmp_path):
    """Typed, int4 and int8 leaves of a fold's stacked parameters, from a bf16 checkpoint."""
    realization = tmp_path / "R.json"
    realization.write_text(json.dumps(MIXED))
    minigpt = next(c for c in EXAMPLES if c.name == "MiniGPT.apply (tiny)")
    work = tmp_path / "c"
    assert c_conformance.check(minigpt, f"@{realization}", work, ml_dtypes.bfloat16) == "same"
    assert "MODEL_INT4" in (work / "model.h").read_text()


MIXED = {
    "default": "f32",
    "params": {"pos": "bf16"},
    "quant": {
        "blocks.ff.up.w": {"bits": 4, "over": -2, "scheme": "absmax"},
        "blocks.ff.down.w": {"bits": 8, "over": -1, "scheme": "pow2"},
    },
}


def _model_bin_after_reading(work: Path) -> bytes:
    """model.bin's image once `work`'s checkpoint replaced its parameters, as
    `model_read_checkpoint` leaves it (a small C program beside the model writes it)."""
    (work / "dump.c").write_text(DUMP)
    build = subprocess.run(
        "cc -std=c99 -Wall -Werror -o dump dump.c checkpoint.c -lm".split(),
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    names = ["dump", "model.bin", c_conformance.CHECKPOINT, "image.bin"]
    run = subprocess.run([str(work / n) for n in names], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return (work / "image.bin").read_bytes()


DUMP = """#include "model.h"
#include <stdio.h>
int presk_read_checkpoint(const char *dir, uint8_t *data, char *why, size_t size);
static uint8_t data[MODEL_DATA_BYTES + 1];
int main(int argc, char **argv) {
  char why[512];
  FILE *f = fopen(argv[1], "rb");
  if (argc != 4 || f == NULL || fread(data, 1, MODEL_DATA_BYTES, f) != MODEL_DATA_BYTES) return 3;
  fclose(f);
  if (presk_read_checkpoint(argv[2], data, why, sizeof why) != 0) return fprintf(stderr, "%s", why), 1;
  f = fopen(argv[3], "wb");
  return f == NULL || fwrite(data, 1, MODEL_DATA_BYTES, f) != MODEL_DATA_BYTES || fclose(f);
}
"""


@pytest.fixture(scope="module")
def linear(tmp_path_factory) -> Path:
    """Linear{3, 2} exported in f32, built, with inputs.bin and a checkpoint of its own."""
    work = tmp_path_factory.mktemp("linear")
    c_conformance.run_c(CASES[0], "f32", work)
    return work


def _run_with(work: Path, ckpt: Path) -> subprocess.CompletedProcess:
    names = [str(work / n) for n in ("model.bin", "inputs.bin", "outputs.bin")]
    return subprocess.run(
        [str(work / "model"), "--weights", str(ckpt), *names], capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"params/w": np.zeros((4, 2))}, "parameter w has shape [4, 2], the program's is [3, 2]"),
        ({"params/w": np.zeros((3, 2))}, "has no parameter b of this program"),
        (
            {"params/g": np.zeros(2), "params/w": np.zeros((3, 2)), "params/b": np.zeros(2)},
            "has parameter g, which this program lacks",
        ),
        (
            {"params/w": np.zeros((3, 2), np.int64), "params/b": np.zeros(2)},
            "parameter w is stored as int64",
        ),
    ],
    ids=["shape", "missing", "extra", "dtype"],
)
def test_a_checkpoint_of_another_model_is_refused(linear, tmp_path, arrays, message):
    pskd.write(str(tmp_path / "other.psk.d"), pskd.Container("checkpoint", {}, arrays))
    run = _run_with(linear, tmp_path / "other.psk.d")
    assert run.returncode == 1 and message in run.stderr, run.stderr


def test_a_damaged_checkpoint_is_refused(linear, tmp_path):
    ckpt = tmp_path / "ckpt.psk.d"
    shutil.copytree(linear / c_conformance.CHECKPOINT, ckpt)
    payload = (ckpt / "payload.bin").read_bytes()
    (ckpt / "payload.bin").write_bytes(payload[:-1])
    run = _run_with(linear, ckpt)
    assert run.returncode == 1
    assert (
        f"truncated: the payload has {len(payload) - 1} of its {len(payload)} bytes" in run.stderr
    )
    (ckpt / "payload.bin").write_bytes(payload[:-1] + bytes([payload[-1] ^ 1]))
    run = _run_with(linear, ckpt)
    assert run.returncode == 1 and "does not match its checksum" in run.stderr
    (ckpt / "payload.bin").write_bytes(payload)
    header = (ckpt / "header.json").read_text()
    (ckpt / "header.json").write_text(header.replace('"version": 1', '"version": 1, "extra": 0'))
    run = _run_with(linear, ckpt)
    assert run.returncode == 1 and "unknown key `extra`" in run.stderr
    (ckpt / "header.json").write_text(header)
    assert _run_with(linear, ckpt).returncode == 0


def test_what_the_export_cannot_run_is_refused(tmp_path, capsys):
    dims = [a for d in SAMPLE.bindings for a in ("--dim", d)]
    args = ["export", str(REPO / SAMPLE.path), "--entry", SAMPLE.entry, *dims]
    assert run_cli(main, [*args, "--out", str(tmp_path / "s")]) == 1
    assert "error[E0001]: the C export cannot run the host step `sample`" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    linear = ["export", str(REPO / LINEAR[0]), *LINEAR[1:]]
    assert run_cli(main, [*linear, "--out", str(tmp_path / "file")]) == 1
    assert "error[E0003]" in capsys.readouterr().err
