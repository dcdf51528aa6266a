"""The tiny MiniGPT trained natively (`--backend mlir`) for 20 steps ends near the exact
reference's run: within 1e-12 (relative 2-norm of the parameters) in f64, 1e-5 in f32."""

from __future__ import annotations

import pytest

from tests.conformance.suite import TRAINING_BOUNDS, corpus, parameter_gap, train_minigpt


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    base = tmp_path_factory.mktemp("training")
    data = corpus(base / "lic8.psk.d")
    return data, train_minigpt(base / "reference", data, "--backend", "interp")


@pytest.mark.parametrize("realize", sorted(TRAINING_BOUNDS))
def test_minigpt_trained_natively_ends_near_the_reference(reference, realize, tmp_path):
    data, ref = reference
    run = train_minigpt(tmp_path, data, "--backend", "mlir", "--realize", realize)
    gap = parameter_gap(run, ref)
    assert 0 < gap <= TRAINING_BOUNDS[realize], f"{realize}: {gap:.3e}"
