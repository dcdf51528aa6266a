"""The shipped PSK programs and the entries their `# run:` headers give."""

from __future__ import annotations

import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(
    [*REPO.glob("tutorial/*.psk"), *REPO.glob("corpus/**/*.psk"), *REPO.glob("tests/train/*.psk")]
)


def runs(path: Path) -> list[list[str]]:
    """The argument lists of the program's `# run:` header lines."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("# run:"):
            out.append(shlex.split(line[len("# run:") :]))
    return out


def entries() -> list[tuple[Path, list[str]]]:
    return [(p, args) for p in PROGRAMS for args in runs(p)]


def program_of(path: Path | str, entry: str, dims: dict[str, int] | None = None, consts=None):
    """The entry of a program elaborated and read for the executors."""
    import presk

    return presk.load(Path(path)).elaborate(entry, dims, consts).view


def reference_run(program, bits: int = 256, seed: int = 0, training: bool = False, step: int = 0):
    """(parameters, arguments, output) of the entry on the reference."""
    from presk.backends.host import CallContext
    from presk.backends.interp import Interpreter
    from presk.runtime.inputs import arguments, parameters

    params = parameters(program, seed, None)
    args = arguments(program, seed, None)
    call_args = ([params] if params is not None else []) + args
    out = Interpreter(program, bits).call(
        call_args, CallContext(training=training, step=step, seed=seed)
    )
    return params, args, out
