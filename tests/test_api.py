"""The library API (presk/api.py): docs/api.md's example, run as written, and each stage."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import contextmanager

import ml_dtypes
import numpy as np
import pytest
from programs import REPO

import presk
from presk.backends.host import CallContext
from presk.cli.common import run_cli
from presk.cli.main import main
from presk.export import export_c
from presk.runtime.values import leaves

REGRESSION = REPO / "tests" / "train" / "mlp_regression.psk"
F64 = (2.0**-40, 2.0**-50)  # the f64 band: |x − x̂| ≤ ε·(|x| + a)

# A function and a module, for derivatives and tuple outputs.
PROGRAM = """dim N
fn f(x : ℝ[N, 3], v : ℝ[3]) -> ℝ { sum(tanh(x · v)) }
module Fit{K} {
  param w : ℝ[K] = normal(scale = 1)
  fn loss(x : ℝ[N, K]) -> ℝ { sum(tanh(x · w)) }
}
"""


def within(mine, exact, band=F64) -> bool:
    eps, a = band
    return bool(np.all(np.abs(mine - exact) <= eps * (np.abs(exact) + a)))


@contextmanager
def refused(code: str):
    """The block must raise a PreskError of `code`."""
    with pytest.raises(presk.PreskError) as e:
        yield e
    assert e.value.code == code, e.value.render()


@pytest.fixture(scope="module")
def core():
    return presk.load(REGRESSION).elaborate("Regression.loss", dims={"N": 8})


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(1).standard_normal((8, 3))


def test_the_documented_example_runs(monkeypatch, capsys):
    text = (REPO / "docs" / "api.md").read_text()
    code = re.search(r"## An example\n.*?```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(REPO)
    exec(compile(code, "docs/api.md", "exec"), {})  # the doc's own code, nothing else
    out = capsys.readouterr().out
    assert "f32: loss 1.54338" in out and "bf16: loss" in out and "a step from loss" in out


def test_the_documented_data_example_runs(tmp_path, monkeypatch, capsys):
    text = (REPO / "docs" / "api.md").read_text()
    code = re.search(r"## Data files and tokens\n.*?```python\n(.*?)```", text, re.S).group(1)
    texts = sorted(str(t) for t in (REPO / "corpus" / "nlp" / "data").glob("*.txt"))
    assert (
        run_cli(main, ["data", *texts, "--window", "8", "--out", str(tmp_path / "lic8.psk.d")]) == 0
    )
    monkeypatch.chdir(tmp_path)  # where the doc's `presk data` wrote it
    capsys.readouterr()
    exec(compile(code, "docs/api.md", "exec"), {})
    assert capsys.readouterr().out == "(13838, 9) (1538, 9)\n'cense to '\n���\n"


def test_a_tokenizer_takes_str_or_bytes_and_gives_bytes_back_exactly(tmp_path):
    (tmp_path / "t.txt").write_bytes(b"ab\xffab\xc3\xa9" * 8)  # a byte that is not UTF-8
    assert (
        run_cli(
            main,
            ["data", str(tmp_path / "t.txt"), "--window", "4", "--out", str(tmp_path / "d.psk.d")],
        )
        == 0
    )
    tokenizer = presk.data(tmp_path / "d.psk.d").tokenizer
    assert tokenizer.size == 256
    tokens = tokenizer.encode(b"ab\xff\xc3\xa9")
    assert (
        tokens.dtype == np.int64
        and tokens.tolist()
        == tokenizer.encode("ab").tolist() + tokenizer.encode(b"\xff\xc3\xa9").tolist()
    )
    assert tokenizer.decode_bytes(tokens) == b"ab\xff\xc3\xa9"
    assert tokenizer.decode(tokens) == "ab\ufffdé"
    with refused("E0001"):
        tokenizer.for_model(0)
    with refused("E9001"):
        presk.data(REGRESSION)


def test_import_presk_loads_no_mlir():
    code = "import sys, presk; assert 'mlir' not in sys.modules; presk.load; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout == "ok\n", done.stderr


# ---- Program ----------------------------------------------------------------------------


def test_a_program_loads_from_a_path_or_from_its_text():
    from_path = presk.load(REGRESSION)
    from_text = presk.load(REGRESSION.read_text())
    assert from_path.text() == from_text.text()
    assert from_path.entries() == from_text.entries()
    assert "Regression.loss" in from_path.entries()
    assert "Dense{In, Out}.apply" in from_path.entries()


def test_a_programs_errors_are_located_and_coded(tmp_path):
    with refused("E0002"):
        presk.load(tmp_path / "missing.psk")
    with refused("E1003") as e:
        presk.load("dim N\nfn f(x : ℝ[N]) -> ℝ { sum(x) \n")
    assert e.value.span.file == "<text>"
    with refused("E0001"):
        presk.load(REGRESSION).mlir()


@pytest.mark.parametrize(
    "entry, dims, code",
    [
        ("nothing", {}, "E3001"),
        ("Regression.loss", {"M": 8}, "E3004"),
        ("Regression.loss", {"N": 0}, "E3005"),
        ("Regression.loss", {"N": 2.5}, "E3005"),
        ("Regression{3}.loss", {}, "E3009"),
    ],
)
def test_bindings_are_refused_as_the_flags_are(entry, dims, code):
    with refused(code):
        presk.load(REGRESSION).elaborate(entry, dims=dims)


# A program with a dim that has no default and a module with consts, for the messages.
BINDINGS = """dim N
fn f(x : ℝ[N]) -> ℝ { sum(x) }
module Dense{In, Out} {
  param w : ℝ[In, Out] = normal(scale = 1)
  fn apply(x : ℝ[N, In]) -> ℝ[N, Out] { x · w }
}
"""


@pytest.mark.parametrize(
    "call, code, named",
    [
        (lambda p: p.elaborate("f", dims={"M": 8}), "E3004", 'dims={"M": …}'),
        (lambda p: p.elaborate("f", dims={"N": 0}), "E3005", 'dims={"N": 0}'),
        (lambda p: p.elaborate("f", dims={"N": "8"}), "E3005", "dims={\"N\": '8'}"),
        (lambda p: p.elaborate("f"), "E3003", 'give dims={"N": …}'),
        (lambda p: p.elaborate("f", consts={"In": 3}), "E3007", 'consts={"In": …}'),
        (lambda p: p.elaborate("Dense.apply", {"N": 2}), "E3006", 'give consts={"In": …}'),
        (lambda p: p.elaborate("Dense.apply", {"N": 2}, {"In": 3, "Q": 2}), "E3007", "Q"),
        (lambda p: p.elaborate("Dense{3, 2}.apply", {"N": 2}, {"In": 4}), "E3007", "In"),
        (lambda p: p.elaborate(None), "E3001", "as the argument entry"),
        (lambda p: p.parameter_type("Dense.apply"), "E3006", 'give consts={"In": …}'),
        (lambda p: p.elaborate("f", {"N": 2}).lower("f16"), "E7001", "realize: 'f16'"),
    ],
)
def test_errors_name_the_argument_not_the_flag(call, code, named):
    with refused(code) as e:
        call(presk.load(BINDINGS))
    assert named in e.value.message and "--" not in e.value.message, e.value.message


def test_the_command_line_still_names_its_flags(tmp_path, capsys):
    program = tmp_path / "b.psk"
    program.write_text(BINDINGS)
    assert run_cli(main, ["run", str(program), "--entry", "f", "--dim", "M=8"]) == 1
    assert "--dim M: the program declares no dim M" in capsys.readouterr().err


def test_a_one_line_source_is_read_as_source_and_a_path_as_a_path(tmp_path, monkeypatch):
    f = presk.load("fn f(x : R[3]) -> R[3] { x * 2 }")
    assert f.entries()[0] == "f"
    out = f.elaborate("f").lower().compile("kernel")(np.array([1.0, 2.0, 3.0]))
    assert out.tolist() == [2.0, 4.0, 6.0]
    with refused("E2001") as e:  # read as source: its errors located in it
        presk.load("fn f(x: R[n]) -> R[n] { x }")
    assert e.value.span.file == "<text>"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my model.psk").write_text("fn f(x : R[3]) -> R[3] { x * 2 }\n")
    assert presk.load("my model.psk").entries()[0] == "f"  # an existing path, spaces and all
    for missing in ("missing.psk", "models/missing", "my other model.psk"):
        with refused("E0002") as e:
            presk.load(missing)
        assert "no such file" in e.value.message.lower(), e.value.message


def test_a_bad_remat_is_refused():
    with refused("E0001"):
        presk.load(REGRESSION).elaborate("Regression.loss", remat="never")


def test_the_parameter_type_needs_no_elaboration():
    t = presk.load(REGRESSION).parameter_type("Regression.loss")
    assert t.text().startswith("{l1: {w: ℝ[3, 16]")


# ---- Core and Kernels -------------------------------------------------------------------


def test_a_core_shows_psk_core(core):
    assert core.text().startswith("-- entry Regression.loss at N=8")
    assert '"psk.' in core.mlir()
    assert core.params().keys() == {"l1.w", "l1.b", "l2.w", "l2.b", "v", "c"}


def test_one_core_lowers_and_compiles_many_times(core, x):
    before = core.mlir()
    f32, bf16 = core.lower("f32"), core.lower("bf16")
    assert "f32[" in f32.text() and "bf16[" in bf16.text()
    assert "psk_kernel.launch" in f32.mlir()
    outputs = [core.lower(r).compile("kernel")(core.params(), x) for r in ("f32", "bf16", "f64")]
    assert len({float(o) for o in outputs}) == 3
    assert core.mlir() == before  # the Core's module is never lowered


def test_each_compiled_stage_shows_what_it_runs(core):
    assert core.reference().text() == core.text()
    assert core.lower("f32").compile("kernel").text() == core.lower("f32").text()
    native = core.lower("f32").compile("mlir")
    assert "affine.for" in native.text() and "psk_kernel.launch" in native.mlir()


def test_kernels_refuse_a_bad_realization_or_plan(core, tmp_path):
    with refused("E7001"):
        core.lower("f16")
    with refused("E0002"):
        core.lower("f32", plan=f"@{tmp_path / 'missing.json'}")


def test_compile_refuses_a_bad_backend_bits_or_threads(core):
    kernels = core.lower()
    for kwargs in ({"backend": "gpu"}, {"threads": 0}):
        with refused("E0001"):
            kernels.compile(**kwargs)
    with refused("E0001"):
        core.reference(bits=1)
    with refused("E0001"):
        core.reference(kind="kernel")


def test_a_reference_is_reached_from_the_core_not_the_kernels(core, x):
    # the kernels' machine type would be ignored by a reference: refused, with the way there
    with pytest.raises(presk.PreskError, match=r"core\.reference"):
        core.lower("f32").compile("interp")
    exact = core.reference(bits=64)
    assert exact.kernels is None and exact.as_text() == core.as_text()


def test_the_kernels_are_lowered_once_and_compiled_from_that_lowering(core, monkeypatch):
    lowerings = []
    real = presk.stages.Lowering.lower
    monkeypatch.setattr(
        presk.stages.Lowering, "lower", lambda self, m: lowerings.append(self) or real(self, m)
    )
    kernels = core.lower("f32")
    kernels.as_text()
    kernels.compile("kernel")
    kernels.compile("mlir", threads=1)
    assert len(lowerings) == 1 and lowerings[0] is kernels.lowering


def test_a_plans_machine_type_is_the_kernels_realization_everywhere(core, tmp_path):
    """`lower("f64", plan)` with a plan naming f32 ran f32 kernels while the Kernels said
    f64, so the C export traced the wrong machine type."""
    plan = tmp_path / "p.json"
    plan.write_text('{"realize": "f32", "layout": {}}')
    kernels = core.lower("f64", f"@{plan}")
    assert kernels.realization.default == "f32"
    module = kernels.module  # held: its ops live while it does
    typed = {
        op.attributes["psk_kernel.type"].value
        for op in module.body.operations
        if "psk_kernel.type" in op.attributes
    }
    assert typed == {"f32"}
    model = export_c(kernels)
    assert model.schedule.backend.machine.name == "f32"
    assert [o.dtype for o in model.outputs] == [np.dtype(np.float32)]


def test_each_stage_shows_the_stages_it_holds(core):
    kernels = core.lower("f32")
    assert "psk.fold" in core.as_text("core", mlir=True) or "func.func" in core.as_text(mlir=True)
    assert "kernel " in kernels.as_text("kernel")
    assert "affine.for" in kernels.as_text("affine", vector_bytes=32)
    assert "llvm.func" in kernels.as_text("llvm", vector_bytes=32)
    with refused("E0001"):
        core.as_text("kernel")
    with refused("E0001"):
        kernels.as_text("core")


# ---- Compiled ---------------------------------------------------------------------------


def test_the_kernel_evaluator_is_within_the_f64_band_of_the_reference(core, x):
    params = core.params(seed=3)
    exact = core.reference(bits=128)
    f64 = core.lower().compile("kernel")
    assert within(f64(params, x), exact(params, x))
    mine, theirs = f64.grad(params, x), exact.grad(params, x)
    assert mine.keys() == theirs.keys() == params.keys()
    assert all(within(mine[p], theirs[p]) for p in params)


def test_the_output_matches_presk_run(core, tmp_path):
    """The API and `presk run` on the same drawn inputs: the same bits."""
    out = tmp_path / "out.npz"
    argv = ["run", str(REGRESSION), "--entry", "Regression.loss", "--dim", "N=8"]
    inputs = tmp_path / "in.npz"
    assert run_cli(main, [*argv, "--backend", "kernel", "--out", str(out)]) == 0
    assert run_cli(main, [*argv, "--save-inputs", str(inputs)]) == 0
    with np.load(out) as o, np.load(inputs) as i:
        mine = core.lower().compile("kernel")(core.params(), i["x"])
        assert np.array_equal(mine, o["output"])


def test_tuples_come_out_as_tuples_and_records_as_dicts(tmp_path):
    program = presk.load(PROGRAM)
    x, v = np.ones((4, 3)), np.array([0.1, 0.2, 0.3])
    vjp = program.elaborate("f.vjp", dims={"N": 4}).lower().compile("kernel")
    dx, dv = vjp(x, v, 1.0)
    assert dx.shape == (4, 3) and dv.shape == (3,)
    grad = program.elaborate("Fit{3}.loss", dims={"N": 4}).lower().compile("kernel").grad
    assert grad({"w": v}, x).keys() == {"w"}


def _raw(compiled, *args):
    """The backend's own output value on `args`: what the realization computed."""
    return compiled.backend.call(compiled.values(args), CallContext(seed=0))


@pytest.mark.parametrize(
    "realize, vector, scalar",
    [
        ("f64", np.float64, np.float64),
        ("f32", np.float32, np.float32),
        ("bf16", ml_dtypes.bfloat16, np.float32),
    ],  # a bf16 scalar is held in f32 (kernels.md)
)
def test_results_come_back_in_the_realizations_type_bit_for_bit(core, x, realize, vector, scalar):
    params = core.params()
    apply = core.derived("Regression.apply").lower(realize).compile("kernel")
    out = apply(params, x)  # ℝ[N]
    assert out.dtype == vector
    assert out.tobytes() == np.asarray(_raw(apply, params, x).data).tobytes()  # never re-rounded
    loss = core.lower(realize).compile("kernel")
    assert loss(params, x).dtype == scalar
    grads = loss.grad(params, x)
    assert grads["l1.w"].dtype == vector and grads["c"].dtype == scalar
    raw = dict(leaves(_raw(loss.grad, params, x)))
    assert all(grads[p].tobytes() == np.asarray(t.data).tobytes() for p, t in raw.items())
    step = loss.train_step(params, x)  # the master parameters, in the backend's type
    assert step.params["l1.w"].dtype == vector and step.m["v"].dtype == vector
    again = loss.train_step(step.params, x, m=step.m, v=step.v, step=2)  # taken back as given
    assert np.isfinite(again.loss)


def test_the_reference_rounds_its_results_once_to_float64(core, x):
    exact = core.reference(bits=64, realize="bf16")  # only parameters take a type
    assert exact(core.params(), x).dtype == np.float64


def test_values_are_checked_against_their_leaves(core, x):
    f = core.lower().compile("kernel")
    params = core.params()
    with refused("E0001"):
        f(params)
    with refused("E9006"):
        f(params, x[:4])
    with refused("E9006"):
        f(params, x.astype(complex))
    with refused("E9005"):
        f({k: a for k, a in params.items() if k != "c"}, x)
    with refused("E9005"):
        f({**params, "d": np.zeros(())}, x)
    with refused("E9005"):
        f({**params, "v": np.zeros(15)}, x)
    with refused("E0001"):
        f(params["v"], x)


def test_a_train_step_is_presk_trains_first_step(core, tmp_path):
    argv = ["train", str(REGRESSION), "--entry", "Regression.loss", "--dim", "N=8"]
    argv += ["--steps", "1", "--backend", "kernel", "--quiet", "--out", str(tmp_path)]
    assert run_cli(main, argv) == 0
    trained = core.params(weights=str(tmp_path / "checkpoint.psk.d"))
    step = core.lower().compile("kernel").train_step(core.params(), steps=1)
    assert step.params.keys() == trained.keys()
    assert all(np.array_equal(step.params[p], trained[p]) for p in trained)
    again = (
        core.lower()
        .compile("kernel")
        .train_step(step.params, np.zeros((8, 3)), m=step.m, v=step.v, step=2, steps=10)
    )
    assert np.isfinite(again.loss) and again.lr > 0


def test_drawn_is_a_call_on_the_seeds_inputs(core):
    f = core.lower().compile("kernel")
    value = f.drawn(seed=0)()
    assert float(value.data) == float(f(core.params(), _drawn_x(core)))


def _drawn_x(core) -> np.ndarray:
    from presk.runtime.inputs import arguments

    return arguments(core.view, 0, None)[0].data


def test_a_run_time_error_keeps_its_place_in_the_source():
    program = presk.load("dim N\nfn f(x : ℝ[N]) -> ℝ { sum(log(x)) }\n")
    f = program.elaborate("f", dims={"N": 2}).reference()
    with refused("E8001") as e:
        f(np.array([-1.0, 1.0]))
    assert (e.value.span.file, e.value.span.line) == ("<text>", 2)
