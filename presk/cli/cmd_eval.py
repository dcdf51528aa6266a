"""presk eval: an entry's loss over the validation windows of a data file."""

from __future__ import annotations

from presk.cli.common import positive_count, seed_number
from presk.cli.flags import RECORDED_HELP, WEIGHTS_HELP, add_program_args, add_weights_arg
from presk.cli.programs import (
    add_backend_args,
    bind_window,
    compile_args,
    elaborate_args,
    load_program,
)
from presk.cli.recorded import apply_checkpoint
from presk.errors import UsageError
from presk.runtime.inputs import parameters
from presk.train.data import Windows
from presk.train.evaluate import Validation, backend_words, check_validation, validation_loss
from presk.train.loop import check_token_entry
from presk.train.tokenizer import check_same, recorded


def configure(p) -> None:
    add_program_args(p, default_entry="loss")
    p.add_argument(
        "--data",
        metavar="FILE.psk.d",
        help="token windows from `presk data` (default: the data a --weights checkpoint "
        "was trained on; refused if its tokenizer is not the checkpoint's)",
    )
    add_weights_arg(p, WEIGHTS_HELP + RECORDED_HELP)
    add_backend_args(p, default="mlir")
    p.add_argument(
        "--seed", type=seed_number, default=0, help="seed of the initial parameters (default 0)"
    )
    p.add_argument(
        "--batches", type=positive_count, metavar="N", help="only the first N validation batches"
    )


def run(args) -> int:
    meta = apply_checkpoint(args, args.weights) if args.weights else None
    if args.data is None:
        if not (meta and meta.get("data")):
            raise UsageError("give --data: the validation windows to score")
        args.data = meta["data"]
    program = load_program(args.file)
    data = Windows.load(args.data)
    if args.weights:
        check_same(recorded(meta, args.weights), args.weights, data.tokenizer, args.data)
    bind_window(args, program, data.window)
    core = elaborate_args(args, program)
    tokens, vocab = check_token_entry(core.view, data)
    check_validation(data, tokens.shape[0])
    params = parameters(core.view, args.seed, args.weights)
    backend = compile_args(args, core).backend
    v = validation_loss(backend, params, data, tokens, vocab, args.seed, args.batches)
    print(
        f"validation loss {v.loss:.6f} over {v.batches} batch{'es' if v.batches > 1 else ''} "
        f"of {v.batch} windows "
        f"on {backend_words(backend)}{_left_out(v)}"
    )
    return 0


def _left_out(v: Validation) -> str:
    """What the last partial batch left out, if the evaluation reached it."""
    if v.left_out == 0:
        return ""
    if v.left_out == 1:
        return f" (the last window, fewer than a batch of {v.batch}, is left out)"
    return f" (the last {v.left_out} windows, fewer than a batch of {v.batch}, are left out)"
