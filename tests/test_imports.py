"""Every module of presk imports on its own, in a fresh interpreter: no import cycle that
only another module's earlier import hides (issue 14's layering starts here)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from programs import REPO

MODULES = sorted(
    ".".join(("presk", *p.relative_to(REPO / "presk").with_suffix("").parts))
    for p in (REPO / "presk").rglob("*.py")
    if p.name != "__init__.py"
)


@pytest.mark.parametrize("module", MODULES)
def test_a_module_imports_on_its_own(module):
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1]
