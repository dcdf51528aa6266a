"""What the tests of `presk import` share: the ONNX fixtures, the bands, onnxruntime on a
graph (the independent peer), and presk's own first-order bound on an imported program
at a calibration sample's inputs (docs/precision.md, section 3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from conftest import REPO, run_in_process
from onnx import numpy_helper

import presk
from presk.precision.bound import Propagation
from presk.precision.envelope import Envelope, read_envelope
from presk.realize import Realization

DATA = REPO / "tests" / "data" / "onnx"
F64, F32 = (2.0**-40, 2.0**-50), (2.0**-15, 2.0**-20)  # (ε, a) of docs/conformance.md
CALIBRATION_BITS = 64  # the envelope's magnitudes; the gaps are measured at EXACT_BITS
EXACT_BITS = 96


def flags(dims: dict[str, int]) -> list[str]:
    return [f"--dim={d}={n}" for d, n in dims.items()]


def import_model(name: str, folder: Path, dims: dict[str, int], *more: str) -> Path:
    r = run_in_process(
        "presk", "import", str(DATA / f"{name}.onnx"), "--out", str(folder), *flags(dims), *more
    )
    assert r.returncode == 0, r.stderr
    return folder


def band_gap(x: np.ndarray, exact: np.ndarray, band) -> float:
    """The worst |x − x̂| / (ε (|x̂| + a)): within the band when at most 1."""
    eps, a = band
    return float(np.max(np.abs(x - exact) / (eps * (np.abs(exact) + a))))


def onnxruntime(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The graph's first output on one thread of onnxruntime's CPU provider, as float64."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0].astype(np.float64)


def with_initializers(path: Path, arrays: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The graph at `path` with each initializer `arrays` names replaced by its array, in
    the initializer's own type; every array must name one."""
    model = onnx.load(str(path))
    graph = model.graph.initializer
    unknown = set(arrays) - {t.name for t in graph}
    assert not unknown, f"arrays for no initializer of {path.name}: {sorted(unknown)}"
    for i, t in enumerate(graph):
        if t.name in arrays:
            dtype = numpy_helper.to_array(t).dtype
            graph[i].CopyFrom(numpy_helper.from_array(arrays[t.name].astype(dtype), t.name))
    return model


def calibrated(
    program: Path, entry: str, dims: dict[str, int], weights: Path, out: Path, seed: int = 0
) -> Envelope:
    """The magnitude envelope of `entry` over one sample: the parameters of `weights`,
    inputs drawn from `seed` (presk calibrate --precision)."""
    r = run_in_process(
        "presk", "calibrate", "--precision", str(program), "--entry", entry, *flags(dims),
        "--weights", str(weights), "--samples", "1", "--seed", str(seed), "--workers", "1",
        "--bits", str(CALIBRATION_BITS), "--out", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return read_envelope(str(out))


def bound(core: presk.Core, envelope: Envelope, realize: str) -> float:
    """`presk check --precision`'s bound (cond) on the largest elementwise gap of the
    output under `realize` over the envelope's samples."""
    return Propagation(core, envelope, Realization(realize, spelling=realize)).run("cond").bound
