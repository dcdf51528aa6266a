"""Every pass module is registered under its own name, with a one-line description."""

import importlib
import pkgutil

import presk.passes
from presk.passes import Pass, registry
from presk.passes.psk_plan import PskPlan
from presk.passes.psk_sum_order import PskSumOrder
from presk.pipeline import Pipeline, Upstream, parse_pipeline


def test_every_module_is_registered_under_its_own_name():
    modules = [m.name for m in pkgutil.iter_modules(presk.passes.__path__)]
    assert modules, "no pass modules found"
    reg = registry()
    for name in modules:
        module = importlib.import_module(f"presk.passes.{name}")
        cls = module.PASS
        assert issubclass(cls, Pass)
        assert cls.name == name.replace("_", "-"), (name, cls.name)
        assert reg[cls.name] is cls
    assert len(reg) == len(modules)


def test_descriptions_are_one_line_and_passes_are_documented():
    for name, cls in registry().items():
        assert cls.description and "\n" not in cls.description, name
        module = importlib.import_module(cls.__module__)
        assert module.__doc__ and module.__doc__.startswith(f"{name}:"), name


def test_every_pass_has_a_lit_test(repo):
    for name in registry():
        assert (repo / "test" / "lit" / "passes" / f"{name}.mlir").exists(), name


def test_a_pipeline_of_pass_objects_prints_text_that_parses_back_to_it():
    steps = [cls() for cls in registry().values()]  # every pass at its defaults
    steps += [
        PskSumOrder(nest="Linear.apply/%0", order="interleaved(2)"),
        PskPlan(file="my plans/p (1),x.json"),
        PskPlan(file="a(b.json"),
    ]
    pipeline = Pipeline((*steps, Upstream("func.func(cse)"), Upstream("canonicalize")))
    back = parse_pipeline(pipeline.text())
    assert back.steps[: len(steps)] == tuple(steps)
    assert back.text() == pipeline.text()
    assert "order=interleaved(2)" in pipeline.text()  # no quotes where none are needed
