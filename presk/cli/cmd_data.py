"""presk data: token windows from text files, for `presk train --data`."""

from __future__ import annotations

from presk.runtime import pskd
from presk.train.data import build


def configure(p) -> None:
    p.add_argument("texts", nargs="+", metavar="TEXT", help="text files, read as bytes")
    p.add_argument(
        "--window", type=int, required=True, metavar="T", help="tokens a model reads at once"
    )
    p.add_argument("--out", required=True, metavar="FILE.psk.d", help="the data file to write")


def run(args) -> int:
    c = build(args.texts, args.window)
    pskd.write(args.out, c)
    print(
        f"{args.out}: {len(c.arrays['train'])} training and {len(c.arrays['val'])} "
        f"validation windows of {args.window} + 1 tokens from {c.meta['bytes']} bytes"
    )
    return 0
