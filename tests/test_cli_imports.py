"""What presk's command line imports: asking for help or the version loads no MLIR (a
second of the start-up), so only a chosen command's module is imported."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

# Runs presk's main in a fresh interpreter, then says whether MLIR was imported.
PROBE = """
import sys
from presk.cli.common import run_cli
from presk.cli.main import main
try:
    run_cli(main, sys.argv[1:])
except SystemExit:
    pass
print("mlir" in sys.modules, file=sys.stderr)
"""


# Parses and checks a program as `presk dump --stage ast` does below the command line.
CHECK_PROBE = """
import sys
from presk.fileio import MAX_SOURCE_BYTES, read_text
from presk.front.check import check_program
from presk.front.parser import parse
from presk.front.prelude import with_prelude
from presk.front.unparse import program
tree = with_prelude(parse(read_text(sys.argv[1], MAX_SOURCE_BYTES), sys.argv[1]))
check_program(tree)
assert program(tree)
print("mlir" in sys.modules, file=sys.stderr)
"""


def loads_mlir(*argv: str, probe: str = PROBE) -> bool:
    proc = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"], ["nope"]])
def test_help_version_and_a_usage_error_load_no_mlir(argv):
    assert not loads_mlir(*argv)


def test_parsing_and_checking_a_program_loads_no_mlir():
    """The check reads the language's vocabulary (presk/language.py), not the primitives'
    records, whose kernel rules build MLIR."""
    assert not loads_mlir("tutorial/05_minigpt.psk", probe=CHECK_PROBE)


def test_dump_of_the_syntax_tree_loads_no_mlir():
    assert not loads_mlir("dump", "tutorial/01_linear.psk", "--stage", "ast")


def test_the_probe_sees_a_chosen_command_load_mlir():
    assert loads_mlir("run", "--help")
