"""Refusals of the FMA realization, `"contract"` in a realization record: a value other
than fma or none (E7001, the schema), a site no kernel has (E7001), a softmax's site,
which has no multiply-add to fuse (E7002), and presk-opt's psk-contract given another
value (E0001)."""

from __future__ import annotations

import json
import os

import pytest

from bad_input.refusal import refuse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINEAR = [
    os.path.join(REPO, "tutorial", "01_linear.psk"),
    *("--entry", "Linear{3, 2}.apply", "--dim", "batch=4"),
]
FAMILIES = os.path.join(REPO, "test", "lit", "kernel", "Inputs", "families.psk")
CORE = os.path.join(REPO, "test", "lit", "passes", "psk-order.mlir")  # a kernel-stage dot


def _record(tmp_path, contract) -> str:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"default": "f32", "contract": contract}))
    return f"@{path}"


@pytest.mark.parametrize(
    "contract,says",
    [
        ("fast", 'contract is "fma", "none" or an object mapping sites'),
        (True, 'contract is "fma", "none" or an object mapping sites'),
        ([], "not []"),
        (
            {"Linear.apply/%0": "fused"},
            'contract: Linear.apply/%0 is one of fma, none, not "fused"',
        ),
        ({"default": 1}, "contract: default is one of fma, none, not 1"),
    ],
)
def test_a_contraction_other_than_fma_or_none_is_refused(tmp_path, contract, says):
    argv = ["run", *LINEAR, "--backend", "kernel", "--realize", _record(tmp_path, contract)]
    refuse(argv, code="E7001", says=says)


def test_a_site_no_kernel_has_is_refused(tmp_path):
    record = _record(tmp_path, {"Linear.apply/%7": "fma"})
    argv = ["run", *LINEAR, "--backend", "kernel", "--realize", record]
    refuse(argv, code="E7001", says="contract: unknown site 'Linear.apply/%7'")


def test_a_softmax_has_no_multiply_add_to_fuse(tmp_path):
    record = _record(tmp_path, {"masked/%1": "fma"})
    argv = ["dump", FAMILIES, "--entry", "masked", "--stage", "kernel", "--realize", record]
    refuse(argv, code="E7002", says="a softmax has no multiply-add to fuse")


def test_presk_opt_refuses_another_contraction():
    argv = [CORE, "--pass-pipeline=builtin.module(psk-contract{contract=fast})"]
    refuse(argv, code="E0001", says="psk-contract: contract=fast is fma or none", tool="presk-opt")
