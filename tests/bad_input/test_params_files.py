"""Parameters files (`--weights P.npz|P.safetensors`) that are not this program's: refused."""

from __future__ import annotations

import io

import numpy as np
import pytest
import safetensors.numpy
from programs import REPO

from bad_input.refusal import refuse

REGRESSION = str(REPO / "tests" / "train" / "mlp_regression.psk")
LOSS = [REGRESSION, "--entry", "loss", "--dim", "N=8"]
SHAPES = {"l1.w": (3, 16), "l1.b": (16,), "l2.w": (16, 16), "l2.b": (16,), "v": (16,), "c": ()}


def good() -> dict[str, np.ndarray]:
    return {k: np.zeros(s) for k, s in SHAPES.items()}


def npz_bytes(arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def changed(**edits) -> dict[str, np.ndarray]:
    arrays = good()
    for k, v in edits.items():
        if v is None:
            del arrays[k.replace("__", ".")]
        else:
            arrays[k.replace("__", ".")] = v
    return arrays


# name, the arrays, the code, part of the message
CASES = [
    ("wrong_shape", changed(v=np.zeros(15)), "E9005", "shape"),
    ("missing_leaf", changed(c=None), "E9005", "no parameter c"),
    ("extra_leaf", {**good(), "w3": np.zeros(2)}, "E9005", "w3"),
    ("text", changed(l1__b=np.full(16, "w")), "E9006", "<U1"),
    ("booleans", changed(l1__b=np.zeros(16, bool)), "E9006", "bool"),
    ("complex", changed(v=np.zeros(16, complex)), "E9006", "complex"),
]


LAYOUTS = [
    pytest.param(suffix, *case, id=f"{case[0]}{suffix}")
    for suffix in (".npz", ".safetensors")
    for case in CASES
    if not (suffix == ".safetensors" and case[0] in ("complex", "text"))  # no such dtypes
]


@pytest.mark.parametrize("suffix, name, arrays, code, says", LAYOUTS)
def test_a_parameters_file_of_another_layout_or_type_is_refused(
    tmp_path, suffix, name, arrays, code, says
):
    path = tmp_path / f"p{suffix}"
    write = npz_bytes if suffix == ".npz" else safetensors.numpy.save
    path.write_bytes(write(arrays))
    refuse(["run", *LOSS, "--weights", path], code=code, says=says)


GARBAGE = [
    ("empty", b""),
    ("text", b"not an archive\n"),
    ("npy", None),  # a .npy array under an .npz name
    ("truncated", None),
    ("object_array", None),
    ("huge_header", (2**40).to_bytes(8, "little") + b"{}"),
]


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("name, data", GARBAGE, ids=[g[0] for g in GARBAGE])
def test_a_file_that_is_no_parameters_file_is_refused(tmp_path, suffix, name, data):
    path = tmp_path / f"p{suffix}"
    if name == "npy":
        buf = io.BytesIO()
        np.save(buf, np.zeros(3))
        data = buf.getvalue()
    elif name == "truncated":
        whole = npz_bytes(good()) if suffix == ".npz" else safetensors.numpy.save(good())
        data = whole[: len(whole) // 2]
    elif name == "object_array":
        buf = io.BytesIO()
        np.savez(buf, **changed(v=np.array([None] * 16, dtype=object)))
        data = buf.getvalue()
    path.write_bytes(data)
    refuse(["run", *LOSS, "--weights", path], code="E9006")


def test_a_missing_parameters_file_is_refused(tmp_path):
    refuse(["run", *LOSS, "--weights", tmp_path / "absent.npz"], code="E0002")


def test_params_writes_only_npz_or_safetensors(tmp_path):
    refuse(["params", *LOSS, "--out", tmp_path / "p.txt"], code="E0001")
