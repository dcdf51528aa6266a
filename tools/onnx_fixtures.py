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

The packages are the `interop` extra (`pip install -e '.[interop]'`), never needed to run
the tests, which read the committed files. Run from the repository's root:

    python tools/onnx_fixtures.py [--out tests/data/onnx]
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


def gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        vocab_size=SCALE["vocab"],
        n_positions=SCALE["positions"],
        n_embd=SCALE["width"],
        n_layer=SCALE["n_layer"],
        n_head=SCALE["heads"],
        use_cache=False,
        attn_implementation="eager",
    )
    return transformers.GPT2LMHeadModel(config)


def bert() -> torch.nn.Module:
    config = transformers.BertConfig(
        vocab_size=SCALE["vocab"],
        hidden_size=SCALE["width"],
        num_hidden_layers=SCALE["n_layer"],
        num_attention_heads=SCALE["heads"],
        intermediate_size=4 * SCALE["width"],
        max_position_embeddings=SCALE["positions"],
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


def export(model: torch.nn.Module, example: torch.Tensor, name: str, path: Path) -> None:
    batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=SCALE["positions"])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/data/onnx"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    tokens = torch.randint(0, SCALE["vocab"], (2, 8), generator=torch.Generator().manual_seed(1))
    for name, build in (("gpt2", gpt2), ("bert", bert), ("llama", llama)):
        torch.manual_seed(SEED)
        export(randomised(build()), tokens, "input_ids", args.out / f"{name}.onnx")
    torch.manual_seed(SEED)
    export(MLP(), torch.randn(2, 16), "x", args.out / "mlp.onnx")


if __name__ == "__main__":
    main()
