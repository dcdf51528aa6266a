"""A plan's split as an object, `{"depth": d, "workers": p}`, splits a nest as `[d, p]`
does, and changes no bit; a plan's realization is the type `presk dump` and
`presk run --format json` name."""

from __future__ import annotations

import io
import json
from contextlib import chdir, redirect_stdout

import numpy as np
import pytest
from conftest import REPO

from presk import api, backends, plans
from presk.backends.host import CallContext
from presk.cli import main
from presk.ir.ops import python_value
from presk.kernel.relayout import layout_kernels
from presk.runtime.values import leaves
from presk.toolchain import default_threads
from tests.conformance.suite import Case, inputs, module_of

DOT = Case("dot", "tests/data/layouts.psk", "dot_big", ("I=8", "K=32", "J=16"))
SITE = "dot_big/%0"
DOT_ARGV = [str(REPO / "tests/data/layouts.psk"), "--entry", "dot_big"]
DOT_ARGV += ["--dim", "I=8", "--dim", "K=32", "--dim", "J=16"]


def _plan(tmp_path, layout: dict, realize: str = "f32") -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"realize": realize, "layout": {SITE: layout}}))
    return str(path)


def _native(plan: str | None):
    """The output bits natively (the kernel's plan applied), and how the kernel is split:
    its layout's split, the trip count of the loop divided and over how many workers."""
    module = module_of(DOT)
    backend = backends.make("mlir", module, realize="f32", threads=default_threads(), plan=plan)
    out = backend.call(inputs(DOT), CallContext())
    (kernel,) = layout_kernels(module.operation).values()
    split = python_value(kernel.attributes["psk_kernel.layout"]).get("split")
    attrs = {
        a: kernel.attributes[a].value
        for a in ("psk_kernel.split", "psk_kernel.workers")
        if a in kernel.attributes
    }
    return [np.asarray(t.data).tobytes() for _, t in leaves(out)], split, attrs


@pytest.mark.parametrize("depth", [0, 1])
def test_a_split_object_splits_the_nest_as_the_list_does(tmp_path, depth):
    workers = default_threads()
    tiled = {"form": "tiled", "tile": [1, 8]}
    as_object = _native(_plan(tmp_path, {**tiled, "split": {"depth": depth, "workers": workers}}))
    as_list = _native(_plan(tmp_path, {**tiled, "split": [depth, workers]}))
    unsplit = _native(_plan(tmp_path, {**tiled, "split": "none"}))
    bits, split, attrs = as_object
    assert split == [depth, workers]
    assert attrs["psk_kernel.workers"] == workers and attrs["psk_kernel.split"] > 1
    assert as_object == as_list
    assert bits == unsplit[0]


def test_a_tuned_plan_gives_the_default_plans_bits():
    """A tuned plan moves the nest to whichever point measured fastest here: the bits of
    the default layout, whichever it is."""
    assert _native(plans.TUNED)[0] == _native(plans.DEFAULT)[0]


def _stdout(argv: list) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main.main(argv) == 0
    return out.getvalue()


@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_the_dump_header_names_the_type_the_plan_realizes(tmp_path, realize):
    plan = _plan(tmp_path, {"form": "tiled"}, realize)
    header = _stdout(["dump", *DOT_ARGV, "--stage", "kernel", "--plan", f"@{plan}"])
    assert header.splitlines()[0].endswith(f"launches, {realize}"), header.splitlines()[0]


@pytest.mark.parametrize(
    "flags,label",
    [
        ({"plan": "f32"}, "f32"),
        ({"plan": "bf16"}, "bf16"),
        # a --realize the plan disagrees with is refused: tests/test_bindings_recorded.py
        ({"realize": "bf16"}, "bf16"),
        ({"realize": "@r.json"}, "@r.json"),  # a record is named by its spelling
    ],
)
def test_run_json_names_the_type_the_kernels_realize(tmp_path, flags, label):
    argv = ["run", *DOT_ARGV, "--backend", "kernel", "--format", "json"]
    if "plan" in flags:
        argv += ["--plan", f"@{_plan(tmp_path, {'form': 'tiled'}, flags['plan'])}"]
    if "realize" in flags:
        argv += ["--realize", flags["realize"]]
    (tmp_path / "r.json").write_text(json.dumps({"default": "f32"}))
    with chdir(tmp_path):
        assert json.loads(_stdout(argv))["realize"] == label


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
def test_auto_layouts_give_the_default_layouts_bits(realize):
    """`--plan auto`, the mlir backend's default, moves nests to the cost model's points
    (here a bf16 nest no tiled point fits keeps its default: presk plan once crashed on it)
    and changes no bit."""
    linear = Case("linear", "tutorial/01_linear.psk", "Linear{3, 2}.apply", ("batch=4",))
    for case in (DOT, linear):
        outs = []
        for plan in ("default", "auto"):
            backend = backends.make("mlir", module_of(case), realize=realize, plan=plan)
            out = backend.call(inputs(case), CallContext())
            outs.append([np.asarray(t.data).tobytes() for _, t in leaves(out)])
        assert outs[0] == outs[1], case.name
    linear_argv = [str(REPO / linear.path), "--entry", linear.entry, "--dim", "batch=4"]
    plan = json.loads(_stdout(["plan", *linear_argv, "--realize", realize]))
    assert plan["realize"] == realize


def test_auto_layouts_price_a_site_in_its_own_type(tmp_path):
    """A realization may put one nest in bf16 under an f64 default: the cost model chooses
    that nest's point among bf16's (no k-block, whose stores would round the partial sums;
    it once chose one from f64's points and the lowering refused it, E7002)."""
    record = tmp_path / "r.json"
    record.write_text(json.dumps({"default": "f64", "storage": {"Linear.apply.bwd/%2": "bf16"}}))
    core = api.load(str(REPO / "corpus/nlp/05_gpt.psk")).elaborate(
        "loss", {"B": 8, "T": 64}, {"D": 64, "H": 2, "L": 2}, train_step=True
    )
    module = core.lower(f"@{record}", "auto").module  # held: its ops live while it does
    kernels = layout_kernels(module.operation)
    bf16 = [f for f in kernels.values() if python_value(f.attributes["psk_kernel.type"]) == "bf16"]
    assert bf16 and all(
        python_value(f.attributes["psk_kernel.layout"])["kblock"] == 0 for f in bf16
    )


def test_a_layouts_split_runs_on_no_more_threads_than_the_backend_has(tmp_path):
    """A plan's split names its workers for the machine it was made on; a backend of one
    thread runs the nest in one piece (--threads 1 means one thread), with its bits."""
    tiled = {"form": "tiled", "order": "IJ", "tile": [2, 16], "lanes": 1, "split": [0, 2]}
    plan = _plan(tmp_path, tiled)
    split_bits = _native(plan)[0]
    for threads, pieces in ((1, None), (2, 2)):
        backend = backends.make("mlir", module_of(DOT), realize="f32", threads=threads, plan=plan)
        assert backend.call(inputs(DOT), CallContext()) is not None
        (kernel,) = backend.kernels.values()
        over = backend._split_over(kernel)
        assert (over.threads if over else None) == pieces, threads
        out = backend.call(inputs(DOT), CallContext())
        assert [np.asarray(t.data).tobytes() for _, t in leaves(out)] == split_bits
