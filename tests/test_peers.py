"""bench/peers.py's PyTorch model is the PSK program's function: on the tiny MiniGPT, at
presk's parameters, its f64 loss, gradient and first training step are presk's (skipped
without PyTorch, an optional extra)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bench_script

torch = pytest.importorskip("torch")


peers = bench_script("peers")
TINY = peers.MODELS["tiny"]
PATHS = ["tok", "pos", *(f"blocks.{p}" for p in peers.BLOCK), "ln.g", "ln.b", "head"]


@pytest.fixture(scope="module")
def setup():
    """The tiny MiniGPT's loss on presk's parameters, its head drawn at random so that
    every layer reaches the loss; its batch; the torch model on the same."""
    core = TINY.core()
    params = peers.with_random_head(core.params(seed=0))
    tokens, targets = peers.drawn_batch(core)
    net = peers.TorchGPT(TINY, params, torch.float64)
    return core, params, tokens, targets, net


def close(ours: np.ndarray, theirs: np.ndarray, relative: float) -> bool:
    return np.linalg.norm(ours - theirs) <= relative * np.linalg.norm(ours)


def by_path(net) -> dict[str, np.ndarray]:
    """The torch model's gradients by presk's paths."""
    return {path: _stacked(net, path, lambda p: p.grad) for path in PATHS}


def _stacked(net, path: str, read) -> np.ndarray:
    """`read` of the torch parameter at a presk path, the blocks' stacked as presk's are."""
    if path.startswith("blocks."):
        key = path.removeprefix("blocks.").replace(".", "_")
        return np.stack([read(b.p[key]).detach().numpy() for b in net.blocks])
    name = {"ln.g": "ln_g", "ln.b": "ln_b"}.get(path, path)
    return read(getattr(net, name)).detach().numpy()


def test_the_f64_losses_agree_at_the_initial_parameters_and_with_a_random_head():
    assert "losses agree" in peers.check(TINY, threads=2)


def _epsilon_1e6(x, g, b):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], g, b, eps=1e-6)


def _gelu_tanh(x, gelu=torch.nn.functional.gelu):  # bound before the test patches it
    return gelu(x, approximate="tanh")


@pytest.mark.parametrize(
    "where,name,wrong", [(peers, "layer_norm", _epsilon_1e6), (peers.F, "gelu", _gelu_tanh)]
)
def test_a_model_that_is_not_the_program_is_caught(monkeypatch, setup, where, name, wrong):
    core, params, *_ = setup
    monkeypatch.setattr(where, name, wrong)
    assert peers.loss_gap(TINY, core, params, threads=2) > peers.AGREE


def test_the_f64_gradients_agree(setup):
    core, params, tokens, targets, net = setup
    ours = core.lower("f64").compile("mlir").grad(params, tokens, targets)
    net.zero_grad()
    net(torch.from_numpy(tokens), torch.from_numpy(targets)).backward()
    theirs = by_path(net)
    assert theirs.keys() == ours.keys()
    for path in ours:
        assert close(ours[path], theirs[path], 1e-12), path


def test_one_training_step_agrees(setup):
    """The loss and each parameter's update; torch's clip_grad_norm_ divides by the norm
    plus 1e-6, which moves the update by up to 1e-6 / |g| of itself."""
    core, params, tokens, targets, _ = setup
    step = core.lower("f64").compile("mlir").train_step(params, tokens, targets)
    net = peers.TorchGPT(TINY, params, torch.float64)
    call = peers.torch_step(net, *map(torch.from_numpy, (tokens, targets)), peers.presk.Hyper())
    loss = call().item()
    assert abs(step.loss - loss) <= 1e-12 * step.loss
    assert step.grad_norm > 1  # so both clip
    for path in PATHS:
        theirs = _stacked(net, path, lambda x: x) - params[path]
        assert close(step.params[path] - params[path], theirs, 1e-6 / step.grad_norm), path
