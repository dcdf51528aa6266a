"""presk data: token windows from text files, for `presk train --data`."""

from __future__ import annotations

from presk.cli.common import positive_count
from presk.errors import UsageError
from presk.runtime import pskd
from presk.train.data import build


def configure(p) -> None:
    p.add_argument("texts", nargs="+", metavar="TEXT", help="text files, read as bytes")
    p.add_argument(
        "--window", type=int, required=True, metavar="T", help="tokens a model reads at once"
    )
    p.add_argument(
        "--tokenizer",
        choices=("bytes", "bpe"),
        default="bytes",
        help="bytes: a token a byte, ranked by frequency (the default); bpe: a byte-level "
        "BPE of --vocab tokens learnt from the texts",
    )
    p.add_argument(
        "--vocab",
        type=positive_count,
        metavar="N",
        help="with --tokenizer bpe: its tokens, 256 to 65536 (the 256 bytes among them)",
    )
    p.add_argument("--out", required=True, metavar="FILE.psk.d", help="the data file to write")


def run(args) -> int:
    if (args.vocab is None) == (args.tokenizer == "bpe"):
        raise UsageError("--tokenizer bpe learns --vocab N tokens: give both, or neither")
    c = build(args.texts, args.window, args.vocab)
    pskd.write(args.out, c)
    tokens = len(c.meta["vocab"]["model"]["vocab"]) if args.vocab else 0
    print(
        f"{args.out}: {len(c.arrays['train'])} training and {len(c.arrays['val'])} "
        f"validation windows of {args.window} + 1 tokens from {c.meta['bytes']} bytes"
        + (f" (a byte-level BPE of {tokens} tokens)" if tokens else "")
    )
    return 0
