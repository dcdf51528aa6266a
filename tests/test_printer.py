"""The MLIR printer in C (presk/backends/printer.py): the bindings' text, byte for byte,
from a library set-up builds and a run verifies."""

from __future__ import annotations

import subprocess

import pytest

import presk
from presk.backends import native, printer
from presk.backends.libraries import c_compiler

# A library with the printer's symbols that is not the printer.
IMPOSTOR = """\
#include <string.h>
#include <stdlib.h>
long presk_print_ops(void *const *ops, unsigned long n, char **out) {
  *out = strdup("impostor"); return 8;
}
void presk_print_free(char *text) { free(text); }
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The printer built into a folder of its own, where `printer()` looks."""
    folder = tmp_path / "built"
    monkeypatch.setattr(printer, "INSTALLED", folder)
    printer.printer.cache_clear()
    yield printer.install(folder)
    printer.printer.cache_clear()


def _kernels():
    core = presk.load("tutorial/05_minigpt.psk").elaborate(
        "MiniGPT{64, 16, 2, 2}.loss", dims={"B": 2, "T": 8}, train_step=True
    )
    return list(core.lower("bf16").compile("mlir").backend.kernel_ops.values())


def test_the_printer_gives_the_bindings_text_of_every_kernel(installed):
    kernels = _kernels()
    fast = printer.printer()
    assert fast is not None, "the installed printer was not loaded"
    by_bindings = "".join(native._asm(f) + "\n" for f in kernels)
    assert fast(kernels) == by_bindings
    assert native.bundle_source(kernels) == by_bindings
    assert fast(kernels[:1]) == native._asm(kernels[0]) + "\n"
    assert fast([]) == ""


def test_without_set_up_the_bindings_print_the_same_text(tmp_path, monkeypatch):
    monkeypatch.setattr(printer, "INSTALLED", tmp_path / "not-set-up")
    printer.printer.cache_clear()
    try:
        assert printer.printer() is None
        kernels = _kernels()[:5]
        assert native.bundle_source(kernels) == "".join(native._asm(f) + "\n" for f in kernels)
    finally:
        printer.printer.cache_clear()


def test_an_impostor_in_place_of_the_printer_is_never_run(installed, tmp_path):
    source = tmp_path / "impostor.c"
    source.write_text(IMPOSTOR)
    subprocess.run([c_compiler(), "-shared", "-fPIC", "-o", installed, source], check=True)
    assert printer.printer() is None, "a library that fails its digest was loaded"
    kernels = _kernels()[:3]
    assert "impostor" not in native.bundle_source(kernels)
