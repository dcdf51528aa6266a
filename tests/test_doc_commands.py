"""Every command in a `console` block of README.md and docs/ prints what the doc says
(tools/doc_commands.py), so the docs stay true."""

from __future__ import annotations

import pytest

from tools.doc_commands import DOCS, REPO, blocks, check, matches

CHECKED = [doc for doc in DOCS if blocks(doc)]


@pytest.mark.parametrize("doc", CHECKED, ids=[d.name for d in CHECKED])
def test_documented_commands_print_what_the_doc_says(doc):
    problems = check(doc)
    assert not problems, "\n\n".join(problems)


def test_transcripts_are_checked_somewhere():
    assert len(CHECKED) >= 3


@pytest.mark.parametrize("name", ["fit.psk", "broadcast.psk"])
def test_the_programs_language_md_runs_are_the_ones_it_shows(name):
    # its transcripts run tests/data/language/NAME; the reader sees the program in a psk block
    program = (REPO / "tests" / "data" / "language" / name).read_text()
    assert f"```psk\n{program}```" in (REPO / "docs" / "language.md").read_text()


@pytest.mark.parametrize(
    "expected, actual, ok",
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["a", "c"], False),
        (["a", "…", "z"], ["a", "x", "y", "z"], True),
        (["a", "…", "z"], ["a", "z"], True),
        (["a", "…"], ["a"], True),
        (["took … s"], ["took 3.2 s"], True),
        (["took … s"], ["took 3.2 ms"], False),
        (["a"], ["a", "b"], False),
        (["(x)[1]"], ["(x)[1]"], True),
    ],
)
def test_the_transcript_wildcards(expected, actual, ok):
    assert matches(expected, actual) is ok
