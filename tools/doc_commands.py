"""The commands the docs show, run and compared with the output the docs print.

A fenced block whose info string is `console` is a transcript: each line starting with
`$ ` is a command (a trailing backslash continues it on the next line), and the lines up
to the next command are its output, stdout and stderr together as a terminal shows them.
In the expected output a line that is only `…` stands for any number of lines, and `…`
inside a line for any text within it (timings, absolute paths). Commands run under bash
in a scratch directory that sees the repository's example folders, with `presk` and
`presk-opt` (or `.venv/bin/presk`) the installed ones, and the blocks of one document run
in order in one directory, so a later block may read what an earlier one wrote. A
command that only sets a variable (`M=…`) sets it for the later commands of its block.

Blocks fenced plainly are not run: they show commands too slow for the test suite.

    python tools/doc_commands.py [DOC.md ...]   # run and report every mismatch
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# What the commands may read, seen from the scratch directory.
SHARED = ("tutorial", "corpus", "tests", "bench", "presk", "docs", "tools", ".venv")
ELLIPSIS = "…"
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=\S*")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass
class Command:
    doc: Path
    line: int  # 1-based line of its `$ `
    text: str
    expected: list[str]

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: Path) -> list[list[Command]]:
    """The console blocks of a document, each a list of its commands."""
    out: list[list[Command]] = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, info = len(m.group(1)), m.group(2)
        start = i + 1
        i += 1
        while i < len(lines) and not _FENCE.match(lines[i]):
            i += 1
        if info == "console":
            body = [(n + 1, line[indent:]) for n, line in enumerate(lines[start:i], start)]
            out.append(_commands(doc, body))
        i += 1
    return out


def _commands(doc: Path, body: list[tuple[int, str]]) -> list[Command]:
    commands: list[Command] = []
    k = 0
    while k < len(body):
        number, line = body[k]
        if not line.startswith("$ "):
            if commands:
                commands[-1].expected.append(line)
            k += 1
            continue
        text = line[2:]
        while text.endswith("\\") and k + 1 < len(body):
            k += 1
            text = text[:-1] + " " + body[k][1].strip()
        commands.append(Command(doc, number, text, []))
        k += 1
    return commands


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether the output matches the transcript, `…` a wildcard (see the module doc)."""
    pattern = "".join(
        r"(?:.*\n)*?" if line.strip() == ELLIPSIS else _line_pattern(line) for line in expected
    )
    return re.fullmatch(pattern, "".join(a.rstrip() + "\n" for a in actual)) is not None


def _line_pattern(line: str) -> str:
    return ".*".join(re.escape(part) for part in line.rstrip().split(ELLIPSIS)) + r"\n"


def scratch() -> tempfile.TemporaryDirectory:
    """A directory holding links to the repository's example folders."""
    directory = tempfile.TemporaryDirectory(prefix="presk-doc-")
    for name in SHARED:
        if (REPO / name).exists():
            os.symlink(REPO / name, Path(directory.name) / name)
    return directory


def run(command: Command, cwd: str, assignments: list[str]) -> list[str]:
    """The command's output, stdout and stderr interleaved as a terminal shows them, after
    the block's variable assignments before it."""
    text = "".join(f"{a}; " for a in assignments) + command.text.replace(".venv/bin/", "")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
        # a terminal's progress line is cleared when its work ends, so a transcript shows
        # none; a pipe would get a line a phase instead (presk/progress.py)
        "PRESK_PROGRESS": "0",
    }
    done = subprocess.run(
        ["bash", "-c", text],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return done.stdout.splitlines()


def check(doc: Path) -> list[str]:
    """Every command of a document's console blocks run in order; a report of each whose
    output differs from the document's."""
    problems = []
    with scratch() as cwd:
        for block in blocks(doc):
            assignments: list[str] = []
            for command in block:
                if _ASSIGNMENT.fullmatch(command.text):  # `M=…`: for the block's later commands
                    assignments.append(command.text)
                    continue
                actual = run(command, cwd, assignments)
                if not matches(command.expected, actual):
                    shown = "\n".join(f"    {a}" for a in actual)
                    problems.append(f"{command.where}: $ {command.text}\n  printed:\n{shown}")
    return problems


def main(argv: list[str]) -> int:
    docs = [Path(a).resolve() for a in argv] or DOCS
    problems = [p for doc in docs for p in check(doc)]
    for p in problems:
        print(p)
    count = sum(len(b) for doc in docs for b in blocks(doc))
    print(f"{count - len(problems)} of {count} documented commands print what the docs say")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
