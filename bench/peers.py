"""presk against PyTorch eager CPU on the same GPTs, shapes and threads, in the same run.

For each model, f32 and f64: the loss entry's forward pass and one training step (the
loss's forward and backward, the gradient clipped to a 2-norm of `Hyper().clip`, the
learning-rate schedule and AdamW with the prelude's hyperparameters, as `presk train`
takes its first step), each the median of `--repeat` calls after a warm-up
(presk.timing.timed). presk runs natively (mlir backend, at the default layouts) on
`--threads` workers; PyTorch eagerly on as many threads (`torch.set_num_threads`), with
torch.optim.AdamW and clip_grad_norm_ at the same values. The ratio printed is presk's
time over PyTorch's: above 1, presk is slower.

The PyTorch model is the PSK program's function: the same layers in the same weight
layout ([In, Out]), LayerNorm's ε inside the square root, gelu's erf form, the causal
mask, the zero-initialised head, dropout only while training. Before timing a model,
presk's initial parameters are loaded into it and the f64 losses compared (to 1e-12
relative), with the initial head and with one drawn at random, so every layer counts.

    python bench/peers.py [--repeat 10] [--threads 2] [--types f32,f64] [--course] [--json]

`--json` prints the figures as one JSON object on stdout (the table goes to stderr):
PyTorch's version, the threads, repeat and OMP_WAIT_POLICY, and a row a model, entry and
type with `presk_ms` and `torch_ms` (bench/record.py reads it).

PyTorch is an optional extra: `pip install -e .[peers]`. On a machine other jobs load,
set OMP_WAIT_POLICY=PASSIVE: PyTorch's OpenMP threads spin at each parallel region, and
with more runnable threads than cores a spinning one can hold up the other for a time
slice (on the shared development machine, 8-10 ms a LayerNorm of 256 numbers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError:
    sys.exit("bench/peers.py needs PyTorch, an optional extra: pip install -e .[peers]")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import presk  # noqa: E402
from bench.gpts import MODELS, Model  # noqa: E402
from presk.runtime.inputs import arguments  # noqa: E402
from presk.timing import timed  # noqa: E402
from presk.toolchain import machine  # noqa: E402

AGREE = 1e-12  # the largest relative gap between the f64 losses
TYPES = {"f32": torch.float32, "f64": torch.float64}
# The parameters of one block of the stack, as presk's paths name them under `blocks.`.
BLOCK = (
    "ln1.g ln1.b attn.q.w attn.k.w attn.v.w attn.o.w attn.o.b "
    "ln2.g ln2.b ff.up.w ff.up.b ff.down.w ff.down.b"
).split()


def _parameter(array: np.ndarray, dtype) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.tensor(array, dtype=dtype))


def layer_norm(x, g, b):
    """LayerNorm.apply: the mean and (biased) variance of the last axis, ε = 1e-5 inside
    the square root."""
    return F.layer_norm(x, x.shape[-1:], g, b, eps=1e-5)


class Block(torch.nn.Module):
    """Block{D, H}.apply: attention and a gelu MLP, each behind a LayerNorm, added back."""

    def __init__(self, params: dict[str, np.ndarray], heads: int, dropout: float, dtype):
        super().__init__()
        self.p = torch.nn.ParameterDict(
            {path.replace(".", "_"): _parameter(params[path], dtype) for path in BLOCK}
        )
        self.heads = heads
        self.dropout = dropout

    def forward(self, x):
        p = self.p
        h = x + self._dropped(self.attention(layer_norm(x, p["ln1_g"], p["ln1_b"])))
        return h + self._dropped(self.mlp(layer_norm(h, p["ln2_g"], p["ln2_b"])))

    def attention(self, x):
        """SelfAttention.apply: heads split from [B, T, D] as [B, H, T, D/H] (element
        (h, t, e) is x[t, h·D/H + e]), softmax(q·kᵀ / √(D/H)) under the causal mask."""
        p, (b, t, d) = self.p, x.shape

        def split_heads(w):
            return (x @ w).view(b, t, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = (split_heads(p[f"attn_{n}_w"]) for n in "qkv")
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/√(D/H)
        merged = a.transpose(1, 2).reshape(b, t, d)
        return F.linear(merged, p["attn_o_w"].t(), p["attn_o_b"])  # x · w + b

    def mlp(self, x):
        p = self.p
        up = F.gelu(F.linear(x, p["ff_up_w"].t(), p["ff_up_b"]))  # x·Φ(x), through erf
        return F.linear(up, p["ff_down_w"].t(), p["ff_down_b"])

    def _dropped(self, x):
        return F.dropout(x, self.dropout, self.training) if self.dropout else x


class TorchGPT(torch.nn.Module):
    """The program's model (MiniGPT or GPT) and its loss, on presk's parameters by path
    (the stack's leading axis split into blocks)."""

    def __init__(self, model: Model, params: dict[str, np.ndarray], dtype):
        super().__init__()
        self.vocab = model.vocab
        self.dropout = model.dropout
        self.tok = _parameter(params["tok"], dtype)
        self.pos = _parameter(params["pos"], dtype)
        layers = len(params["blocks.ln1.g"])
        self.blocks = torch.nn.ModuleList(
            Block({p: params[f"blocks.{p}"][i] for p in BLOCK}, model.heads, model.dropout, dtype)
            for i in range(layers)
        )
        self.ln_g = _parameter(params["ln.g"], dtype)
        self.ln_b = _parameter(params["ln.b"], dtype)
        self.head = _parameter(params["head"], dtype)

    def forward(self, tokens, targets):
        """loss: the mean cross-entropy of the next tokens."""
        x = F.embedding(tokens, self.tok) + self.pos
        if self.dropout:
            x = F.dropout(x, self.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        logits = layer_norm(x, self.ln_g, self.ln_b) @ self.head
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1))


def learning_rate(step: int, hyper: presk.Hyper, steps: int = 100) -> float:
    """adamw.schedule at `step` of a run of `steps`, its warm-up as `presk train` sets it."""
    warmup = hyper.warmup or max(1, steps // 10)
    rise = min(1, step / warmup)
    fall = max(0, (step - warmup) / max(1, steps - warmup))
    return hyper.lr * rise * (1 + math.cos(math.pi * min(1, fall))) / 2


def torch_step(net: TorchGPT, tokens, targets, hyper: presk.Hyper):
    """A call taking one training step of `net` as train.step does: loss, gradient,
    clipping, the schedule's learning rate and AdamW."""
    net.train()
    opt = torch.optim.AdamW(
        net.parameters(),
        lr=hyper.lr,
        betas=(hyper.b1, hyper.b2),
        eps=hyper.eps,
        weight_decay=hyper.wd,
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: learning_rate(s + 1, hyper) / hyper.lr
    )

    def step():
        opt.zero_grad(set_to_none=True)
        loss = net(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), hyper.clip)
        opt.step()
        schedule.step()
        return loss

    return step


def torch_forward(net: TorchGPT, tokens, targets):
    net.eval()

    def forward():
        with torch.inference_mode():
            return net(tokens, targets)

    return forward


def drawn_batch(core: presk.Core, seed: int = 0) -> list[np.ndarray]:
    """The loss's (tokens, targets) as presk draws them for `seed`."""
    return [np.asarray(t.data) for t in arguments(core.view, seed, None)]


def loss_gap(model: Model, core: presk.Core, params: dict, threads: int) -> float:
    """The relative gap between presk's f64 loss (natively) and PyTorch's on `params`."""
    tokens, targets = drawn_batch(core)
    ours = float(core.lower("f64").compile("mlir", threads)(params, tokens, targets))
    net = TorchGPT(model, params, torch.float64).eval()
    with torch.inference_mode():
        theirs = float(net(torch.from_numpy(tokens), torch.from_numpy(targets)))
    return abs(ours - theirs) / abs(ours)


def with_random_head(params: dict, seed: int = 1) -> dict:
    """The parameters with a head drawn at random: a zero head makes every logit 0, the
    loss log V whatever the layers before it compute."""
    head = np.random.default_rng(seed).standard_normal(params["head"].shape)
    return {**params, "head": head}


def check(model: Model, threads: int) -> str:
    """The f64 losses compared, at presk's initial parameters and with a random head."""
    core = model.core()
    params = core.params(seed=0)
    gaps = [loss_gap(model, core, p, threads) for p in (params, with_random_head(params))]
    if max(gaps) > AGREE:
        raise SystemExit(
            f"{model.name}: presk's and PyTorch's f64 losses differ by {max(gaps):.1e} "
            f"relative (at most {AGREE:.0e}): the models are not the same function"
        )
    return f"{model.name}: f64 losses agree ({gaps[0]:.0e} initial, {gaps[1]:.0e} random head)"


def median_ms(call, repeat: int) -> float:
    return statistics.median(timed(call, repeat))


def measure(model: Model, t: str, threads: int, repeat: int) -> list[tuple[str, float, float]]:
    """(what, presk ms, PyTorch ms) of the forward pass and of a training step in `t`."""
    rows = []
    for what, train in (("forward", False), ("training step", True)):
        core = model.core(train_step=train)
        ours = median_ms(core.lower(t).compile("mlir", threads).drawn(), repeat)
        base = model.core()  # the loss alone: its parameters and batch
        net = TorchGPT(model, base.params(seed=0), TYPES[t])
        tokens, targets = map(torch.from_numpy, drawn_batch(base))
        if train:
            call = torch_step(net, tokens, targets, presk.Hyper())
        else:
            call = torch_forward(net, tokens, targets)
        rows.append((what, ours, median_ms(call, repeat)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default="f32,f64")
    ap.add_argument("--models", default="tiny,corpus", help="of " + ", ".join(MODELS))
    ap.add_argument("--course", action="store_true", help="also the course GPT (slow)")
    ap.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    opts = ap.parse_args()
    torch.set_num_threads(opts.threads)
    names = opts.models.split(",") + (["course"] if opts.course else [])
    types = opts.types.split(",")
    out = sys.stderr if opts.json else sys.stdout
    wait = os.environ.get("OMP_WAIT_POLICY", "unset")
    print(
        f"{time.strftime('%Y-%m-%d')}: {machine()}; presk mlir (its default plan, auto) against "
        f"PyTorch {torch.__version__} eager, {opts.threads} threads each, median of "
        f"{opts.repeat} calls, OMP_WAIT_POLICY={wait}; "
        "ratio = presk / PyTorch (above 1: presk slower)",
        file=out,
    )
    print(
        f"{'model':<14}{'entry':<15}{'type':<6}{'presk ms':>11}{'torch ms':>11}{'ratio':>8}",
        file=out,
    )
    rows = []
    for name in names:
        model = MODELS[name]
        print(f"  {check(model, opts.threads)}", file=out, flush=True)
        for t in types:
            for what, ours, theirs in measure(model, t, opts.threads, opts.repeat):
                rows.append(
                    {"model": name, "entry": what, "type": t, "presk_ms": ours, "torch_ms": theirs}
                )
                print(
                    f"{model.name:<14}{what:<15}{t:<6}{ours:>11.3f}{theirs:>11.3f}"
                    f"{ours / theirs:>8.2f}",
                    file=out,
                    flush=True,
                )
    if opts.json:
        figures = {"torch": torch.__version__, "threads": opts.threads, "repeat": opts.repeat}
        print(json.dumps({**figures, "omp_wait_policy": wait, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
