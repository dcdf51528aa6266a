"""The SHA-256 of every tutorial entry's output (and a tiny corpus GPT's) on the kernel and
mlir backends in f64, f32 and bf16, seed 0, parameters drawn: written to
tests/data/native_digests.json, which tests/test_native_digests.py asserts, so a
refactor of the lowering shows that it keeps every bit.

    .venv/bin/python tools/native_digests.py            # write the file if it is absent
    .venv/bin/python tools/native_digests.py --update   # write it over the recorded one
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from presk.fileio import write_atomic  # noqa: E402
from presk.runtime.values import leaves  # noqa: E402
from tests.conformance.suite import TYPES, Case, machine_output  # noqa: E402
from tests.programs import entries  # noqa: E402

DIGESTS = REPO / "tests" / "data" / "native_digests.json"
BACKENDS = ("kernel", "mlir")
# The corpus GPT at the smallest size its header runs, for each of its entries.
GPT_TINY = ("C:D=16", "C:H=2", "C:L=1", "B=1", "T=8")


def _bindings(args: list[str]) -> tuple[str, ...]:
    """A `# run:` line's --dim and --const as a conformance case's bindings."""
    out = []
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--dim":
            out.append(value)
        elif flag == "--const":
            out.append(f"C:{value}")
    return tuple(out)


def cases() -> list[Case]:
    """Every tutorial `# run:` entry, and each corpus GPT entry at GPT_TINY."""
    out = []
    for path, args in entries():
        entry = args[args.index("--entry") + 1]
        rel = str(path.relative_to(REPO))
        if path.parent.name == "tutorial":
            out.append(Case(f"{path.name} {entry}", rel, entry, _bindings(args), drawn=True))
        elif path.name == "05_gpt.psk":
            out.append(Case(f"{path.name} {entry} (tiny)", rel, entry, GPT_TINY, drawn=True))
    return out


def digest(value) -> str:
    """The SHA-256 of an output's leaves: each one's path, dtype and shape, then its raw bytes."""
    h = hashlib.sha256()
    for path, t in leaves(value):
        data = np.ascontiguousarray(t.data)
        h.update(f"{path} {data.dtype.str} {data.shape}\n".encode())
        h.update(data.tobytes())
    return h.hexdigest()


def case_digests(case: Case) -> dict[str, dict[str, str]]:
    """{machine type: {backend: digest}} for one case."""
    return {t: {b: digest(machine_output(case, t, b)) for b in BACKENDS} for t in TYPES}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--update", action="store_true", help="write over the recorded digests")
    args = p.parse_args(argv)
    if DIGESTS.exists() and not args.update:
        print(f"{DIGESTS.relative_to(REPO)} exists: pass --update to write over it")
        return 1
    record = {}
    for case in cases():
        record[case.name] = case_digests(case)
        for t, by in record[case.name].items():
            same = "" if by["kernel"] == by["mlir"] else "  KERNEL AND MLIR DIFFER"
            print(f"{case.name:45} {t:5} {by['mlir'][:16]}{same}", flush=True)
    write_atomic(str(DIGESTS), json.dumps(record, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
