"""presk against its peers on the CPU on the same GPTs, shapes and threads, in the same run:
PyTorch eager, torch.compile (Inductor) and, for the forward pass, onnxruntime.

For each model, f32 and f64: the loss entry's forward pass and one training step (the
loss's forward and backward, the gradient clipped to a 2-norm of `Hyper().clip`, the
learning-rate schedule and AdamW with the prelude's hyperparameters, as `presk train`
takes its first step), each the median of `--repeat` calls, taken in five turns of
back-to-back calls (each block after a warm-up call), presk's and its peers' blocks in
turn (presk.timing.timed_in_turns), so that a load that drifts over the minutes of a run
weighs on each alike. presk runs natively (mlir backend, at the
default a user gets: no plan given, docs/layouts.md section 6) on `--threads` workers;
the peers on as many threads (`torch.set_num_threads`, onnxruntime's intra-op threads):

- eager: the PyTorch model run op by op, with torch.optim.AdamW and clip_grad_norm_ at the
  same values;
- compile: the same model through `torch.compile` (Inductor's C++ code for the CPU, its
  default mode), the training step's forward and backward compiled, the clipping and
  AdamW as eager's (the first calls, which compile, are the warm-up, not timed);
- onnxruntime: the model's loss exported to ONNX (torch.onnx, opset 17) and run by
  onnxruntime's CPU provider as bench/onnx_peers.py runs an imported graph: the forward
  pass only.

The ratio printed is presk's time over a peer's: above 1, presk is slower.

The PyTorch model is the PSK program's function: the same layers in the same weight
layout ([In, Out]), LayerNorm's ε inside the square root, gelu's erf form, the causal
mask, the zero-initialised head, dropout only while training. Before timing a model,
presk's initial parameters are loaded into it and the f64 losses compared (to 1e-12
relative), with the initial head and with one drawn at random, so every layer counts:
eager's and the compiled model's. onnxruntime has no f64 erf, so its f32 loss (with the
random head) is compared with presk's f64 loss, to the f32 band's 2^-15 relative.

    python bench/peers.py [--repeat 10] [--threads 2] [--types f32,f64] [--course]
        [--peers eager,compile,onnxruntime] [--json]

`--json` prints the figures as one JSON object on stdout (the table goes to stderr):
PyTorch's version (and onnxruntime's), the threads, repeat, OMP_WAIT_POLICY and the
peers, and a row a model, entry and type with `presk_ms`, `torch_ms` (eager's) and,
where measured, `compile_ms` and `onnxruntime_ms` (bench/record.py reads it).

PyTorch and onnxruntime are an optional extra: `pip install -e .[peers]`; without
onnxruntime that peer is left out, as the first line says. On a machine other jobs
load, set OMP_WAIT_POLICY=PASSIVE: PyTorch's OpenMP threads spin at each parallel region,
and with more runnable threads than cores a spinning one can hold up the other for a time
slice (on the shared development machine, 8-10 ms a LayerNorm of 256 numbers).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
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
from presk.backends.tuning import default_plan  # noqa: E402
from presk.runtime.inputs import arguments  # noqa: E402
from presk.timing import SPIN, TURNS, timed_in_turns  # noqa: E402
from presk.toolchain import machine  # noqa: E402

AGREE = 1e-12  # the largest relative gap between the f64 losses
AGREE_F32 = 2.0**-15  # the f32 band's ε: onnxruntime's f32 loss against presk's f64 one
TYPES = {"f32": torch.float32, "f64": torch.float64}
# the peers, as the table and --peers name them
PEERS = {"eager": "PyTorch eager", "compile": "torch.compile", "onnxruntime": "onnxruntime"}
FORWARD_ONLY = {"onnxruntime"}
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


def torch_step(net: TorchGPT, tokens, targets, hyper: presk.Hyper, run=None):
    """A call taking one training step of `net` as train.step does: loss, gradient,
    clipping, the schedule's learning rate and AdamW; the loss computed by `run` (`net`
    itself, or its torch.compile)."""
    run = net if run is None else run
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
        loss = run(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), hyper.clip)
        opt.step()
        schedule.step()
        return loss

    return step


def torch_forward(net: TorchGPT, tokens, targets, run=None):
    """A call of `net`'s loss in evaluation, computed by `run` (`net`, or its compile)."""
    run = net if run is None else run
    net.eval()

    def forward():
        with torch.inference_mode():
            return run(tokens, targets)

    return forward


def drawn_batch(core: presk.Core, seed: int = 0) -> list[np.ndarray]:
    """The loss's (tokens, targets) as presk draws them for `seed`."""
    return [np.asarray(t.data) for t in arguments(core.view, seed, None)]


def loss_gap(model: Model, core: presk.Core, params: dict, threads: int, compiled=False) -> float:
    """The relative gap between presk's f64 loss (natively) and PyTorch's on `params`:
    eager's, or with `compiled` torch.compile's."""
    tokens, targets = drawn_batch(core)
    ours = float(core.lower("f64").compile("mlir", threads)(params, tokens, targets))
    net = TorchGPT(model, params, torch.float64).eval()
    run = compiled_fresh(net) if compiled else net
    with torch.inference_mode():
        theirs = float(run(torch.from_numpy(tokens), torch.from_numpy(targets)))
    return abs(ours - theirs) / abs(ours)


def compiled_fresh(net: TorchGPT):
    """`net` through torch.compile, Dynamo's caches emptied first: the models of one run
    share their code, and each instance and mode compiled adds an entry to that code's
    cache, past whose limit (8) Dynamo would run the next one eagerly."""
    torch._dynamo.reset()
    return torch.compile(net)


def with_random_head(params: dict, seed: int = 1) -> dict:
    """The parameters with a head drawn at random: a zero head makes every logit 0, the
    loss log V whatever the layers before it compute."""
    head = np.random.default_rng(seed).standard_normal(params["head"].shape)
    return {**params, "head": head}


def check(model: Model, threads: int, peers: tuple[str, ...] = ("eager",)) -> str:
    """The f64 losses compared, at presk's initial parameters and with a random head:
    eager's and torch.compile's, among `peers`; onnxruntime's f32 loss with the random
    head (it has no f64 erf) to the f32 band."""
    core = model.core()
    params = core.params(seed=0)
    said = []
    for peer in [p for p in peers if p not in FORWARD_ONLY]:
        compiled = peer == "compile"
        gaps = [
            loss_gap(model, core, p, threads, compiled) for p in (params, with_random_head(params))
        ]
        if max(gaps) > AGREE:
            raise SystemExit(
                f"{model.name}: presk's and {PEERS[peer]}'s f64 losses differ by "
                f"{max(gaps):.1e} relative (at most {AGREE:.0e}): not the same function"
            )
        said.append(f"{peer} f64 {gaps[0]:.0e} initial, {gaps[1]:.0e} random head")
    if "onnxruntime" in peers:
        gap = onnxruntime_gap(model, core, with_random_head(params), threads)
        if gap > AGREE_F32:
            raise SystemExit(
                f"{model.name}: onnxruntime's f32 loss and presk's f64 loss differ by "
                f"{gap:.1e} relative (at most {AGREE_F32:.1e}): not the same function"
            )
        said.append(f"onnxruntime f32 {gap:.0e}")
    return f"{model.name}: losses agree ({'; '.join(said)})"


def exported(model: Model, params: dict, dtype, folder: str) -> str:
    """The model's loss on `params` exported to ONNX in `folder`: the file's path."""
    core = model.core()
    net = TorchGPT(model, params, dtype).eval()
    tokens, targets = map(torch.from_numpy, drawn_batch(core))
    path = os.path.join(folder, f"{model.name.replace(' ', '_')}.onnx")
    # the TorchScript exporter, which needs no onnxscript; that it is the older one is
    # not this report's news
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            net,
            (tokens, targets),
            path,
            dynamo=False,
            input_names=["tokens", "targets"],
            output_names=["loss"],
            opset_version=17,
        )
    return path


def onnxruntime_call(model: Model, params: dict, threads: int):
    """A call of the model's f32 loss on onnxruntime (its session as bench/onnx_peers.py
    makes one), on presk's drawn batch."""
    from bench.onnx_peers import session  # onnxruntime, an optional peer

    with tempfile.TemporaryDirectory(prefix="peers-") as folder:
        peer = session(exported(model, params, torch.float32, folder), threads)
    tokens, targets = drawn_batch(model.core())
    feed = {"tokens": tokens, "targets": targets}
    return lambda: peer.run(None, feed)


def onnxruntime_gap(model: Model, core: presk.Core, params: dict, threads: int) -> float:
    tokens, targets = drawn_batch(core)
    ours = float(core.lower("f64").compile("mlir", threads)(params, tokens, targets))
    theirs = float(onnxruntime_call(model, params, threads)()[0])
    return abs(ours - theirs) / abs(ours)


def measure(
    model: Model, t: str, threads: int, repeat: int, peers: tuple[str, ...]
) -> list[tuple[str, float, dict[str, float]]]:
    """(what, presk ms, each peer's ms) of the forward pass and of a training step in `t`,
    presk and its peers timed in turns (presk.timing.timed_in_turns)."""
    rows = []
    for what, train in (("forward", False), ("training step", True)):
        core = model.core(train_step=train)
        calls = {"presk": core.lower(t).compile("mlir", threads).drawn()}
        base = model.core()  # the loss alone: its parameters and batch
        params = base.params(seed=0)
        tokens, targets = map(torch.from_numpy, drawn_batch(base))
        for peer in peers:
            if train and peer in FORWARD_ONLY:
                continue
            if peer == "onnxruntime":
                calls[peer] = onnxruntime_call(model, params, threads)
                continue
            net = TorchGPT(model, params, TYPES[t])
            run = compiled_fresh(net) if peer == "compile" else net
            if train:
                calls[peer] = torch_step(net, tokens, targets, presk.Hyper(), run)
            else:
                calls[peer] = torch_forward(net, tokens, targets, run)
        runs = timed_in_turns(calls, repeat, min(TURNS, repeat), SPIN)
        medians = {name: statistics.median(times) for name, times in runs.items()}
        ours = medians.pop("presk")
        rows.append((what, ours, medians))
    return rows


def available(peers: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The peers asked for that can run here, and a note for each left out."""
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise SystemExit(f"--peers {unknown[0]}: no such peer (of {', '.join(PEERS)})")
    notes = []
    if "onnxruntime" in peers and importlib.util.find_spec("onnxruntime") is None:
        peers = [p for p in peers if p != "onnxruntime"]
        notes.append("onnxruntime left out: not installed (pip install -e .[peers])")
    if "eager" not in peers:
        raise SystemExit("--peers: eager is the baseline every row has; keep it")
    return tuple(peers), notes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default="f32,f64")
    ap.add_argument("--models", default="tiny,corpus", help="of " + ", ".join(MODELS))
    ap.add_argument("--course", action="store_true", help="also the course GPT (slow)")
    ap.add_argument("--peers", default=",".join(PEERS), help="of " + ", ".join(PEERS))
    ap.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    opts = ap.parse_args()
    torch.set_num_threads(opts.threads)
    names = opts.models.split(",") + (["course"] if opts.course else [])
    types = opts.types.split(",")
    peers, notes = available(opts.peers.split(","))
    out = sys.stderr if opts.json else sys.stdout
    wait = os.environ.get("OMP_WAIT_POLICY", "unset")
    versions = {"torch": torch.__version__}
    if "onnxruntime" in peers:
        import onnxruntime

        versions["onnxruntime"] = onnxruntime.__version__
    print(
        f"{time.strftime('%Y-%m-%d')}: {machine()}; presk mlir (the default a user gets: "
        f"plan {default_plan()}) "
        f"against {', '.join(PEERS[p] for p in peers)} (PyTorch {torch.__version__}"
        + (f", onnxruntime {versions['onnxruntime']}" if "onnxruntime" in versions else "")
        + f"), {opts.threads} threads each, median of {opts.repeat} calls, "
        f"OMP_WAIT_POLICY={wait}; ratio = presk / peer (above 1: presk slower)"
        + "".join(f"; {note}" for note in notes),
        file=out,
    )
    ratios = "".join(f"{p + ': ratio (ms)':>26}" for p in peers)
    print(f"{'model':<14}{'entry':<15}{'type':<6}{'presk ms':>11}{ratios}", file=out)
    rows = []
    for name in names:
        model = MODELS[name]
        print(f"  {check(model, opts.threads, peers)}", file=out, flush=True)
        for t in types:
            for what, ours, theirs in measure(model, t, opts.threads, opts.repeat, peers):
                row = {"model": name, "entry": what, "type": t, "presk_ms": ours}
                row |= {f"{'torch' if p == 'eager' else p}_ms": ms for p, ms in theirs.items()}
                rows.append(row)
                cells = "".join(
                    f"{ours / theirs[p]:>14.2f} ({theirs[p]:>9.3f})" if p in theirs else " " * 26
                    for p in peers
                )
                print(f"{model.name:<14}{what:<15}{t:<6}{ours:>11.3f}{cells}", file=out, flush=True)
    if opts.json:
        figures = {**versions, "threads": opts.threads, "repeat": opts.repeat}
        figures |= {"omp_wait_policy": wait, "plan": default_plan(), "peers": list(peers)}
        print(json.dumps({**figures, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
