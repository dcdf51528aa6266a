"""presk's packages form layers, each importing only those below it (docs/architecture.md,
"Layers"); the test reads every import statement of presk and its passes, those inside
functions included, so an import moved into a function cannot hide a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Bottom to top. A module may import its own layer and those below it.
LAYERS: list[tuple[str, ...]] = [
    (
        "presk.errors",
        "presk.fileio",
        "presk.jsontext",
        "presk.constants",
        "presk.toolchain",
        "presk.timing",
        "presk.progress",
    ),
    ("presk.ir", "presk.dialects"),
    ("presk.kernel",),
    ("presk.schemas", "presk.realize", "presk.plans"),
    ("presk.language", "presk.prims"),
    ("presk.core",),
    ("presk.front", "presk.importer"),
    ("presk.runtime",),
    ("presk.quantize", "presk.reach"),
    ("presk.passes",),
    ("presk.pipeline", "presk.stages"),
    ("presk.backends",),
    ("presk.train", "presk.export"),
    ("presk.api",),
    ("presk.precision", "presk.generate", "presk.serve"),
    ("presk.cli",),
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}

# Imports inside functions that load a module only when it is needed, none of them to
# break a cycle: the package's facade (`presk.load` without loading MLIR), the CLI's
# commands (each imported when chosen), and the stages `presk dump` shows past the syntax
# tree, which it shows without MLIR. A backend's module is imported by its registry
# record when one of its executors is made (presk/backends/__init__.py, importlib).
LAZY = {"presk/__init__.py", "presk/cli/main.py", "presk/cli/cmd_dump.py"}


def sources() -> dict[str, Path]:
    """Every module of presk by dotted name."""
    found = {}
    for path in sorted((REPO / "presk").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        found[".".join(parts)] = path
    return found


def unit(module: str) -> str | None:
    """The layer unit a module belongs to: `presk.X` for a package or a top module."""
    parts = module.split(".")
    if parts[0] != "presk" or len(parts) == 1:
        return None
    return ".".join(parts[:2])


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, inside a function) for each import of presk in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, inner) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                if child.module == "presk":  # `from presk import stages`: the submodules
                    found.extend((f"presk.{a.name}", child.lineno, inner) for a in child.names)
                else:
                    found.append((child.module, child.lineno, inner))
            visit(child, inner)

    visit(tree, False)
    return [(m, line, inner) for m, line, inner in found if m.startswith("presk")]


MODULES = sources()


def test_every_unit_has_a_layer():
    missing = {unit(m) for m in MODULES} - set(RANK) - {None}
    assert not missing, f"packages with no layer in LAYERS: {sorted(missing)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_below(module):
    here = unit(module)
    if here is None:
        pytest.skip("the package's facade imports its API lazily")
    upward = [
        f"{MODULES[module].relative_to(REPO)}:{line} imports {target}"
        for target, line, _ in imports(MODULES[module])
        if unit(target) in RANK and RANK[unit(target)] > RANK[here]
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_inside_a_function(module):
    path = MODULES[module]
    if path.relative_to(REPO).as_posix() in LAZY:
        pytest.skip("imports what it runs on demand")
    inner = [
        f"{path.relative_to(REPO)}:{line} imports {target} inside a function"
        for target, line, nested in imports(path)
        if nested
    ]
    assert not inner, "\n".join(inner)


def test_the_architecture_doc_states_this_order():
    """docs/architecture.md's table of layers names the same packages in the same order
    (its row 0, the base, lists no package)."""
    text = (REPO / "docs/architecture.md").read_text()
    table = text.split("## Layers", 1)[1].split("## Packages", 1)[0]
    stated = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            stated.append(tuple(name.strip("`") for name in cells[1].split(", ")))
    assert stated[1:] == LAYERS[1:]
