"""`presk generate`: the tiny MiniGPT trained 3 steps on the kernel evaluator continues a
prompt; the same seed gives the same text on the kernel evaluator and natively, greedy
decoding needs no seed, the stream is the JSON's text, and what cannot be generated from
is refused with its code."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, run_in_process

from presk.generate import Sampling, Vocabulary, pick
from presk.train.tokenizer import ByteTokenizer
from tests.conformance.suite import REPO, corpus, train_minigpt

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
CONSTS = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]


def trained_minigpt(directory) -> tuple[str, str]:
    """(data file, checkpoint) of MiniGPT's loss trained 3 steps (B=2, T=8) in f64 on the
    kernel evaluator."""
    data = corpus(directory / "lic8.psk.d")
    return data, train_minigpt(directory, data, "--steps", "3", "--backend", "kernel")


def model_flags(weights: str) -> list[str]:
    """The flags naming the trained model: its entry, consts, dims and data file (the
    vocabulary) are the checkpoint's."""
    return [MINIGPT, "--weights", weights]


SPELLED = [*CONSTS, "--dim", "T=8", "--dim", "B=1", "--entry", "MiniGPT{64, 16, 2, 2}.apply"]


def generated(weights: str, *flags: str) -> dict:
    """`presk generate --format json`'s answer."""
    proc = run_in_process("presk", "generate", *model_flags(weights), *flags, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return trained_minigpt(tmp_path_factory.mktemp("generate"))


SAMPLED = ["--prompt", "The Software", "--tokens", "24", "--seed", "7"]


def test_the_same_seed_gives_the_same_text_on_the_kernel_evaluator_and_natively(trained):
    _, weights = trained
    kernel = generated(weights, *SAMPLED, "--top-k", "20", "--backend", "kernel")
    native = generated(weights, *SAMPLED, "--top-k", "20", "--backend", "mlir")
    assert kernel["text"].startswith("The Software") and len(kernel["tokens"]) == 24
    assert all(0 <= t < 64 for t in kernel["tokens"])
    assert native["text"] == kernel["text"] and native["tokens"] == kernel["tokens"]
    assert (kernel["seed"], kernel["backend"], native["backend"]) == (7, "kernel", "mlir")
    assert generated(weights, *SAMPLED, "--top-k", "20", "--backend", "kernel") == kernel
    spelled = generated(weights, *SAMPLED, "--top-k", "20", "--backend", "kernel", *SPELLED)
    assert spelled == kernel


def test_greedy_decoding_is_the_argmax_whatever_the_seed(trained):
    _, weights = trained
    greedy = ["--prompt", "the ", "--tokens", "8", "--temperature", "0", "--backend", "kernel"]
    one = generated(weights, *greedy, "--seed", "1")
    assert generated(weights, *greedy, "--seed", "2")["tokens"] == one["tokens"]


def test_the_stream_prints_the_prompt_then_the_text_of_the_json(trained):
    _, weights = trained
    flags = [*model_flags(weights), *SAMPLED, "--backend", "kernel"]
    streamed = run_in_process("presk", "generate", *flags)
    assert streamed.returncode == 0, streamed.stderr
    assert streamed.stdout == generated(weights, *SAMPLED, "--backend", "kernel")["text"] + "\n"


def test_what_cannot_be_generated_from_is_refused(trained, tmp_path):
    data, weights = trained
    base = [*model_flags(weights), "--backend", "kernel", "--tokens", "2"]
    empty = run_in_process("presk", "generate", *base, "--prompt", "")
    assert_user_error(empty, "E0001")
    loss = run_in_process("presk", "generate", *base, "--prompt", "a", "--entry", "loss")
    assert "generation feeds it one argument of tokens" in assert_user_error(loss, "E3014")
    params = tmp_path / "p.npz"
    spelled = [MINIGPT, *SPELLED, "--weights", weights]
    assert run_in_process("presk", "params", *spelled, "--out", params).returncode == 0
    no_data = [MINIGPT, *SPELLED, "--weights", params, "--backend", "kernel", "--prompt", "a"]
    assert "give --data" in assert_user_error(run_in_process("presk", "generate", *no_data))
    given = run_in_process("presk", "generate", *no_data, "--data", data, "--tokens", "2")
    assert given.returncode == 0, given.stderr


def test_a_token_is_drawn_from_the_top_k_at_the_temperature():
    logits = np.array([0.0, 3.0, 1.0, 3.0])
    rng = np.random.default_rng(0)
    assert pick(logits, Sampling(temperature=0), rng) == 1  # the first of equal maxima
    assert {pick(logits, Sampling(top_k=2), rng) for _ in range(50)} == {1, 3}
    assert {pick(logits, Sampling(temperature=1e-300), rng) for _ in range(50)} <= {1, 3}
    draws = [pick(logits, Sampling(temperature=1.0), rng) for _ in range(4000)]
    p = np.exp(logits) / np.exp(logits).sum()
    assert np.allclose(np.bincount(draws, minlength=4) / 4000, p, atol=0.03)


def test_the_catch_all_token_decodes_to_the_replacement_character():
    by_value = ByteTokenizer(tuple(range(256)))
    vocab = Vocabulary(by_value, 4)  # bytes 0, 1, 2 and the rest
    assert vocab.encode(b"\x00\x02\x03\xff") == [0, 2, 3, 3]
    assert [vocab.decode(t) for t in (0, 2, 3)] == [b"\x00", b"\x02", "\ufffd".encode()]
    assert Vocabulary(by_value, 256).decode(255) == b"\xff"
