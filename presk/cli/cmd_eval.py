"""presk eval: an entry's loss over the validation windows of a data file."""

from __future__ import annotations

from presk.backends.host import CallContext
from presk.cli.common import seed_number
from presk.cli.programs import (
    add_backend_args,
    add_program_args,
    compile_args,
    elaborate_args,
    load_program,
)
from presk.runtime.inputs import parameters
from presk.runtime.values import Tensor
from presk.train.data import Windows, next_token_pair
from presk.train.loop import check_token_entry


def configure(p) -> None:
    add_program_args(p, default_entry="loss")
    p.add_argument(
        "--data", required=True, metavar="FILE.psk.d", help="token windows from `presk data`"
    )
    p.add_argument(
        "--weights", metavar="CKPT.psk.d", help="the parameters (default: the initializers)"
    )
    add_backend_args(p)
    p.add_argument(
        "--seed", type=seed_number, default=0, help="seed of the initial parameters (default 0)"
    )
    p.add_argument("--batches", type=int, metavar="N", help="only the first N validation batches")


def run(args) -> int:
    program = load_program(args.file)
    data = Windows.load(args.data)
    core = elaborate_args(args, program)
    t, vocab = check_token_entry(core.view, data)
    params = parameters(core.view, args.seed, args.weights)
    backend = compile_args(args, core).backend
    total, count = 0.0, 0
    for windows in data.validation(t.shape[0]):
        if args.batches is not None and count >= args.batches:
            break
        tokens, targets = next_token_pair(windows, vocab)
        out = backend.call(
            [params, Tensor(t, tokens), Tensor(t, targets)], CallContext(seed=args.seed)
        )
        total += float(out.data.item())
        count += 1
    if not count:
        print(f"{args.data}: no validation batch of {t.shape[0]} windows")
        return 1
    print(
        f"validation loss {total / count:.6f} over {count} batches "
        f"of {t.shape[0]} windows ({args.backend})"
    )
    return 0
