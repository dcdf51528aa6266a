"""presk generate: continue a prompt with a model's logits, a token at a time, printed as
it goes (docs/generate.md)."""

from __future__ import annotations

import codecs
import json
import os
import sys

from presk.api import Program
from presk.cli.common import positive_count, real_number, seed_number
from presk.cli.flags import add_program_args
from presk.cli.programs import add_backend_args, compile_args, elaborate_args, load_program
from presk.cli.recorded import apply_checkpoint
from presk.errors import UsageError
from presk.front.bindings import Entry, parse_assignments, parse_entry, resolve_entry
from presk.generate import Model, Sampling, single_batch
from presk.runtime.inputs import parameters
from presk.train.data import Windows
from presk.train.tokenizer import Tokenizer, check_same, recorded


def configure(p) -> None:
    add_model_args(p)
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the text to continue")
    p.add_argument(
        "--tokens", type=positive_count, default=64, metavar="N", help="tokens to generate (64)"
    )
    p.add_argument(
        "--temperature",
        type=real_number("a temperature from 0 (0: always the most likely token)"),
        default=1.0,
        metavar="t",
        help="divides the logits before the softmax; 0 takes the most likely token (default 1)",
    )
    p.add_argument(
        "--top-k", type=positive_count, metavar="k", help="draw among the k most likely tokens"
    )
    p.add_argument(
        "--seed",
        type=seed_number,
        default=0,
        help="seed of the draws (default 0): same seed, same text",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the prompt and each byte as it is drawn; json: one object at the end "
        "(text, tokens, seed, backend)",
    )


def add_model_args(p) -> None:
    """FILE, its entry (default: the module's `apply`), the backend, the weights and the
    data file whose tokenizer the tokens are: what `presk generate` and `presk serve`
    load a model from."""
    add_program_args(p)
    add_backend_args(p, default="mlir")
    p.add_argument(
        "--weights",
        required=True,
        metavar="CKPT|P.npz|P.safetensors",
        help="the parameters: a checkpoint (its entry, consts and dims are the defaults) or "
        "a parameters file",
    )
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="the data file whose tokenizer the tokens are (default: the one the checkpoint "
        "records; refused if it differs)",
    )


def model_of(args) -> Model:
    """The model the flags name: its logits entry elaborated at B = 1 and compiled once,
    its parameters and its tokenizer read."""
    program = load_program(args.file)
    meta = recorded_setup(args, program)
    tokenizer = tokenizer_of(args, meta)  # before the compile, which takes long
    core = single_batch(elaborate_args(args, program))
    params = parameters(core.view, 0, args.weights)
    return Model(compile_args(args, core), params, tokenizer)


def tokenizer_of(args, meta: dict | None) -> Tokenizer:
    """The tokenizer the checkpoint records, or --data's: refused (E3015) if both are
    there and differ; a checkpoint that records none (a parameters file, a checkpoint
    older than the record) takes --data's, else its data file's."""
    trained = recorded(meta, args.weights)
    if args.data is None and trained is not None:
        return trained
    data = args.data or recorded_data(meta, args.weights)
    given = Windows.load(data).tokenizer
    check_same(trained, args.weights, given, data)
    return given


def recorded_setup(args, program: Program) -> dict | None:
    """The checkpoint's meta (None for a parameters file), the flags left out filled from
    it (presk/cli/recorded.py); the entry, left out, the logits `apply` of the recorded
    entry's module (`M{…}.loss` gives `M{…}.apply`), else of the module `--const` names."""
    entry_given = args.entry is not None
    meta = apply_checkpoint(args, args.weights)
    if not entry_given:
        args.entry = logits_entry(program, args.entry or "apply", args.const)
    return meta


def logits_entry(program: Program, entry: str, consts: list[str] | None) -> str:
    """The function `apply` of `entry`'s module (its consts kept; a bare function name
    names the module that has it, as --entry's does)."""
    bound = parse_assignments(consts, "--const", "E3007")
    e = resolve_entry(program.ast, parse_entry(entry), bound)
    return str(Entry(e.module, e.const_args, "apply"))


def recorded_data(meta: dict | None, weights: str) -> str:
    """The data file the checkpoint was trained on, for a checkpoint that records no
    tokenizer: refused (E0001) when it records none or the file is gone."""
    data = (meta or {}).get("data")
    if isinstance(data, str) and os.path.exists(data):
        return data
    why = f"its data file {data} is gone" if isinstance(data, str) else "no data file"
    raise UsageError(
        f"{weights} records no tokenizer and {why}: give --data FILE.psk.d, the data it "
        "was trained on"
    )


def run(args) -> int:
    prompt = os.fsencode(args.prompt)  # the bytes given, undecodable ones too
    model = model_of(args)
    sampling = Sampling(args.tokens, args.temperature, args.top_k, args.seed)
    tokens, pieces = [], [prompt]
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    if args.format == "text":
        sys.stdout.write(text.decode(prompt))
        sys.stdout.flush()
    for token, piece in model.generate(prompt, sampling):
        tokens.append(token)
        pieces.append(piece)
        if args.format == "text":
            sys.stdout.write(text.decode(piece))
            sys.stdout.flush()
    if args.format == "json":
        whole = b"".join(pieces).decode("utf-8", errors="replace")
        answer = {"text": whole, "tokens": tokens, "seed": args.seed, "backend": args.backend}
        sys.stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(text.decode(b"", final=True) + "\n")
    return 0
