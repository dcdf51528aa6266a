"""The exact reference as a whole: its own gap, determinism, checkpoints, the command."""

from __future__ import annotations

import json
import shutil

import mpmath
import numpy as np
import pytest
from conftest import assert_user_error, run_in_process, run_tool
from programs import REPO, program_of, reference_run

from presk.runtime import checkpoint, rng
from presk.runtime.inputs import param_type
from presk.runtime.values import leaves

LINEAR = REPO / "tutorial" / "01_linear.psk"
ENTRIES = [
    (REPO / "tutorial" / "01_linear.psk", "Linear{3, 2}.apply", {"batch": 4}),
    (REPO / "tutorial" / "02_regression.psk", "MLP{4, 8, 1}.mse", {"N": 16}),
    (REPO / "tutorial" / "03_attention.psk", "attention", {"B": 1, "T": 4}),
    (REPO / "tutorial" / "04_norms.psk", "LayerNorm{8}.apply", {"B": 2, "T": 4}),
    (REPO / "tutorial" / "04_norms.psk", "RMSNorm{8}.apply", {"B": 2, "T": 4}),
    (REPO / "tutorial" / "05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.loss", {"B": 2, "T": 8}),
]


def _mpf_leaves(value):
    return [np.asarray(t.data, dtype=object) for _, t in leaves(value)]


@pytest.mark.parametrize("path,entry,dims", ENTRIES, ids=[e for _, e, _ in ENTRIES])
def test_reference_gap_between_p_and_2p_bits(path, entry, dims):
    """|f_p − f_2p| ≤ 2^(10−p)·max|f|: the reference's own gap δ_p is roundoff at p bits."""
    program = program_of(path, entry, dims)
    p = 64
    _, _, lo = reference_run(program, bits=p)
    _, _, hi = reference_run(program, bits=2 * p)
    with mpmath.workprec(4 * p):
        for a, b in zip(_mpf_leaves(lo), _mpf_leaves(hi), strict=True):
            scale = max(abs(mpmath.mpf(x)) for x in b.flat)
            gap = max(
                abs(mpmath.mpf(x) - mpmath.mpf(y)) for x, y in zip(a.flat, b.flat, strict=True)
            )
            assert gap <= mpmath.mpf(2) ** (10 - p) * scale, (entry, gap, scale)
            # and the two runs did differ in rounding: 2p bits is not p bits padded
            assert (
                any(mpmath.mpf(x) != mpmath.mpf(y) for x, y in zip(a.flat, b.flat, strict=True))
                or scale == 0
            )


def test_same_seed_same_bits_across_processes():
    args = [
        "run",
        str(LINEAR),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--format",
        "json",
    ]
    first, second = run_tool("presk", *args), run_tool("presk", *args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    other = run_tool("presk", *args, "--seed", "1")
    assert json.loads(other.stdout)["output"] != json.loads(first.stdout)["output"]


def test_draws_are_keyed_by_path_not_by_order():
    a = rng.normal(0, "param/w", (3,))
    b = rng.normal(0, "param/b", (3,))
    assert not np.array_equal(a, b)
    rng.normal(0, "param/other", (100,))  # drawing something else shifts nothing
    assert np.array_equal(rng.normal(0, "param/w", (3,)), a)
    assert not np.array_equal(rng.normal(1, "param/w", (3,)), a)


def test_run_prints_the_output_with_its_axes_and_writes_npz(tmp_path):
    out = tmp_path / "y.npz"
    proc = run_in_process(
        "presk",
        "run",
        str(LINEAR),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--backend",
        "interp",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "ℝ[batch: 4, 2]"
    y = np.load(out)["output"]
    assert y.shape == (4, 2) and y.dtype == np.float64
    js = json.loads(
        run_in_process(
            "presk",
            "run",
            str(LINEAR),
            "--entry",
            "Linear{3, 2}.apply",
            "--dim",
            "batch=4",
            "--format",
            "json",
        ).stdout
    )
    assert js["output"]["axes"] == ["batch", None] and js["output"]["shape"] == [4, 2]
    digits = js["output"]["values"][0][0]
    assert len(digits.split("e")[0].replace("-", "").replace(".", "")) >= 77  # 256 bits of digits
    assert float(digits) == y[0, 0]


def test_inputs_file_replaces_the_drawn_arguments(tmp_path):
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    np.savez(tmp_path / "in.npz", x=x)
    proc = run_in_process(
        "presk",
        "run",
        str(LINEAR),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--inputs",
        str(tmp_path / "in.npz"),
        "--out",
        str(tmp_path / "y.npz"),
    )
    assert proc.returncode == 0, proc.stderr
    program = program_of(LINEAR, "Linear{3, 2}.apply", {"batch": 4})
    params, _, _ = reference_run(program)
    w, b = params["w"].data, params["b"].data
    assert np.allclose(np.load(tmp_path / "y.npz")["output"], x @ w + b, rtol=1e-15)
    np.savez(tmp_path / "bad.npz", x=x[:2])
    bad = run_in_process(
        "presk",
        "run",
        str(LINEAR),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--inputs",
        str(tmp_path / "bad.npz"),
    )
    assert_user_error(bad, code="E9006")


def _checkpoint(tmp_path, entry="Linear{3, 2}.apply"):
    program = program_of(LINEAR, entry, {"batch": 4})
    params, _, _ = reference_run(program)
    path = tmp_path / "lin.psk.d"
    checkpoint.save(str(path), params, {"program": str(LINEAR), "entry": entry})
    return program, params, path


def test_checkpoint_round_trip(tmp_path):
    program, params, path = _checkpoint(tmp_path)
    back, _ = checkpoint.load(str(path), param_type(program))
    for (pa, a), (pb, b) in zip(leaves(params), leaves(back), strict=True):
        assert pa == pb and np.array_equal(a.data.view(np.uint64), b.data.view(np.uint64))
    base = [
        "run",
        str(LINEAR),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--format",
        "json",
    ]
    assert (
        run_in_process("presk", *base, "--weights", str(path)).stdout
        == run_in_process("presk", *base).stdout
    )


def test_checkpoint_of_another_layout_is_refused(tmp_path):
    _, _, path = _checkpoint(tmp_path)
    proc = run_in_process(
        "presk",
        "run",
        str(LINEAR),
        "--entry",
        "Linear{4, 2}.apply",
        "--dim",
        "batch=4",
        "--weights",
        str(path),
    )
    # the checkpoint records In=3: refused before its shapes are read (presk/cli/recorded.py)
    first = assert_user_error(proc, code="E3015")
    assert "(In=4) disagrees with the checkpoint's In=3" in first


@pytest.mark.parametrize(
    "damage,code",
    [("truncate", "E9003"), ("flip", "E9004"), ("no-header", "E9001"), ("bad-json", "E9002")],
)
def test_damaged_checkpoints_are_refused(tmp_path, damage, code):
    _, _, path = _checkpoint(tmp_path)
    payload, header = path / "payload.bin", path / "header.json"
    if damage == "truncate":
        payload.write_bytes(payload.read_bytes()[:-5])
    elif damage == "flip":
        data = bytearray(payload.read_bytes())
        data[3] ^= 1
        payload.write_bytes(bytes(data))
    elif damage == "no-header":
        header.unlink()
    else:
        header.write_text(header.read_text()[:40])
    proc = run_in_process(
        "presk",
        "run",
        str(LINEAR),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
        "--weights",
        str(path),
    )
    assert_user_error(proc, code=code)


def test_checkpoint_writes_replace_atomically(tmp_path):
    program, params, path = _checkpoint(tmp_path)
    checkpoint.save(str(path), params, {"again": True})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lin.psk.d"]
    assert checkpoint.load(str(path), param_type(program))[1].meta == {"again": True}
    shutil.rmtree(path)


def test_a_row_the_mask_empties_is_refused(tmp_path):
    prog = tmp_path / "m.psk"
    prog.write_text("dim N\nfn f(x : ℝ[N, 3], m : bool[N, 3]) -> ℝ[N, 3] { softmax[-1](x, m) }\n")
    np.savez(
        tmp_path / "in.npz", x=np.zeros((2, 3)), m=np.array([[True, False, False], [False] * 3])
    )
    proc = run_in_process(
        "presk",
        "run",
        str(prog),
        "--entry",
        "f",
        "--dim",
        "N=2",
        "--inputs",
        str(tmp_path / "in.npz"),
    )
    first = assert_user_error(proc, code="E8002", where=f"{prog}:2:")
    assert "every position" in first


def test_log_of_a_negative_number_is_located(tmp_path):
    prog = tmp_path / "l.psk"
    prog.write_text("dim N\nfn f(x : ℝ[N]) -> ℝ[N] {\n  log(x - 10)\n}\n")
    assert_user_error(
        run_in_process("presk", "run", str(prog), "--entry", "f", "--dim", "N=2"),
        code="E8001",
        where=f"{prog}:3:3",
    )
