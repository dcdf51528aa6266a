"""Backends are named in one place, presk/backends/__init__.py's REGISTRY: a backend that
wraps another is one module and one registry line, and no other module compares a
backend's name (code that must tell backends apart reads their capabilities)."""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys

from conftest import REPO

import presk
from presk import backends
from presk.backends.schedule import HostStep, Launch, Tracer
from presk.export import export_c

REGISTRY = REPO / "presk" / "backends" / "__init__.py"
# A comparison with a backend's name: `interp` is nothing else's name; `kernel` and `mlir`
# are also a stage's and a dump format's, so those count where a backend is compared.
_COMPARED = re.compile(
    r"""[=!]=\s*["']interp["']|["']interp["']\s*[=!]=|\bin\s*\(\s*["']interp["']"""
    r"""|backend\w*(\.\w+)*\s*(==|!=|\bin\b)\s*\(?\s*["'](kernel|mlir)["']"""
    r"""|\.name\s*(==|!=)\s*["'](interp|kernel|mlir)["']"""
    r"""|\(\s*["'](interp|kernel|mlir)["']\s*,\s*["'](interp|kernel|mlir)["']"""
)
WRAPPER = '''"""A test's backend: the kernel evaluator, under another name."""

from presk.backends.kernel import KernelBackend


class Checked(KernelBackend):
    pass
'''
REGISTRY_LINE = (
    '        Backend("checked", "the kernel evaluator again", '
    '"presk.backends.checked:Checked", "kernel"),\n'
)


def test_no_module_but_the_registry_compares_a_backends_name():
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in sorted((REPO / "presk").rglob("*.py"))
        if path != REGISTRY
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _COMPARED.search(line)
    ]
    assert not found, "\n".join(found)


def test_the_name_pattern_finds_the_comparisons_it_is_for():
    for line in (
        'if backend.name == "mlir":',
        'if args.backend != "interp":',
        'native=backend.name != "interp"',
        'BACKENDS = ("kernel", "mlir")',
        'if name == "interp":',
    ):
        assert _COMPARED.search(line), line
    for line in ('if stage == "kernel":', 'if args.format == "mlir":', 'p.kind == "kernel"'):
        assert not _COMPARED.search(line), line


def test_the_registry_says_what_each_backend_is():
    assert backends.names(exact=True) == ("interp", "ball")
    assert backends.names(native=True) == ("mlir",)
    consumed = [backends.backend(n).consumes for n in backends.names()]
    assert consumed == ["core", "core", "kernel", "kernel"]


def _run(tree, *args):
    return subprocess.run(
        [sys.executable, "-c", "from presk.cli.main import entry; entry()", *args],
        capture_output=True,
        text=True,
        cwd=tree,  # `-c` puts the working directory first on the path
        env={**os.environ, "PYTHONPATH": str(tree), "PRESK_PROGRESS": "0"},
    )


def _differing(left, right) -> list[str]:
    """The files that differ, or are only on one side, between two trees (recursively)."""
    cmp = filecmp.dircmp(left, right, ignore=["__pycache__", "built"])  # built: set-up's
    out = [os.path.join(right, n) for n in cmp.left_only + cmp.right_only + cmp.diff_files]
    for sub in cmp.common_dirs:
        out += _differing(os.path.join(left, sub), os.path.join(right, sub))
    return out


def test_a_backend_wrapping_another_is_one_module_and_one_registry_line(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(
        REPO / "presk", tree / "presk", ignore=shutil.ignore_patterns("__pycache__", "built")
    )
    (tree / "presk" / "backends" / "checked.py").write_text(WRAPPER)
    registry = tree / "presk" / "backends" / "__init__.py"
    text = registry.read_text()
    anchor = text.index("    b.name: b\n    for b in (\n") + len("    b.name: b\n    for b in (\n")
    registry.write_text(text[:anchor] + REGISTRY_LINE + text[anchor:])
    changed = sorted(os.path.relpath(p, tree) for p in _differing(REPO / "presk", tree / "presk"))
    assert changed == ["presk/backends/__init__.py", "presk/backends/checked.py"]

    entry = [
        str(REPO / "tutorial/01_linear.psk"),
        "--entry",
        "Linear{3, 2}.apply",
        "--dim",
        "batch=4",
    ]
    ran = _run(tree, "run", *entry, "--backend", "checked", "--realize", "f32")
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.strip().endswith("on checked in f32")
    kernel = _run(tree, "run", *entry, "--backend", "kernel", "--realize", "f32")
    assert ran.stdout == kernel.stdout
    helped = _run(tree, "run", "--help")
    assert "checked: the kernel evaluator again" in " ".join(helped.stdout.split())


def test_what_a_schedule_asks_of_its_backend_is_a_protocol_both_tracers_keep():
    core = presk.load(REPO / "tutorial/01_linear.psk").elaborate(
        "Linear{3, 2}.apply", dims={"batch": 4}
    )
    kernels = core.lower("f32")
    native = kernels.compile("mlir", threads=1).backend
    schedule = export_c(kernels).schedule  # the C export's trace
    assert isinstance(native, Tracer) and isinstance(schedule.backend, Tracer)
    assert all(isinstance(x, Launch | HostStep) for x in schedule.labels)
