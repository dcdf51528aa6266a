"""The GPTs the benchmarks time, as presk elaborates them: program, loss entry and sizes.

Kept apart from bench/peers.py so that a benchmark of presk alone (bench/threads.py)
reads the same models without PyTorch, which peers.py needs at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import presk

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Model:
    name: str
    path: str  # the program, from the repository's root
    entry: str  # its loss
    vocab: int
    heads: int
    dropout: float  # the rate of each dropout while training (0: none)
    dims: dict = field(default_factory=dict)
    consts: dict = field(default_factory=dict)

    def core(self, train_step: bool = False) -> presk.Core:
        program = presk.load(REPO / self.path)
        return program.elaborate(self.entry, self.dims, self.consts, train_step=train_step)


GPT = "corpus/nlp/05_gpt.psk"
MODELS = {
    "tiny": Model(
        "tiny MiniGPT", "tutorial/05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.loss", 64, 2, 0.0,
        {"B": 2, "T": 8},
    ),
    "corpus": Model(
        "corpus GPT", GPT, "loss", 256, 4, 0.1, {"B": 8, "T": 64}, {"D": 64, "H": 4, "L": 4}
    ),
    "course": Model(
        "course GPT", GPT, "loss", 256, 6, 0.1, {"B": 16, "T": 256}, {"D": 384, "H": 6, "L": 6}
    ),
}  # fmt: skip
