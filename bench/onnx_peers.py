"""presk against onnxruntime on the same ONNX graphs, for inference, in one run: the
imported GPT-2's and BERT's forward pass (tokens to logits) in f32, at the corpus GPT's
size and at GPT-2 small's.

| size | the models (tools/onnx_fixtures.py `--size`) | B | T |
|---|---|---|---|
| corpus | 64 wide, 4 layers, 4 heads, 256 tokens, 64 positions | 8 | 64 |
| gpt2-small | 768 wide, 12 layers, 12 heads, 256 tokens, 1024 positions | 1 | 128 |

For each graph: `presk import` at the size's batch and sequence, the program compiled
natively in f32 (mlir backend, its default plan) on `--threads` workers, and
onnxruntime's CPU provider on the same graph with `--threads` intra-op threads (one
inter-op thread, every graph optimisation, its other options at their defaults). Both
run on the same tokens; before timing, their logits are compared (normwise within 2⁻¹⁵
relative, else the run stops: they would not be the same function). Each time is the
median of `--repeat` calls, presk's and onnxruntime's taken in turns of back-to-back
calls with a pause between them (presk.timing.timed_in_turns: onnxruntime's threads
spin a while after a call, and would take a core from presk's next ones). The ratio printed is
presk's time over onnxruntime's: above 1, presk is slower.

The corpus-size graphs are committed in bench/onnx/. GPT-2 small's (340 MB each) are not:
the script builds those missing into runs/onnx_peers/ when PyTorch and transformers are
importable (the `interop` extra), else it says how to build them.

    python bench/onnx_peers.py [--sizes corpus,gpt2-small] [--models gpt2,bert]
        [--repeat 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import onnxruntime as ort

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from presk.api import to_numpy  # noqa: E402
from presk.cli.main import main as presk_main  # noqa: E402
from presk.importer.program import module_name  # noqa: E402
from presk.runtime.inputs import arguments  # noqa: E402
from presk.timing import SPIN, TURNS, timed_in_turns  # noqa: E402
from presk.toolchain import machine  # noqa: E402

SIZES = {"corpus": (8, 64), "gpt2-small": (1, 128)}  # (B, T)
COMMITTED = REPO / "bench" / "onnx"
BUILT = REPO / "runs" / "onnx_peers"
AGREE = 2.0**-15  # the f32 band's ε: the largest normwise gap between the two outputs


def graph(model: str, size: str) -> Path:
    """The model's graph at `size`: committed, built before, or built now."""
    name = f"{model}_{size}.onnx"
    for folder in (COMMITTED, BUILT):
        if (folder / name).exists():
            return folder / name
    try:
        from tools import onnx_fixtures  # PyTorch and transformers: the interop extra
    except ModuleNotFoundError:
        sys.exit(
            f"bench/onnx_peers.py: no {name}; build it with the interop extra "
            f"(pip install -e '.[interop]'): python tools/onnx_fixtures.py --size {size} "
            f"--out {BUILT.relative_to(REPO)}"
        )
    BUILT.mkdir(parents=True, exist_ok=True)
    onnx_fixtures.sized(size, BUILT)
    return BUILT / name


def imported(path: Path, batch: int, seq: int, folder: Path, threads: int):
    """The graph imported at (batch, seq) into `folder`: a call of its forward pass on
    `threads` workers on drawn tokens, everything prepared once, the tokens, and the
    parameters' count."""
    with redirect_stdout(io.StringIO()):
        status = presk_main(
            ["import", str(path), "--out", str(folder), "--dim", f"batch={batch}",
             "--dim", f"seq={seq}"]
        )  # fmt: skip
    if status:
        sys.exit(f"bench/onnx_peers.py: presk import {path} failed")
    core = presk.load(folder / "model.psk").elaborate(
        f"{module_name(str(path))}.apply", dims={"batch": batch, "seq": seq}
    )
    weights = str(folder / "params.safetensors")
    call = core.lower("f32").compile("mlir", threads).drawn(seed=0, weights=weights)
    tokens = np.asarray(arguments(core.view, 0, None)[0].data, dtype=np.int64)
    count = sum(a.size for a in core.params(weights=weights).values())
    return call, tokens, count


def session(path: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def measure(model: str, size: str, repeat: int, threads: int) -> tuple[int, float, float, float]:
    """(parameters, the normwise gap, presk ms, onnxruntime ms) of one model's forward."""
    path = graph(model, size)
    batch, seq = SIZES[size]
    with tempfile.TemporaryDirectory(prefix="onnx_peers-") as scratch:
        ours, tokens, count = imported(path, batch, seq, Path(scratch) / model, threads)
        peer = session(path, threads)

        def theirs():
            return peer.run(None, {"input_ids": tokens})

        a = np.asarray(to_numpy(ours()), dtype=np.float64)
        b = theirs()[0].astype(np.float64)
        gap = float(np.linalg.norm(a - b) / np.linalg.norm(b))
        if not gap <= AGREE:
            sys.exit(
                f"{model} {size}: presk's and onnxruntime's logits differ by {gap:.1e} "
                f"normwise (at most {AGREE:.1e}): not the same function"
            )
        time.sleep(SPIN)
        runs = timed_in_turns({"presk": ours, "onnxruntime": theirs}, repeat, TURNS, SPIN)
        medians = [statistics.median(runs[name]) for name in ("presk", "onnxruntime")]
        return count, gap, *medians


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="corpus,gpt2-small", help="of " + ", ".join(SIZES))
    ap.add_argument("--models", default="gpt2,bert")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    opts = ap.parse_args()
    print(
        f"{time.strftime('%Y-%m-%d')}: {machine()}; presk mlir f32 (its default plan) against "
        f"onnxruntime {ort.__version__} CPU, {opts.threads} threads each, median of {opts.repeat} "
        "calls; ratio = presk / onnxruntime (above 1: presk slower)"
    )
    print(
        f"{'model':<7}{'size':<12}{'B':>3}{'T':>5}{'params':>11}{'gap':>10}"
        f"{'presk ms':>11}{'ort ms':>10}{'ratio':>8}"
    )
    for size in opts.sizes.split(","):
        for model in opts.models.split(","):
            count, gap, ours, theirs = measure(model, size, opts.repeat, opts.threads)
            batch, seq = SIZES[size]
            print(
                f"{model:<7}{size:<12}{batch:>3}{seq:>5}{count:>11}{gap:>10.1e}"
                f"{ours:>11.3f}{theirs:>10.3f}{ours / theirs:>8.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
