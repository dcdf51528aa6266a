"""A gradient's forward pass (psk-vjp's `F.fwd`) keeps the forward's fusion groups, so the
loss it computes — the loss a training step logs — has `run`'s bits in every machine type,
bf16 included (where a group rounds once, at its root); and the gradient stays in band."""

from __future__ import annotations

import numpy as np
import pytest
from programs import REPO

import presk
from presk import backends, stages
from presk.backends.host import CallContext
from presk.core.program import read_host_program
from presk.ir.ops import walk_ops
from presk.prims import exact
from presk.runtime.inputs import arguments, parameters
from presk.train.loop import first_step
from presk.train.step import HYPER, SYMBOL
from tests.conformance.suite import BANDS

CHAIN = """
dim N
fn f(x : ℝ[N]) -> ℝ { sum(tanh(x*2+1)*3) }
fn f_grad = grad(f)
"""
REGRESSION = REPO / "tests" / "train" / "mlp_regression.psk"
MACHINE_BACKENDS = ("kernel", "mlir")
TYPES = ("f64", "f32", "bf16")


def elaborated(text: str, entry: str, dims: dict, remat: str = "store", train_step=False):
    return presk.load(text).elaborate(entry, dims, remat=remat, train_step=train_step)


def bits(value) -> np.ndarray:
    data = np.asarray(value.data)
    return data.view(f"u{data.dtype.itemsize}")


def chain_losses(backend: str, realize: str, remat: str):
    """f's value from `run` of f, and from f.fwd inside f_grad's module."""
    f = elaborated(CHAIN, "f", {"N": 37}).module
    args = arguments(read_host_program(f), 0, None)
    run = backends.make(backend, f, realize=realize).call(args, CallContext())
    g = elaborated(CHAIN, "f_grad", {"N": 37}, remat).module
    fwd = backends.make(backend, g, realize=realize).call(args, CallContext(), "f.fwd")
    return run, fwd[0]


@pytest.mark.parametrize("remat", ("store", "recompute"))
@pytest.mark.parametrize("realize", TYPES)
@pytest.mark.parametrize("backend", MACHINE_BACKENDS)
def test_the_forward_inside_a_gradient_gives_runs_bits(backend, realize, remat):
    run, fwd = chain_losses(backend, realize, remat)
    assert np.array_equal(bits(run), bits(fwd)), (run.data, fwd.data)


def test_the_forward_inside_a_gradient_launches_the_forwards_kernels():
    module = stages.kernel(elaborated(CHAIN, "f_grad", {"N": 37}).module, "bf16")
    launches = {
        name: [op.attributes["kernel"].value for op in walk_ops(func, "psk_kernel.launch")]
        for func in walk_ops(module.operation, "func.func")
        if (name := func.attributes["sym_name"].value) in ("f", "f.fwd")
    }
    assert launches["f.fwd"] == launches["f"], launches


@pytest.mark.parametrize("backend", MACHINE_BACKENDS)
def test_the_gradient_stays_in_the_bf16_band(backend):
    g = elaborated(CHAIN, "f_grad", {"N": 37})
    args = arguments(read_host_program(g.module), 0, None)
    exact_grad = backends.make("interp", g.module, 256).call(args, CallContext())
    machine = backends.make(backend, g.module, realize="bf16").call(args, CallContext())
    eps, a = BANDS["bf16"]
    x = exact.to_float64(exact_grad.data)
    y = np.asarray(machine.data).astype(np.float64)
    assert np.all(np.abs(x - y) <= eps * (np.abs(x) + a)), np.max(np.abs(x - y) / (np.abs(x) + a))


@pytest.mark.parametrize("backend", MACHINE_BACKENDS)
def test_a_training_steps_loss_is_runs_loss_in_bf16(backend):
    text = REGRESSION.read_text()
    step = elaborated(text, "Regression.loss", {"N": 8}, train_step=True)
    trainer = backends.make(backend, step.module, realize="bf16")
    program = read_host_program(step.module)
    params = parameters(program, 0, None)
    args, context = first_step(program, trainer, params, steps=10)
    out = trainer.call(args, context, SYMBOL)
    batch = args[3 + len(HYPER) :]
    loss = elaborated(text, "Regression.loss", {"N": 8}).module
    run = backends.make(backend, loss, realize="bf16").call([params, *batch])
    assert np.array_equal(bits(run), bits(out[0])), (run.data, out[0].data)
