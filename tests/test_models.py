"""The Llama-style decoder (corpus/nlp/06_llama.psk) and the BERT-style encoder
(corpus/nlp/07_bert.psk), docs/models.md: their losses natively within the bands of the
exact reference, their gradients close to it, what they compute against numpy and their
masks, and three steps of `presk train` natively. (Each `# run:` line elaborates and
verifies in tests/test_programs.py.)"""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from conftest import run_in_process

import presk
from presk.prims import exact
from presk.runtime.values import leaves
from tests.conformance.suite import BANDS, REPO, Case, corpus, machine_output, measure, reference

LLAMA = "corpus/nlp/06_llama.psk"
BERT = "corpus/nlp/07_bert.psk"
SMALL = ("B=2", "T=4")
LLAMA_SMALL = ("C:D=8", "C:H=2", "C:G=1", "C:L=1", "C:F=16", *SMALL)
BERT_SMALL = ("C:D=8", "C:H=2", "C:L=1", "C:F=16", *SMALL)
LOSSES = [
    Case("Llama.loss", LLAMA, "loss", LLAMA_SMALL),
    Case("Bert.loss", BERT, "loss", BERT_SMALL),
]
GRADS = [Case(f"{c.name}.grad", c.path, "loss.grad", c.bindings) for c in LOSSES]


@pytest.mark.parametrize("machine", ["f64", "f32"])
@pytest.mark.parametrize("case", LOSSES, ids=lambda c: c.name)
def test_loss_natively_within_the_band_of_the_reference(case, machine):
    gap = measure(case, machine, "mlir")
    assert gap.ratio <= 1.0, f"{case.name} in {machine}: {gap.ratio:.3f} times the band"


@pytest.mark.parametrize("machine", ["f64", "f32"])
@pytest.mark.parametrize("case", GRADS, ids=lambda c: c.name)
def test_gradient_natively_near_the_reference(case, machine):
    """Normwise over every parameter, ‖ĝ − g‖ ≤ ε‖g‖ with the band's ε: elementwise a few
    small elements fall outside the band (sums that cancel; and the last block's ln2.b of
    Bert, whose exact gradient is 0, softmax over T being blind to it), as the stacked
    MiniGPT's gradient does in docs/conformance.md."""
    x = np.concatenate([exact.to_float64(g.data).ravel() for _, g in leaves(reference(case))])
    y = np.concatenate([np.ravel(g.data) for _, g in leaves(machine_output(case, machine, "mlir"))])
    eps, _ = BANDS[machine]
    assert np.linalg.norm(y.astype(np.float64) - x) <= eps * np.linalg.norm(x), case.name


def compiled(path: str, entry: str, consts: dict, dims: dict):
    """The entry on the kernel evaluator in f64, and its initial parameters."""
    core = presk.load(REPO / path).elaborate(entry, dims=dims, consts=consts)
    return core.lower("f64").compile("kernel"), core.params(seed=0)


def rms(x, g):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * g


def llama_numpy(p: dict, tokens, D: int, H: int, G: int):
    """Llama's logits as Hugging Face's LlamaModel computes them: heads split from the
    projections' columns, rotate_half on each head's two halves, key and value head
    h // (H / G) for query head h (repeat_kv)."""
    (B, T), E, r = tokens.shape, D // H, H // G
    angle = np.outer(np.arange(T), 10000.0 ** (-2 * np.arange(E // 2) / E))
    cos, sin = np.tile(np.cos(angle), 2), np.tile(np.sin(angle), 2)

    def heads(x, n):  # [B, T, n·E] -> [B, n, T, E]
        return x.reshape(B, T, n, E).transpose(0, 2, 1, 3)

    def rope(x):
        return x * cos + np.concatenate([-x[..., E // 2 :], x[..., : E // 2]], -1) * sin

    x = p["tok"][tokens]
    for i in range(p["blocks.norm1.g"].shape[0]):
        w = {k[len("blocks.") :]: v[i] for k, v in p.items() if k.startswith("blocks.")}
        h = rms(x, w["norm1.g"])
        q = rope(heads(h @ w["attn.q.w"], H))
        k = np.repeat(rope(heads(h @ w["attn.k.w"], G)), r, axis=1)
        v = np.repeat(heads(h @ w["attn.v.w"], G), r, axis=1)
        s = q @ k.swapaxes(-1, -2) / math.sqrt(E) + np.triu(np.full((T, T), -np.inf), 1)
        a = np.exp(s - s.max(-1, keepdims=True))
        a = (a / a.sum(-1, keepdims=True)) @ v
        x = x + a.transpose(0, 2, 1, 3).reshape(B, T, D) @ w["attn.o.w"]
        h = rms(x, w["norm2.g"])
        g = h @ w["ff.gate.w"]
        x = x + (g / (1 + np.exp(-g)) * (h @ w["ff.up.w"])) @ w["ff.down.w"]
    return rms(x, p["norm.g"]) @ p["head"]


def test_llama_is_hugging_faces_llama_with_grouped_query_attention():
    consts = {"D": 16, "H": 4, "G": 2, "L": 2, "F": 32}
    f, params = compiled(LLAMA, "apply", consts, {"B": 2, "T": 8})
    tokens = np.random.default_rng(0).integers(0, 256, (2, 8))
    got = f(params, tokens)
    np.testing.assert_allclose(got, llama_numpy(params, tokens, 16, 4, 2), rtol=1e-9, atol=1e-12)
    later = tokens.copy()
    later[:, -1] = (later[:, -1] + 1) % 256  # causal: only the last position sees it
    changed = f(params, later)
    assert np.array_equal(changed[:, :-1], got[:, :-1])
    assert not np.array_equal(changed[:, -1], got[:, -1])


def test_bert_attends_both_ways_but_never_to_padding():
    consts = {"D": 8, "H": 2, "L": 2, "F": 16}
    f, params = compiled(BERT, "apply", consts, {"B": 1, "T": 6})
    rng = np.random.default_rng(0)
    tokens, types = rng.integers(0, 256, (1, 6)), rng.integers(0, 2, (1, 6))
    mask = np.array([[1, 1, 1, 1, 0, 0]])
    got = f(params, tokens, types, mask)  # [B, side, T]
    padded = tokens.copy()
    padded[0, 4] = (padded[0, 4] + 1) % 256
    out = f(params, padded, types, mask)
    assert np.array_equal(out[..., :4], got[..., :4])  # no token reads the padding
    assert not np.array_equal(out[..., 4], got[..., 4])
    first = tokens.copy()
    first[0, 3] = (first[0, 3] + 1) % 256
    assert not np.array_equal(f(params, first, types, mask)[..., 0], got[..., 0])  # both ways


def trained(tmp_path, path: str, *flags: str) -> list[float]:
    """The logged losses of 3 steps of `presk train` natively."""
    argv = [REPO / path, "--steps", "3", "--log-every", "1", "--backend", "mlir", *flags]
    proc = run_in_process("presk", "train", *argv, "--quiet", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    return [float(row["loss"]) for row in csv.DictReader((tmp_path / "log.csv").open())]


def test_llama_trains_three_steps_natively_on_the_corpus(tmp_path):
    data = corpus(tmp_path / "lic8.psk.d")  # windows of 8 tokens
    consts = ("--const", "D=8", "--const", "H=2", "--const", "G=1", "--const", "L=1")
    sizes = ("--const", "F=16", "--dim", "B=2", "--dim", "T=8")
    losses = trained(tmp_path / "run", LLAMA, *consts, *sizes, "--data", data)
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses), losses


def test_bert_trains_three_steps_natively_on_drawn_inputs(tmp_path):
    consts = ("--const", "D=8", "--const", "H=2", "--const", "L=1", "--const", "F=16")
    losses = trained(tmp_path, BERT, *consts, "--dim", "B=2", "--dim", "T=4", "--realize", "f32")
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses), losses
