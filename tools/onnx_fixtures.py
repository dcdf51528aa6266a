"""The ONNX fixtures of `presk import` (tests/data/onnx/): real model code, exported.

Builds, with PyTorch and Hugging Face `transformers` from their configurations (random
initialisation from a fixed seed; nothing downloaded), four small models and exports each
with `torch.onnx.export(..., opset_version=18, dynamo=True)`, the batch and sequence
sizes left dynamic (`dim_param`s `batch` and `seq`):

- `gpt2.onnx`: `GPT2LMHeadModel`, n_embd 64, 2 layers, 2 heads, 256 tokens, 64 positions;
- `bert.onnx`: `BertForMaskedLM` at the same scale (intermediate 256);
- `llama.onnx`: `LlamaForCausalLM` (RMS norm, rotary embeddings, SwiGLU) at the same scale,
  2 query heads sharing 1 key-value head, intermediate 128;
- `mlp.onnx`: a 3-layer MLP, 16 → 64 → 64 → 8, gelu then tanh.

`--size corpus` and `--size gpt2-small` build the GPT-2 and the BERT of the speed
comparison with onnxruntime instead (bench/onnx_peers.py), `gpt2_SIZE.onnx` and
`bert_SIZE.onnx`: the corpus GPT's size (64 wide, 4 layers, 4 heads) and GPT-2 small's
(768 wide, 12 layers, 12 heads, 1024 positions), both with the 256-token vocabulary.

The packages are the `interop` extra (`pip install -e '.[interop]'`), never needed to run
the tests, which read the committed files. Run from the repository's root:

    python tools/onnx_fixtures.py [--size fixtures|corpus|gpt2-small] [--out tests/data/onnx]
"""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

import onnx
import onnx_ir
import onnxscript
import torch
import transformers
from torch.export import Dim

SEED = 0
OPSET = 18
SCALE = {"n_layer": 2, "heads": 2, "width": 64, "vocab": 256, "positions": 64}
# the models bench/onnx_peers.py times, by --size
SIZES = {
    "corpus": {"n_layer": 4, "heads": 4, "width": 64, "vocab": 256, "positions": 64},
    "gpt2-small": {"n_layer": 12, "heads": 12, "width": 768, "vocab": 256, "positions": 1024},
}


def gpt2(scale: dict = SCALE) -> torch.nn.Module:
    config = transformers.GPT2Config(
        vocab_size=scale["vocab"],
        n_positions=scale["positions"],
        n_embd=scale["width"],
        n_layer=scale["n_layer"],
        n_head=scale["heads"],
        use_cache=False,
        attn_implementation="eager",
    )
    return transformers.GPT2LMHeadModel(config)


def bert(scale: dict = SCALE) -> torch.nn.Module:
    config = transformers.BertConfig(
        vocab_size=scale["vocab"],
        hidden_size=scale["width"],
        num_hidden_layers=scale["n_layer"],
        num_attention_heads=scale["heads"],
        intermediate_size=4 * scale["width"],
        max_position_embeddings=scale["positions"],
        type_vocab_size=2,
        use_cache=False,
        attn_implementation="eager",
    )
    return transformers.BertForMaskedLM(config)


def llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=SCALE["vocab"],
        hidden_size=SCALE["width"],
        intermediate_size=2 * SCALE["width"],
        num_hidden_layers=SCALE["n_layer"],
        num_attention_heads=SCALE["heads"],
        num_key_value_heads=1,
        max_position_embeddings=SCALE["positions"],
        use_cache=False,
        attn_implementation="eager",
    )
    return transformers.LlamaForCausalLM(config)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 64)
        self.fc2 = torch.nn.Linear(64, 64)
        self.fc3 = torch.nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.tanh(self.fc2(torch.nn.functional.gelu(self.fc1(x)))))


def randomised(model: torch.nn.Module) -> torch.nn.Module:
    """The norms' gains and the biases drawn afresh (gains near 1, biases small). At their
    initial values the gains are all ones and the biases all zeros, which the exporter's
    optimiser would merge into one initializer, or drop, and which would hide a bias or a
    gain read in the wrong place."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                gain = bool(torch.all(p == 1))
                p.copy_((1 if gain else 0) + torch.randn(p.shape) * (0.1 if gain else 0.02))
    return model


def on_no_weight(node: onnx_ir.Node) -> bool | None:
    """The exporter's optimiser folds a node unless it reads a weight (an initializer
    that is not a scalar)."""
    weights = [v for v in node.inputs if v is not None and v.is_initializer()]
    return False if any(v.const_value.size > 1 for v in weights) else None


def export(
    model: torch.nn.Module, example: torch.Tensor, name: str, path: Path, positions: int
) -> None:
    warnings.filterwarnings("ignore")  # the exporter's, about its own internals
    logging.disable(logging.WARNING)
    batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=positions)
    dynamic = {0: batch} if example.is_floating_point() else {0: batch, 1: seq}
    program = torch.onnx.export(
        model.eval(),
        (example,),
        input_names=[name],
        output_names=["logits" if name == "input_ids" else "y"],
        dynamic_shapes={name: dynamic},
        opset_version=OPSET,
        dynamo=True,
        external_data=False,
        optimize=False,
        verbose=False,
    )
    # Shape arithmetic folded, but no op on a weight: folding `Transpose(weight)` would
    # replace a named initializer with an unnamed one, and the names are the way back.
    onnxscript.optimizer.optimize_ir(program.model, should_fold=on_no_weight)
    graph = onnx_ir.to_proto(program.model)
    for node in graph.graph.node:  # the exporter's stack traces: this machine's paths
        del node.metadata_props[:]
    onnx.checker.check_model(graph, full_check=True)
    onnx.save_model(graph, path)
    print(
        f"{path}: {path.stat().st_size} bytes, ops {sorted({n.op_type for n in graph.graph.node})}"
    )


def tokens(vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 8), generator=torch.Generator().manual_seed(1))


def fixtures(out: Path) -> None:
    """The four models the tests import."""
    for name, build in (("gpt2", gpt2), ("bert", bert), ("llama", llama)):
        torch.manual_seed(SEED)
        export(
            randomised(build()), tokens(SCALE["vocab"]), "input_ids", out / f"{name}.onnx",
            SCALE["positions"],
        )  # fmt: skip
    torch.manual_seed(SEED)
    export(MLP(), torch.randn(2, 16), "x", out / "mlp.onnx", SCALE["positions"])


def sized(size: str, out: Path) -> list[Path]:
    """The GPT-2 and the BERT at one of SIZES: `gpt2_SIZE.onnx`, `bert_SIZE.onnx`."""
    scale, paths = SIZES[size], []
    for name, build in (("gpt2", gpt2), ("bert", bert)):
        torch.manual_seed(SEED)
        path = out / f"{name}_{size}.onnx"
        export(
            randomised(build(scale)), tokens(scale["vocab"]), "input_ids", path, scale["positions"]
        )
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["fixtures", *SIZES], default="fixtures")
    parser.add_argument("--out", type=Path, default=Path("tests/data/onnx"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.size == "fixtures":
        fixtures(args.out)
    else:
        sized(args.size, args.out)


if __name__ == "__main__":
    main()
