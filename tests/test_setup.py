"""Set-up's system dependency: the C compiler every native kernel is linked by. `make
setup` installs one where apt-get can, else stops with one line naming what to install."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import REPO

MAKE = shutil.which("make")
# `make -C DIR test` passes -w down through MAKEFLAGS: the check's own make would print
# "Entering directory" lines that are not the check's
QUIET = ("-s", "--no-print-directory")


@pytest.mark.skipif(MAKE is None, reason="no make")
def test_setup_without_a_c_compiler_stops_with_one_line_naming_it(tmp_path):
    # An empty PATH: no cc, gcc or clang, and no apt-get (nor `id`) to install one with.
    done = subprocess.run(
        [MAKE, *QUIET, "-C", str(REPO), "cc"],
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "no C compiler" in lines[0] and "apt-get install gcc" in lines[0]


@pytest.mark.skipif(
    MAKE is None or not any(map(shutil.which, ("cc", "gcc", "clang"))), reason="no make or cc"
)
def test_setup_with_a_c_compiler_passes_its_check_silently():
    done = subprocess.run([MAKE, *QUIET, "-C", str(REPO), "cc"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
