"""Every pass module is registered under its own name, with a one-line description."""

import importlib
import pkgutil

import presk.passes
from presk.passes import Pass, registry


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
