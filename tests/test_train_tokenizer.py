"""The tokenizer travels with the model: a checkpoint records the one its data file had,
so generation needs no data file, and a `--data` of another tokenizer is refused (E3015)
by train (--resume, --init), eval and generate; a checkpoint older than the record reads
`--data` as before. `presk data --tokenizer bpe` learns a byte-level BPE (Hugging Face
`tokenizers`) that a tiny MiniGPT trains on, generates with and is exported to C with
(the program maps its tokens to text). A damaged tokenizer is refused with a code."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, run_in_process
from programs import REPO

from presk.runtime import pskd
from presk.train import tokenizer as tk
from presk.train.data import Windows

MINIGPT = str(REPO / "tutorial" / "05_minigpt.psk")
TEXTS = sorted(str(p) for p in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
TINY = ["--const", "D=16", "--const", "H=2", "--const", "L=2", "--dim", "T=8", "--dim", "B=2"]
KERNEL = ["--backend", "kernel"]
BPE_TOKENS = 300
GREEDY = ["--prompt", "Permission is", "--tokens", "6", "--temperature", "0", *KERNEL]


def presk_ok(*argv) -> str:
    proc = run_in_process("presk", *argv)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def trained(base: Path, vocab: int, *data_flags: str) -> tuple[str, str]:
    """(data file, checkpoint): the corpus in windows of 8 tokens, and MiniGPT (V = `vocab`)
    trained 3 steps on it on the kernel evaluator, stopped at step 2 of 4 first, so that
    the checkpoint's run can be resumed."""
    data, out = str(base / "data.psk.d"), base / "run"
    presk_ok("data", *TEXTS, "--window", "8", *data_flags, "--out", data)
    flags = [MINIGPT, "--const", f"V={vocab}", *TINY, *KERNEL, "--data", data, "--quiet"]
    presk_ok("train", *flags, "--steps", "4", "--stop-at", "2", "--out", out)
    return data, str(out / "checkpoint.psk.d")


@pytest.fixture(scope="module")
def byte_run(tmp_path_factory):
    return trained(tmp_path_factory.mktemp("bytes"), 64)


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory):
    return trained(
        tmp_path_factory.mktemp("bpe"), BPE_TOKENS, "--tokenizer", "bpe", "--vocab", "300"
    )


@pytest.fixture(scope="module")
def other_data(tmp_path_factory):
    """Windows of 8 of another text: its bytes ranked in another order."""
    base = tmp_path_factory.mktemp("other")
    (base / "t.txt").write_bytes(bytes(range(32, 127)) * 9)
    presk_ok("data", base / "t.txt", "--window", "8", "--out", base / "other.psk.d")
    return str(base / "other.psk.d")


def generated(weights: str, *flags: str) -> dict:
    proc = run_in_process(
        "presk", "generate", MINIGPT, "--weights", weights, *flags, "--format", "json"
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def edited(checkpoint: str, tmp_path: Path, edit) -> str:
    """A copy of `checkpoint` whose meta `edit` changed (the header holds no checksum of
    itself)."""
    path = tmp_path / "edited.psk.d"
    shutil.copytree(checkpoint, path)
    header = json.loads((path / "header.json").read_text())
    edit(header["meta"])
    (path / "header.json").write_text(json.dumps(header))
    return str(path)


def test_the_checkpoint_records_the_tokenizer_and_generation_needs_no_data_file(byte_run, tmp_path):
    data, weights = byte_run
    meta = pskd.read(weights).meta
    assert tk.from_meta(meta, weights, "E9002") == Windows.load(data).tokenizer
    before = generated(weights, *GREEDY)
    gone = edited(weights, tmp_path, lambda m: m.update(data=str(tmp_path / "moved.psk.d")))
    assert generated(gone, *GREEDY) == before


def test_a_checkpoint_without_a_recorded_tokenizer_reads_data_as_before(byte_run, tmp_path):
    data, weights = byte_run
    old = edited(weights, tmp_path, lambda m: [m.pop("tokenizer"), m.pop("vocab")])
    assert generated(old, *GREEDY, "--data", data) == generated(weights, *GREEDY)
    assert generated(old, *GREEDY) == generated(weights, *GREEDY)  # its recorded data file
    evaluated = presk_ok("eval", MINIGPT, "--weights", old, "--batches", "2", *KERNEL)
    assert evaluated.startswith("validation loss ")
    gone = edited(old, tmp_path / "gone", lambda m: m.update(data=str(tmp_path / "moved")))
    refused = run_in_process("presk", "generate", MINIGPT, "--weights", gone, *GREEDY)
    assert "records no tokenizer" in assert_user_error(refused, "E0001")


@pytest.mark.parametrize("command", ["generate", "eval", "train --init", "train --resume"])
def test_a_data_file_of_another_tokenizer_is_refused(command, byte_run, other_data, tmp_path):
    data, weights = byte_run
    if command == "generate":
        argv = ["generate", MINIGPT, "--weights", weights, *GREEDY, "--data", other_data]
    elif command == "eval":
        argv = ["eval", MINIGPT, "--weights", weights, "--data", other_data, *KERNEL]
    elif command == "train --init":
        argv = ["train", MINIGPT, "--const", "V=64", *TINY, *KERNEL, "--data", other_data]
        argv += ["--init", weights, "--steps", "1", "--out", tmp_path]
    else:  # the run's own data file, written anew from another text
        shutil.copytree(other_data, tmp_path / "data.psk.d")
        rewritten = str(tmp_path / "data.psk.d")
        resumed = edited(weights, tmp_path, lambda m: m.update(data=rewritten))
        argv = ["train", MINIGPT, "--resume", resumed, "--quiet"]
    line = assert_user_error(run_in_process("presk", *argv), "E3015")
    assert "has another tokenizer (the 256 bytes ranked by frequency, another vocabulary)" in line


def test_a_bpe_corpus_trains_generates_and_exports(bpe_run, tmp_path):
    data, weights = bpe_run
    windows = Windows.load(data)
    assert (windows.tokenizer.kind, windows.tokenizer.size) == ("bpe", BPE_TOKENS)
    assert windows.train.dtype == np.uint16 and windows.train.max() >= 256  # merged tokens
    assert pskd.read(weights).meta["vocab"] == windows.tokenizer.vocab()
    resumed = presk_ok("train", MINIGPT, "--resume", weights, "--out", tmp_path / "resumed")
    assert resumed.splitlines()[-1].startswith("trained to step 4 ")
    answer = generated(weights, *GREEDY)
    tokens, text = answer["tokens"], answer["text"]
    assert len(tokens) == 6 and all(0 <= t < BPE_TOKENS for t in tokens)
    continuation = b"".join(windows.tokenizer.token_bytes(t) for t in tokens)
    assert text == "Permission is" + continuation.decode("utf-8", errors="replace")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    out = tmp_path / "c"
    presk_ok(
        "export", MINIGPT, "--weights", weights, "--entry", "apply", "--dim", "B=1", "--out", out
    )
    assert json.loads((out / "vocab.json").read_text()) == tk.to_meta(windows.tokenizer)
    build = subprocess.run(["make", "-s", "-C", str(out)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    # the exported model's most likely next token is generation's first, and the program
    # prints the generated tokens as the text generation printed
    prompt = windows.tokenizer.encode(b"Permission is")
    (tmp_path / "in.bin").write_bytes(np.pad(prompt, (0, 8 - len(prompt))).astype("<i8").tobytes())
    files = [str(out / "model"), str(out / "model.bin"), str(tmp_path / "in.bin")]
    ran = subprocess.run([*files, str(tmp_path / "out.bin")], capture_output=True)
    assert ran.returncode == 0, ran.stderr
    logits = np.fromfile(tmp_path / "out.bin", "<f8").reshape(8, BPE_TOKENS)
    assert int(np.argmax(logits[len(prompt) - 1])) == tokens[0]
    (tmp_path / "tokens.bin").write_bytes(np.array(tokens, "<i8").tobytes())
    printed = subprocess.run(
        [files[0], "--text", str(tmp_path / "tokens.bin")], capture_output=True
    )
    assert printed.returncode == 0 and printed.stdout == continuation, printed.stderr


def test_the_c_program_prints_a_byte_models_tokens_as_generation_decodes_them(byte_run, tmp_path):
    """V = 64 of 256 bytes: token 63 stands for the others, printed as U+FFFD."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    data, weights = byte_run
    out = tmp_path / "c"
    presk_ok(
        "export", MINIGPT, "--weights", weights, "--entry", "apply", "--dim", "B=1", "--out", out
    )
    assert subprocess.run(["make", "-s", "-C", str(out)]).returncode == 0
    order = Windows.load(data).tokenizer.order
    (tmp_path / "t.bin").write_bytes(np.array([0, 5, 63], "<i8").tobytes())
    printed = subprocess.run(
        [str(out / "model"), "--text", str(tmp_path / "t.bin")], capture_output=True
    )
    assert printed.stdout == bytes([order[0], order[5]]) + "\ufffd".encode()
    (tmp_path / "t.bin").write_bytes(np.array([64], "<i8").tobytes())
    past = subprocess.run(
        [str(out / "model"), "--text", str(tmp_path / "t.bin")], capture_output=True
    )
    assert past.returncode == 1 and b"token 64 is not one of the 64" in past.stderr


def test_a_model_of_fewer_tokens_than_the_bpe_is_refused(bpe_run, tmp_path):
    data, _ = bpe_run
    argv = ["train", MINIGPT, "--const", "V=64", *TINY, *KERNEL, "--data", data, "--out", tmp_path]
    line = assert_user_error(run_in_process("presk", *argv), "E3011")
    assert "a byte-level BPE of 300 tokens, the entry reads V = 64" in line


def test_bpe_tokens_stand_for_every_byte_of_any_text(bpe_run):
    data, _ = bpe_run
    bpe = Windows.load(data).tokenizer
    text = "Permission é\n".encode() + b"\xff\xfe\x80 half \xe2\x82"  # not all UTF-8
    tokens = bpe.encode(text)
    assert b"".join(bpe.token_bytes(t) for t in tokens) == text
    assert len(tokens) < len(text)  # merges
    again = tk.train_bpe([Path(p).read_bytes() for p in TEXTS], BPE_TOKENS)
    assert again == bpe  # the same texts learn the same tokenizer


def _bpe_edit(change):
    def edit(meta):
        change(meta["vocab"])

    return edit


def _renumber(vocab):
    token = next(iter(vocab["model"]["vocab"]))
    vocab["model"]["vocab"][token] = 70000


DAMAGED = {
    "merges of a token it lacks": _bpe_edit(lambda v: v["model"]["merges"].append(["Ġ", "zz"])),
    "tokens not numbered from 0": _bpe_edit(_renumber),
    "a token not of bytes": _bpe_edit(lambda v: v["model"]["vocab"].update({"€": 300})),
    "a prefix space": _bpe_edit(lambda v: v["pre_tokenizer"].update(add_prefix_space=True)),
    "another model": _bpe_edit(lambda v: v["model"].update(type="WordPiece")),
    "an added token": _bpe_edit(lambda v: v["added_tokens"].append({"id": 0, "content": "!"})),
    "a normalizer": _bpe_edit(lambda v: v.update(normalizer={"type": "Lowercase"})),
    "a prefix on tokens": _bpe_edit(lambda v: v["model"].update(continuing_subword_prefix="##")),
    "random dropout": _bpe_edit(lambda v: v["model"].update(dropout=0.5)),
    "truncation": _bpe_edit(
        lambda v: v.update(
            truncation={
                "direction": "Right",
                "max_length": 1,
                "strategy": "LongestFirst",
                "stride": 0,
            }
        )
    ),
    "vocab a string": lambda m: m.update(vocab="{}"),
    "another tokenizer": lambda m: m.update(tokenizer="words"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_tokenizer_is_refused(case, bpe_run, tmp_path):
    data, weights = bpe_run
    path = tmp_path / "d.psk.d"
    shutil.copytree(data, path)
    header = json.loads((path / "header.json").read_text())
    DAMAGED[case](header["meta"])
    (path / "header.json").write_text(json.dumps(header))
    argv = ["eval", MINIGPT, "--const", f"V={BPE_TOKENS}", *TINY, *KERNEL, "--data", path]
    assert "its" in assert_user_error(run_in_process("presk", *argv), "E9007")
    damaged = edited(weights, tmp_path, DAMAGED[case])
    refused = run_in_process("presk", "generate", MINIGPT, "--weights", damaged, *GREEDY)
    assert "header.json: meta" in assert_user_error(refused, "E9002")


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--tokenizer", "bpe"], "give both"),
        (["--vocab", "300"], "give both"),
        (["--tokenizer", "bpe", "--vocab", "100"], "256 to 65536"),
    ],
)
def test_data_refuses_a_bpe_without_its_size(flags, says, tmp_path):
    proc = run_in_process(
        "presk", "data", TEXTS[0], "--window", "8", *flags, "--out", tmp_path / "d"
    )
    assert says in assert_user_error(proc, "E0001")
